import { serve } from '@hono/node-server';
import { buildApp } from '../http/app.ts';
import { storedReplayWindow, type WebhookSecrets } from '../http/webhook-auth.ts';
import { secretsProblem, type StatusAccess } from '../http/status-auth.ts';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import { PrometheusMetrics } from '../observability/prometheus.ts';
import { queueSampler } from './metrics.ts';
import { followFromEnv, watchFromEnv } from '../pipeline/worker.ts';
import { homedir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { QueueUnavailableError } from '../queue/rollout-message.ts';
import { defaultQueueFile, SqliteRolloutQueue } from '../queue/sqlite-queue.ts';
import type { RolloutMessage } from '../queue/rollout-message.ts';
import { visibilitySecondsFromEnv } from '../runtime/config.ts';
import { startLocalWorker } from '../runtime/local-worker.ts';
import { RolloutWaker } from '../pipeline/rollout-waker.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import { cliClusterClients } from './cluster-access.ts';
import { serveNotReady, stuckAfterMsFromEnv } from './serve-readiness.ts';
import { EXIT, type CliIo } from './io.ts';
import { isLoopbackHost, loadRoutes, UNAUTHENTICATED_ACCESS_FLAG, untilStopped, usageError } from './shared.ts';
import { listenErrorText } from './metrics.ts';
import { parseCommand } from './spec.ts';
import { serve as spec } from './specs.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';
import { MemoryRotationStore, type RotationStore } from '../rotations/rotation-store.ts';
import { isKeyBaselineStore } from '../rotations/key-baselines.ts';
import { cliRotationStore } from './rotation-store.ts';
import { openStatusSource, statusPage, statusVault, type StatusSnapshot } from './status-command.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterClients } from '../kube/cluster-clients.ts';
import {
  isNotificationOutbox,
  MemoryNotificationOutbox,
  NOTIFICATION_TTL_MS,
} from '../rotations/notification-outbox.ts';
import { noticeDeadLetters } from '../pipeline/rotation-notices.ts';
import { resolveSinks } from '../notify/sinks.ts';
import { startNotificationLoop } from '../notify/delivery.ts';

/** Concurrent connections `serve` accepts (--max-connections): audit devices, relays and shippers are a handful. */
export const DEFAULT_MAX_CONNECTIONS = 256;

/** Secrets for `serve`: from the environment; none at all only when the user says --insecure-no-auth. */
export function localSecrets(env: CliIo['env'], insecureNoAuth: boolean): WebhookSecrets | { error: string } {
  const secrets: WebhookSecrets = {};
  if (env.VAULT_ROLLOUT_WEBHOOK_SECRET) secrets.hmacSecret = env.VAULT_ROLLOUT_WEBHOOK_SECRET;
  if (env.VAULT_ROLLOUT_WEBHOOK_TOKEN) secrets.bearerToken = env.VAULT_ROLLOUT_WEBHOOK_TOKEN;
  if (secrets.hmacSecret === undefined && secrets.bearerToken === undefined && !insecureNoAuth) {
    return {
      error:
        'no authentication configured: set VAULT_ROLLOUT_WEBHOOK_SECRET (HMAC) and/or VAULT_ROLLOUT_WEBHOOK_TOKEN (bearer), or pass --insecure-no-auth to accept unauthenticated requests',
    };
  }
  const statusToken = env.VAULT_ROLLOUT_STATUS_TOKEN || undefined;
  const problem = secretsProblem({ ...secrets, ...(statusToken !== undefined ? { statusToken } : {}) });
  if (problem !== undefined) return { error: problem };
  if (secrets.hmacSecret === undefined && secrets.bearerToken === undefined) secrets.insecureNoAuth = true;
  return secrets;
}

/** Who may read GET /status: VAULT_ROLLOUT_STATUS_TOKEN, required with --status-page unless --insecure-no-auth. */
export function statusAccess(
  env: CliIo['env'],
  secrets: WebhookSecrets,
  behindTlsProxy: boolean,
): StatusAccess | { error: string } {
  const token = env.VAULT_ROLLOUT_STATUS_TOKEN || undefined;
  const open = secrets.insecureNoAuth === true;
  if (token === undefined && !open) {
    return {
      error:
        "set VAULT_ROLLOUT_STATUS_TOKEN, the page's own read-only credential (at least 32 characters; the " +
        "intake's token is not taken for the page, whose readers must not be able to send changes)",
    };
  }
  return { ...(token !== undefined ? { token } : {}), ...(open ? { insecureNoAuth: true } : {}), behindTlsProxy };
}

/**
 * `vault-rollout serve`: the Lambda HTTP app on Node, with a local queue and worker — the same code as the deployed
 * functions, on one machine. The queue is a SQLite file (lib/queue/sqlite-queue.ts): 202 means the change is on
 * disk, and a kill -9 loses nothing accepted. --dry-run keeps its queue in memory, so nothing it accepted can be
 * restarted for real by a later serve.
 */
/** infra/routes/example.yaml, however it is named (relative, absolute, ./). */
export function isExampleTable(file: string): boolean {
  return resolvePath(file).endsWith(join('infra', 'routes', 'example.yaml'));
}

export async function serveCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  // Ports, counts and durations: bounded by their specs.
  const { port, loops } = values;
  const requestTimeoutMs = values['request-timeout'];
  const maxConnections = values['max-connections'];
  if (values['status-refresh'] % 1000 !== 0)
    return usageError(io, 'serve', '--status-refresh is whole seconds, such as 30s or 1m');
  const refreshSeconds = values['status-refresh'] / 1000;
  // --routes, else VAULT_ROLLOUT_ROUTES, else the example table: a demo, which restarts the example's workloads in
  // whatever clusters this machine reaches. Served only when asked for by name.
  if (isExampleTable(values.routes) && !values['allow-example-routes']) {
    io.stderr(
      `vault-rollout serve: ${values.routes} is the example routing table (the demo): give your own with --routes FILE or VAULT_ROLLOUT_ROUTES, or pass --allow-example-routes to serve it\n`,
    );
    return EXIT.usage;
  }
  args.debug(
    `routes ${values.routes}${io.env.VAULT_ROLLOUT_ROUTES && !argv.some((a) => a === '--routes' || a.startsWith('--routes=')) ? ' (VAULT_ROLLOUT_ROUTES)' : ''}`,
  );
  const secrets = localSecrets(io.env, values['insecure-no-auth']);
  if ('error' in secrets) {
    io.stderr(`vault-rollout serve: ${secrets.error}\n`);
    return EXIT.failure;
  }
  // Unauthenticated and reachable from other hosts: anyone on the network could restart workloads. Only when said twice.
  if (secrets.insecureNoAuth === true && !isLoopbackHost(values.host) && !values[UNAUTHENTICATED_ACCESS_FLAG]) {
    io.stderr(
      `vault-rollout serve: --insecure-no-auth on --host ${values.host.slice(0, 100)} would let anyone who reaches it restart workloads: listen on 127.0.0.1 (the default), set VAULT_ROLLOUT_WEBHOOK_SECRET or VAULT_ROLLOUT_WEBHOOK_TOKEN, or add --${UNAUTHENTICATED_ACCESS_FLAG}\n`,
    );
    return EXIT.failure;
  }
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;

  let follows: boolean;
  let watches: boolean;
  let visibilitySeconds: number;
  let stuckAfterMs: number;
  try {
    follows = followFromEnv(io.env);
    watches = watchFromEnv(io.env);
    visibilitySeconds = visibilitySecondsFromEnv(io.env);
    stuckAfterMs = stuckAfterMsFromEnv(io.env);
  } catch (e) {
    return usageError(io, 'serve', e);
  }
  // Every metric also counted for GET /metrics (Prometheus), beside the EMF lines.
  const prometheus = new PrometheusMetrics();
  const telemetry = prometheus.telemetry(powertoolsTelemetry());
  const queueFile = values['dry-run']
    ? ':memory:'
    : resolvePath(values['queue-file'] ?? defaultQueueFile(io.env, homedir()));
  let queue: SqliteRolloutQueue;
  try {
    queue = new SqliteRolloutQueue({ file: queueFile, visibilityTimeoutMs: visibilitySeconds * 1000 });
  } catch (e) {
    if (!(e instanceof QueueUnavailableError)) throw e;
    io.stderr(`vault-rollout serve: ${e.message}\n`);
    return EXIT.failure;
  }
  const clients = cliClusterClients(io, values.routes);
  // rollout.maxUnavailable's slots: VAULT_ROLLOUT_SLOTS_DB (a SQLite file several processes share) or _TABLE (DynamoDB).
  const slots = await slotStoreFromEnv(io.env);
  // Released waves and halts (lib/rotations): a SQLite file `apply`, `status` and `halts` read too; memory in a dry run.
  const rotations: RotationStore = values['dry-run'] ? new MemoryRotationStore() : await cliRotationStore(io);
  const executor = {
    access: (name: string, config: ClusterConfig) => clients.get(name, config),
    dryRun: values['dry-run'],
    logger: telemetry,
    ...(slots ? { slots } : {}),
  };
  // One shared watch per (cluster, namespace, kind) wakes a held continuation or gate when its rollout ends.
  const waker = values['dry-run'] || !follows || !watches ? undefined : new RolloutWaker(table, executor, telemetry);
  // Notifications: the worker writes rotation events to the outbox in the rotation store; this loop, beside
  // the worker's loops, sends them. A sink that fails or hangs delays no restart.
  const notify = resolveSinks(table.allSinks, { env: io.env });
  for (const [name, problem] of notify.problems)
    io.stderr(`vault-rollout serve: notification sink ${name} is not usable and will be skipped: ${problem}\n`);
  const outbox = isNotificationOutbox(rotations) ? rotations : new MemoryNotificationOutbox();
  const notifier =
    table.allSinks.size > 0 ? startNotificationLoop({ outbox, sinks: notify.sinks, telemetry }) : undefined;
  // Dead letters the queue makes itself (a message received maxReceiveCount times without being worked): one
  // `dead-letter` per message id, swept every 5 s. The first sweep reads back as far as the outbox remembers ids, so a
  // restart catches up on what it missed and the outbox keeps each to one.
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
  const sweeper = notifier ? setInterval(sweep, 5000) : undefined;
  sweeper?.unref();
  if (notifier) sweep();
  const stopSweeper = async (): Promise<void> => {
    clearInterval(sweeper);
    await sweeping;
  };
  prometheus.addSampler(queueSampler(queue));
  const uninstallMetrics = prometheus.install();
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
      ...(values['dry-run'] || !follows ? {} : { follow: { requeue: (m: RolloutMessage) => queue.send([m]) } }),
      notifications: { outbox },
    },
    { loops, ...(waker ? { waker } : {}) },
  );
  // Accepted signatures are remembered in the queue file: a restart of serve does not reopen the replay window.
  let stopping = false;
  const notReady = () => serveNotReady({ queue, worker, stuckAfterMs, stopping: () => stopping });
  // --status-page: GET /status, what `status` reads (the same source, this process's store and cluster clients).
  let page: StatusPageServer | undefined;
  /** Everything started above, stopped: on every way out. */
  const release = async () => {
    await worker.stop();
    page?.close();
    await stopSweeper();
    await notifier?.stop();
    uninstallMetrics();
    queue.close();
  };
  const access = values['status-page'] ? statusAccess(io.env, secrets, values['status-behind-tls-proxy']) : undefined;
  if (access !== undefined && 'error' in access) {
    io.stderr(`vault-rollout serve: --status-page: ${access.error}\n`);
    await release();
    return EXIT.failure;
  }
  if (values['status-page']) {
    const opened = await statusPageServer(io, table, values.routes, {
      rotations,
      clients,
      queue,
      refreshSeconds,
      source: `vault-rollout serve on ${values.host}`,
    });
    if ('error' in opened) {
      io.stderr(`vault-rollout serve: --status-page: ${opened.error}\n`);
      await release();
      return EXIT.failure;
    }
    page = opened;
  }
  // The rotation store keeps the key baselines too: serve's intake compares each write's keys with them.
  const app = buildApp({
    table,
    queue,
    telemetry,
    secrets: async () => secrets,
    replayGuard: storedReplayWindow(queue),
    notReady,
    metrics: () => prometheus.scrape(),
    ...(page ? { statusPage: page.render, ...(access ? { statusAccess: access } : {}) } : {}),
    ...(isKeyBaselineStore(rotations) ? { baselines: rotations } : {}),
  });
  // Bounded request time: a sender that trickles its headers or body (slowloris) is cut off, not waited for. Node checks
  // those deadlines every connectionsCheckingInterval (30 s unless told), so it is checked every second here.
  const server = serve({
    fetch: app.fetch,
    port,
    hostname: values.host,
    serverOptions: {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(requestTimeoutMs, 10_000),
      connectionsCheckingInterval: 1000,
    },
  });
  // Bounded connections: past the cap Node closes a new socket at once, so idle or slow peers cannot exhaust the process.
  server.maxConnections = maxConnections;
  const listenError = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    server.once('listening', () => resolve(undefined));
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
  });
  if (listenError !== undefined) {
    const why =
      listenError.code === 'EADDRINUSE'
        ? 'the address is already in use (stop what holds it, or pass another --port)'
        : listenError.code === 'EACCES'
          ? 'permission denied (ports below 1024 need privileges; pass another --port)'
          : listenError.code === 'EADDRNOTAVAIL'
            ? 'no interface has this address (check --host)'
            : listenErrorText(listenError);
    io.stderr(`vault-rollout serve: cannot listen on ${values.host}:${port}: ${why}\n`);
    await release();
    return EXIT.failure;
  }
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  const auth =
    secrets.hmacSecret !== undefined || secrets.bearerToken !== undefined
      ? [secrets.hmacSecret !== undefined ? 'HMAC' : '', secrets.bearerToken !== undefined ? 'bearer' : '']
          .filter(Boolean)
          .join(' + ')
      : 'NONE (--insecure-no-auth)';
  args.info(
    `vault-rollout serve: listening on http://${values.host}:${bound} (POST /v1/vault/audit, POST /v1/vault/events, GET /healthz, GET /readyz, GET /metrics${page ? ', GET /status' : ''}); routes ${values.routes}: ${table.routes.length} routes, ${table.clusters.size} clusters; auth ${auth}; queue ${queueFile === ':memory:' ? 'in memory (dry run)' : queueFile}${pendingText(queue)}${values['dry-run'] ? '; DRY RUN' : ''}\n`,
  );

  await untilStopped(signal);
  stopping = true;
  args.info('vault-rollout serve: stopping: finishing queued work\n');
  // Stop taking requests; keep-alive clients (an audit device, a relay) must not hold the shutdown open.
  const closed = new Promise((resolve) => server.close(resolve));
  if ('closeIdleConnections' in server) server.closeIdleConnections();
  const forced = setTimeout(() => 'closeAllConnections' in server && server.closeAllConnections(), 5000);
  await closed;
  clearTimeout(forced);
  await Promise.race([worker.idle(), new Promise((r) => setTimeout(r, 10_000))]);
  await release();
  rotations.close?.();
  return EXIT.ok;
}

