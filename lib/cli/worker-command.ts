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
import type { Telemetry } from '../kernel/telemetry.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';

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
  const settings = workerSettings(io, table, values['batch-size']);
  if (typeof settings === 'number') return settings;
  const { follows, watches, visibilityTimeoutSeconds, batchSize } = settings;
  // Every metric also counted for Prometheus; served only with --metrics-port.
  const prometheus = new PrometheusMetrics();
  const telemetry = prometheus.telemetry(powertoolsTelemetry());
  const metricsServer = await startMetricsListener(io, 'worker', prometheus, values);
  if (metricsServer !== undefined && 'error' in metricsServer) return usageError(io, 'worker', metricsServer.error);
  const uninstallMetrics = metricsServer === undefined ? () => {} : prometheus.install();
  const dryRun = values['dry-run'];
  const flags = { dryRun, follows, watches };
  const { clients, executor, waker } = await workerExecutor(io, values.routes, table, telemetry, flags);
  const client = new SQSClient({ region: io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION ?? 'us-east-1' });
  const queue = new SqsRolloutQueue({ client, queueUrl: values['queue-url'] });
  const follow = dryRun || !follows ? {} : { follow: { requeue: (m: RolloutMessage) => queue.send([m]) } };
  // Released waves and halts: VAULT_ROLLOUT_STATE_TABLE (the Lambda deployment's DynamoDB table) or a SQLite file.
  const rotations = await cliRotationStore(io);
  // Refused messages go to the DLQ with their reason when --dlq-url (else VAULT_ROLLOUT_DLQ_URL, which its spec
  // reads) names it; else the redrive policy moves them there after maxReceiveCount receives.
  const dlqUrl = values['dlq-url'];
  const { outbox, notifier } = startWorkerNotifications(io, table, rotations, telemetry);
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
  args.info(startedText(values['queue-url'], values.concurrency, batchSize, dlqUrl));
  await untilStopped(signal);
  await worker.stop();
  await notifier?.stop();
  uninstallMetrics();
  await metricsServer?.close();
  return EXIT.ok;
}

/** How the worker reaches the clusters (and slots), and the waker following rollouts by watches (none in a dry run). */
async function workerExecutor(
  io: CliIo,
  routesFile: string,
  table: RoutingTable,
  telemetry: Telemetry,
  o: { dryRun: boolean; follows: boolean; watches: boolean },
) {
  const clients = cliClusterClients(io, routesFile);
  // rollout.maxUnavailable's slots: VAULT_ROLLOUT_SLOTS_DB (a SQLite file several processes share) or _TABLE
  // (DynamoDB).
  const slots = await slotStoreFromEnv(io.env);
  const executor = {
    access: (name: string, config: ClusterConfig) => clients.get(name, config),
    dryRun: o.dryRun,
    logger: telemetry,
    ...(slots ? { slots } : {}),
  };
  // One shared watch per (cluster, namespace, kind) wakes a held continuation or gate when its rollout ends.
  const waker = o.dryRun || !o.follows || !o.watches ? undefined : new RolloutWaker(table, executor, telemetry);
  return { clients, executor, waker };
}

/** The worker's settings from the environment and --batch-size, or the exit code of a usage error. */
function workerSettings(
  io: CliIo,
  table: RoutingTable,
  batchSizeFlag: string,
): { follows: boolean; watches: boolean; visibilityTimeoutSeconds: number; batchSize: number } | number {
  try {
    return {
      follows: followFromEnv(io.env),
      watches: watchFromEnv(io.env),
      visibilityTimeoutSeconds: visibilitySecondsFromEnv(io.env),
      // auto: 10 when a route sets rollout.settle (settle coalesces what one receive returns), else 1.
      batchSize: workerBatchSize(table, batchSizeFlag),
    };
  } catch (e) {
    return usageError(io, 'worker', e);
  }
}

/**
 * Notifications: the worker writes rotation events to the outbox in the rotation store (DynamoDB or SQLite); this
 * loop, beside the pollers (never in them), sends them, as in serve. A sink that fails or hangs delays no message.
 * Against the Lambda deployment's table its notify function may send them too: each delivery is leased by a
 * conditional update, so one sender at a time has it.
 */
function startWorkerNotifications(io: CliIo, table: RoutingTable, rotations: RotationStore, telemetry: Telemetry) {
  const outbox = table.allSinks.size > 0 && isNotificationOutbox(rotations) ? rotations : undefined;
  const notify = outbox ? resolveSinks(table.allSinks, { env: io.env }) : undefined;
  for (const [name, problem] of notify?.problems ?? [])
    io.stderr(`vault-rollout worker: notification sink ${name} is not usable and will be skipped: ${problem}\n`);
  const notifier = outbox && notify ? startNotificationLoop({ outbox, sinks: notify.sinks, telemetry }) : undefined;
  return { outbox, notifier };
}

/** The worker's start line: the queue, its pollers and batch size, and where refused messages go. */
function startedText(queueUrl: string, concurrency: number, batchSize: number, dlqUrl: string | undefined): string {
  return `vault-rollout worker: polling ${queueUrl} with ${concurrency} pollers, batches of up to ${batchSize}; refused messages ${dlqUrl ? `to ${dlqUrl} with their reason` : 'redelivered until the redrive policy moves them to the DLQ (give --dlq-url to send them there at once, with their reason)'}\n`;
}
