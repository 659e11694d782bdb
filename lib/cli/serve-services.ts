/**
 * What `serve` runs behind its HTTP listener: the cluster clients, slots and rotation store, the local worker on the
 * queue (with its waker), the notification loop with its dead-letter sweep, and the queue's metrics. Started together
 * and released together, on every way out of serve.
 */
import type { ClusterClients } from '../kube/cluster-clients.ts';
import type { Telemetry } from '../kernel/telemetry.ts';
import { startNotificationLoop } from '../notify/delivery.ts';
import { resolveSinks } from '../notify/sinks.ts';
import type { PrometheusMetrics } from '../observability/prometheus.ts';
import { RolloutWaker } from '../pipeline/rollout-waker.ts';
import { noticeDeadLetters } from '../pipeline/rotation-notices.ts';
import type { RolloutMessage } from '../queue/rollout-message.ts';
import type { SqliteRolloutQueue } from '../queue/sqlite-queue.ts';
import {
  isNotificationOutbox,
  MemoryNotificationOutbox,
  NOTIFICATION_TTL_MS,
  type NotificationOutbox,
} from '../rotations/notification-outbox.ts';
import { MemoryRotationStore, type RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import { startLocalWorker, type LocalWorker } from '../runtime/local-worker.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';
import { cliClusterClients } from './cluster-access.ts';
import type { CliIo } from './io.ts';
import { queueSampler } from './metrics.ts';
import { cliRotationStore } from './rotation-store.ts';
import type { StatusPageServer } from './serve-status-page.ts';

export interface ServeServicesOptions {
  readonly io: CliIo;
  readonly routesFile: string;
  readonly dryRun: boolean;
  readonly loops: number;
  /** Follow each restart (VAULT_ROLLOUT_FOLLOW), and wake held work by watches (VAULT_ROLLOUT_WATCH). */
  readonly follows: boolean;
  readonly watches: boolean;
  readonly table: RoutingTable;
  readonly queue: SqliteRolloutQueue;
  readonly prometheus: PrometheusMetrics;
  readonly telemetry: Telemetry;
}

export interface ServeServices {
  readonly clients: ClusterClients;
  readonly rotations: RotationStore;
  readonly worker: LocalWorker;
  /** The status page, once opened: release() closes it too. */
  page?: StatusPageServer;
  /** Everything started, stopped: on every way out. */
  release(): Promise<void>;
}

export async function startServeServices(o: ServeServicesOptions): Promise<ServeServices> {
  const { io, table, queue, telemetry, dryRun } = o;
  const clients = cliClusterClients(io, o.routesFile);
  // rollout.maxUnavailable's slots: VAULT_ROLLOUT_SLOTS_DB (a SQLite file several processes share) or _TABLE
  // (DynamoDB).
  const slots = await slotStoreFromEnv(io.env);
  // Released waves and halts (lib/rotations): a SQLite file `apply`, `status` and `halts` read too; memory in a dry
  // run.
  const rotations: RotationStore = dryRun ? new MemoryRotationStore() : await cliRotationStore(io);
  const executor = {
    access: (name: string, config: ClusterConfig) => clients.get(name, config),
    dryRun,
    logger: telemetry,
    ...(slots ? { slots } : {}),
  };
  // One shared watch per (cluster, namespace, kind) wakes a held continuation or gate when its rollout ends.
  const waker = dryRun || !o.follows || !o.watches ? undefined : new RolloutWaker(table, executor, telemetry);
  const { outbox, notifier, sweeper } = startNotifications(io, table, queue, rotations, telemetry);
  o.prometheus.addSampler(queueSampler(queue));
  const uninstallMetrics = o.prometheus.install();
  const worker = startLocalWorker(
    queue,
    {
      table,
      rotations,
      telemetry,
      executor,
      invalidate: (cluster) => clients.invalidate(cluster),
      // Gates queue the next wave here.
      queue,
      // As in Lambda: follow each restart out of line, by continuations in the (in-process) queue.
      ...(dryRun || !o.follows ? {} : { follow: { requeue: (m: RolloutMessage) => queue.send([m]) } }),
      notifications: { outbox },
    },
    { loops: o.loops, ...(waker ? { waker } : {}) },
  );
  const services: ServeServices = {
    clients,
    rotations,
    worker,
    release: async () => {
      await worker.stop();
      services.page?.close();
      await sweeper?.stop();
      await notifier?.stop();
      uninstallMetrics();
      queue.close();
    },
  };
  return services;
}

/**
 * Notifications: the worker writes rotation events to the outbox in the rotation store; this loop, beside the
 * worker's loops, sends them. A sink that fails or hangs delays no restart.
 */
function startNotifications(
  io: CliIo,
  table: RoutingTable,
  queue: SqliteRolloutQueue,
  rotations: RotationStore,
  telemetry: Telemetry,
) {
  const notify = resolveSinks(table.allSinks, { env: io.env });
  for (const [name, problem] of notify.problems)
    io.stderr(`vault-rollout serve: notification sink ${name} is not usable and will be skipped: ${problem}\n`);
  const outbox = isNotificationOutbox(rotations) ? rotations : new MemoryNotificationOutbox();
  const notifier =
    table.allSinks.size > 0 ? startNotificationLoop({ outbox, sinks: notify.sinks, telemetry }) : undefined;
  const sweeper = notifier ? startDeadLetterSweeper(table, telemetry, outbox, queue) : undefined;
  return { outbox, notifier, sweeper };
}

/**
 * Dead letters the queue makes itself (a message received maxReceiveCount times without being worked): one
 * `dead-letter` per message id, swept every 5 s. The first sweep reads back as far as the outbox remembers ids, so a
 * restart catches up on what it missed and the outbox keeps each to one.
 */
function startDeadLetterSweeper(
  table: RoutingTable,
  telemetry: Telemetry,
  outbox: NotificationOutbox,
  queue: SqliteRolloutQueue,
): { stop(): Promise<void> } {
  let sweepSince = Date.now() - NOTIFICATION_TTL_MS;
  let sweeping: Promise<void> | undefined;
  const sweep = (): void => {
    if (sweeping) return;
    const started = Date.now();
    sweeping = noticeDeadLetters({ table, telemetry, notifications: { outbox } }, queue, sweepSince)
      .then(() => void (sweepSince = started - 1000))
      .catch((e: unknown) =>
        telemetry.warn('could not read the dead letters for notifications; the next sweep tries again', {
          error: e instanceof Error ? e.name : String(e),
        }),
      )
      .finally(() => (sweeping = undefined));
  };
  const timer = setInterval(sweep, 5000);
  timer.unref();
  sweep();
  return {
    stop: async () => {
      clearInterval(timer);
      await sweeping;
    },
  };
}