interface StatusPageServer {
  render(): Promise<string>;
  close(): void;
}

/** A read of the fleet is reused this long: a page left open on several phones, each refreshing, reads it once. */
const PAGE_READ_REUSE_MS = 5_000;

/**
 * serve's status page: status's source (openStatusSource) on serve's own rotation store and cluster clients, Vault's
 * current versions when VAULT_ADDR is set (as for `status`), and the queue's newest dead letters. One read at a time,
 * reused for PAGE_READ_REUSE_MS; each request renders the page (cheap) from it.
 */
async function statusPageServer(
  io: CliIo,
  table: RoutingTable,
  routesFile: string,
  o: {
    rotations: RotationStore;
    clients: ClusterClients;
    queue: SqliteRolloutQueue;
    refreshSeconds: number;
    source: string;
  },
): Promise<StatusPageServer | { error: string }> {
  const vaultAddr = io.env.VAULT_ADDR;
  let vault: Awaited<ReturnType<typeof statusVault>> | undefined;
  if (vaultAddr) {
    if (!URL.canParse(vaultAddr) || !/^https?:\/\//.test(vaultAddr))
      return { error: 'VAULT_ADDR must be http(s)://HOST:PORT' };
    vault = await statusVault(io, vaultAddr, io.env.VAULT_NAMESPACE);
    if ('error' in vault)
      return {
        error: `${vault.error} (VAULT_ADDR is set: the page reads Vault's current versions; unset it to compare what the clusters record)`,
      };
  }
  const source = openStatusSource(io, table, routesFile, {
    clusters: new Set(),
    rotations: o.rotations,
    clients: o.clients,
    ...(vault && 'vault' in vault ? { vault: vault.vault } : {}),
  });
  let last: { at: number; snapshot: Promise<StatusSnapshot> } | undefined;
  const snapshot = (): Promise<StatusSnapshot> => {
    if (last === undefined || Date.now() - last.at > PAGE_READ_REUSE_MS) {
      const read = source.read();
      last = { at: Date.now(), snapshot: read };
      // A failed read is not reused.
      read.catch(() => {
        if (last?.snapshot === read) last = undefined;
      });
    }
    return last.snapshot;
  };
  return {
    render: async () => {
      const status = await snapshot();
      const { deadLetters } = o.queue.counts();
      return statusPage(table, status, {
        store: source.store,
        generatedAt: Date.now(),
        refreshSeconds: o.refreshSeconds,
        source: o.source,
        deadLetters: { recent: o.queue.recentDeadLetters(20), total: deadLetters },
      });
    },
    close: () => {
      if (vault && 'auth' in vault) vault.auth.stop();
      source.close();
    },
  };
}

/** What a restarted serve found in its queue: the work a stop or crash left, worked first. */
function pendingText(queue: SqliteRolloutQueue): string {
  const { available, inFlight, deadLetters } = queue.counts();
  const waiting = available + inFlight;
  return `${waiting > 0 ? ` (${waiting} messages waiting from before)` : ''}${deadLetters > 0 ? ` (${deadLetters} dead letters)` : ''}`;
}
