import { SQSClient } from '@aws-sdk/client-sqs';
import { parseArgs } from 'node:util';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import { workerBatchSize } from '../deploy/worker-batch-size.ts';
import { followBudgetFromEnv } from '../pipeline/worker.ts';
import type { RolloutMessage } from '../queue/rollout-message.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import { visibilitySecondsFromEnv } from '../runtime/config.ts';
import { startSqsWorker } from '../runtime/sqs-worker.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, untilStopped, usageError } from './shared.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';

/**
 * `vault-rollout worker --routes FILE --queue-url URL`: the queue consumer outside Lambda (a laptop, a VM, a
 * Kubernetes Deployment). The SQS endpoint may be overridden with the AWS SDK's AWS_ENDPOINT_URL_SQS.
 */
export async function workerCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { routes: { type: 'string' }, 'queue-url': { type: 'string' }, concurrency: { type: 'string', default: '4' }, 'batch-size': { type: 'string', default: 'auto' }, 'dry-run': { type: 'boolean', default: false } }, strict: true, allowPositionals: false }));
  } catch (e) {
    return usageError(io, 'worker', e);
  }
  if (values.routes === undefined || values['queue-url'] === undefined) return usageError(io, 'worker', 'give --routes FILE and --queue-url URL');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  let followBudgetMs: number;
  let visibilityTimeoutSeconds: number;
  try {
    followBudgetMs = followBudgetFromEnv(io.env);
    visibilityTimeoutSeconds = visibilitySecondsFromEnv(io.env);
  } catch (e) {
    return usageError(io, 'worker', e);
  }
  let batchSize: number;
  try {
    // auto: 10 when a route sets rollout.settle (settle coalesces what one receive returns), else 1.
    batchSize = workerBatchSize(table, values['batch-size']);
  } catch (e) {
    return usageError(io, 'worker', e);
  }
  const telemetry = powertoolsTelemetry();
  const clients = cliClusterClients(io, values.routes);
  // rollout.maxUnavailable's slots: VAULT_ROLLOUT_SLOTS_DB (a SQLite file several processes share) or _TABLE (DynamoDB).
  const slots = await slotStoreFromEnv(io.env);
  const client = new SQSClient({ region: io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION ?? 'us-east-1' });
  const queue = new SqsRolloutQueue({ client, queueUrl: values['queue-url'] });
  const follow = values['dry-run'] || followBudgetMs === 0 ? {} : { follow: { budgetMs: () => followBudgetMs, requeue: (m: RolloutMessage) => queue.send([m]) } };
  const worker = startSqsWorker(
    client,
    { table, telemetry, executor: { access: (name, config) => clients.get(name, config), dryRun: values['dry-run'], logger: telemetry, ...(slots ? { slots } : {}) }, invalidate: (c) => clients.invalidate(c), queue, ...follow },
    { queueUrl: values['queue-url'], concurrency: Number(values.concurrency), batchSize, visibilityTimeoutSeconds },
  );
  io.stderr(`vault-rollout worker: polling ${values['queue-url']} with ${values.concurrency} pollers, batches of up to ${batchSize}\n`);
  await untilStopped(signal);
  await worker.stop();
  return EXIT.ok;
}
