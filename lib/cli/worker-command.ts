import { SQSClient } from '@aws-sdk/client-sqs';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import { PrometheusMetrics } from '../observability/prometheus.ts';
import { startMetricsListener } from './metrics.ts';
import { parseCommand } from './spec.ts';
import { worker as spec } from './service-specs.ts';
import { workerBatchSize } from '../deploy/worker-batch-size.ts';
import { followFromEnv, watchFromEnv } from '../pipeline/worker.ts';
import { RolloutWaker } from '../pipeline/rollout-waker.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import type { RolloutMessage } from '../queue/rollout-message.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import { visibilitySecondsFromEnv } from '../runtime/config.ts';
import { sqsDeadLetter, startSqsWorker } from '../runtime/sqs-worker.ts';
import { cliRotationStore } from './rotation-store.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, untilStopped, usageError } from './shared.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';
import { isNotificationOutbox } from '../rotations/notification-outbox.ts';
import { resolveSinks } from '../notify/sinks.ts';
import { startNotificationLoop } from '../notify/delivery.ts';

/**
 * `vault-rollout worker --routes FILE --queue-url URL`: the queue consumer outside Lambda (a laptop, a VM, a
 * Kubernetes Deployment). The SQS endpoint may be overridden with the AWS SDK's AWS_ENDPOINT_URL_SQS.
 */
export async function workerCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined || values['queue-url'] === undefined)
    return usageError(io, 'worker', 'give --routes FILE and --queue-url URL');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  let follows: boolean;
  let watches: boolean;
  let visibilityTimeoutSeconds: number;
  try {
    follows = followFromEnv(io.env);
    watches = watchFromEnv(io.env);
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
  // Every metric also counted for Prometheus; served only with --metrics-port.
  const prometheus = new PrometheusMetrics();
  const telemetry = prometheus.telemetry(powertoolsTelemetry());
  const metricsServer = await startMetricsListener(io, 'worker', prometheus, values);
  if (metricsServer !== undefined && 'error' in metricsServer) return usageError(io, 'worker', metricsServer.error);
  const uninstallMetrics = metricsServer === undefined ? () => {} : prometheus.install();
  const clients = cliClusterClients(io, values.routes);
  // rollout.maxUnavailable's slots: VAULT_ROLLOUT_SLOTS_DB (a SQLite file several processes share) or _TABLE (DynamoDB).
  const slots = await slotStoreFromEnv(io.env);
  const client = new SQSClient({ region: io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION ?? 'us-east-1' });
  const queue = new SqsRolloutQueue({ client, queueUrl: values['queue-url'] });
  const follow = values['dry-run'] || !follows ? {} : { follow: { requeue: (m: RolloutMessage) => queue.send([m]) } };
  // Released waves and halts: VAULT_ROLLOUT_STATE_TABLE (the Lambda deployment's DynamoDB table) or a SQLite file.
  const rotations = await cliRotationStore(io);
  // Refused messages go to the DLQ with their reason when --dlq-url (or VAULT_ROLLOUT_DLQ_URL) names it; else the
  // redrive policy moves them there after maxReceiveCount receives.
  // --dlq-url, else VAULT_ROLLOUT_DLQ_URL (its spec reads the variable).
  const dlqUrl = values['dlq-url'];
  const executor = {
    access: (name: string, config: ClusterConfig) => clients.get(name, config),
    dryRun: values['dry-run'],
    logger: telemetry,
    ...(slots ? { slots } : {}),
  };
  // One shared watch per (cluster, namespace, kind) wakes a held continuation or gate when its rollout ends.
  const waker = values['dry-run'] || !follows || !watches ? undefined : new RolloutWaker(table, executor, telemetry);
  // Notifications: the worker writes rotation events to the outbox in the rotation store (DynamoDB or
  // SQLite); this loop, beside the pollers (never in them), sends them, as in serve. A sink that fails or hangs delays
  // no message. Against the Lambda deployment's table its notify function may send them too: each delivery is leased
  // by a conditional update, so one sender at a time has it.
  const outbox = table.allSinks.size > 0 && isNotificationOutbox(rotations) ? rotations : undefined;
  const notify = outbox ? resolveSinks(table.allSinks, { env: io.env }) : undefined;
  for (const [name, problem] of notify?.problems ?? [])
    io.stderr(`vault-rollout worker: notification sink ${name} is not usable and will be skipped: ${problem}\n`);
  const notifier = outbox && notify ? startNotificationLoop({ outbox, sinks: notify.sinks, telemetry }) : undefined;
  const worker = startSqsWorker(
    client,
    {
      table,
      rotations,
      deadLetter: sqsDeadLetter(client, dlqUrl),
      telemetry,
      executor,
      invalidate: (c) => clients.invalidate(c),
      queue,
      ...follow,
      ...(outbox ? { notifications: { outbox } } : {}),
    },
    {
      queueUrl: values['queue-url'],
      concurrency: values.concurrency,
      batchSize,
      visibilityTimeoutSeconds,
      ...(waker ? { waker } : {}),
    },
  );
  args.info(
    `vault-rollout worker: polling ${values['queue-url']} with ${values.concurrency} pollers, batches of up to ${batchSize}; refused messages ${dlqUrl ? `to ${dlqUrl} with their reason` : 'redelivered until the redrive policy moves them to the DLQ (give --dlq-url to send them there at once, with their reason)'}\n`,
  );
  await untilStopped(signal);
  await worker.stop();
  await notifier?.stop();
  uninstallMetrics();
  await metricsServer?.close();
  return EXIT.ok;
}
