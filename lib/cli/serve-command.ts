/**
 * `vault-rollout serve`: the Lambda HTTP app on Node, with a local queue and worker — the same code as the deployed
 * functions, on one machine. The queue is a SQLite file (lib/queue/sqlite-queue.ts): 202 means the change is on
 * disk, and a kill -9 loses nothing accepted. --dry-run keeps its queue in memory, so nothing it accepted can be
 * restarted for real by a later serve.
 */
import { serve, type ServerType } from '@hono/node-server';
import { buildApp } from '../http/app.ts';
import { storedReplayWindow, type WebhookSecrets } from '../http/webhook-auth.ts';
import { secretsProblem, type StatusAccess } from '../http/status-auth.ts';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import { PrometheusMetrics } from '../observability/prometheus.ts';
import { followFromEnv, watchFromEnv } from '../pipeline/worker.ts';
import { homedir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { QueueUnavailableError } from '../queue/rollout-message.ts';
import { defaultQueueFile, SqliteRolloutQueue } from '../queue/sqlite-queue.ts';
import { visibilitySecondsFromEnv } from '../runtime/config.ts';
import { serveNotReady, stuckAfterMsFromEnv } from './serve-readiness.ts';
import { EXIT, type CliIo } from './io.ts';
import { isLoopbackHost, loadRoutes, UNAUTHENTICATED_ACCESS_FLAG, untilStopped, usageError } from './shared.ts';
import { listenErrorText } from './metrics.ts';
import { parseCommand, type Parsed, type Values } from './spec.ts';
import { serve as spec } from './service-specs.ts';
import { startServeServices, type ServeServices } from './serve-services.ts';
import { statusPageServer, type StatusPageServer } from './serve-status-page.ts';
import { isKeyBaselineStore } from '../rotations/key-baselines.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import type { Telemetry } from '../kernel/telemetry.ts';

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

/** infra/routes/example.yaml, however it is named (relative, absolute, ./). */
export function isExampleTable(file: string): boolean {
  return resolvePath(file).endsWith(join('infra', 'routes', 'example.yaml'));
}

type ServeValues = Values<typeof spec>;

export async function serveCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const checked = checkServeFlags(args, argv, io);
  if (typeof checked === 'number') return checked;
  const { secrets } = checked;
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  let env: ReturnType<typeof serveEnvironment>;
  try {
    env = serveEnvironment(io.env);
  } catch (e) {
    return usageError(io, 'serve', e);
  }
  // Every metric also counted for GET /metrics (Prometheus), beside the EMF lines.
  const prometheus = new PrometheusMetrics();
  const telemetry = prometheus.telemetry(powertoolsTelemetry());
  const opened = openServeQueue(io, values, env.visibilitySeconds);
  if (typeof opened === 'number') return opened;
  const { queue, queueFile } = opened;
  const { follows, watches } = env;
  const services = await startServeServices({
    io,
    routesFile: values.routes,
    dryRun: values['dry-run'],
    loops: values.loops,
    follows,
    watches,
    table,
    queue,
    prometheus,
    telemetry,
  });
  const { worker, rotations } = services;
  let stopping = false;
  const notReady = () => serveNotReady({ queue, worker, stuckAfterMs: env.stuckAfterMs, stopping: () => stopping });
  const status = await openServeStatusPage(io, values, table, secrets, checked.refreshSeconds, services, queue);
  if (typeof status === 'number') {
    await services.release();
    return status;
  }
  const { page, access } = status;
  const app = serveApp({ table, queue, telemetry, secrets, notReady, prometheus, rotations, page, access });
  const listening = await listenServer(app.fetch, values);
  if ('error' in listening) {
    io.stderr(`vault-rollout serve: cannot listen on ${values.host}:${values.port}: ${listening.error}\n`);
    await services.release();
    return EXIT.failure;
  }
  const { server } = listening;
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : values.port;
  args.info(listeningText({ values, bound, table, secrets, queueFile, queue, statusPage: page !== undefined }));
  await untilStopped(signal);
  stopping = true;
  args.info('vault-rollout serve: stopping: finishing queued work\n');
  await stopServing(server, services);
  return EXIT.ok;
}

/**
 * The checks of serve's flags before anything is opened: whole-second refresh, the example table only by name, and
 * authentication (none only when said, and on a non-loopback address only when said twice). Returns the exit code
 * on a refusal.
 */
function checkServeFlags(
  args: Parsed<typeof spec>,
  argv: readonly string[],
  io: CliIo,
): { secrets: WebhookSecrets; refreshSeconds: number } | number {
  const { values } = args;
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
  // Unauthenticated and reachable from other hosts: anyone on the network could restart workloads. Only when said
  // twice.
  if (secrets.insecureNoAuth === true && !isLoopbackHost(values.host) && !values[UNAUTHENTICATED_ACCESS_FLAG]) {
    io.stderr(
      `vault-rollout serve: --insecure-no-auth on --host ${values.host.slice(0, 100)} would let anyone who reaches it restart workloads: listen on 127.0.0.1 (the default), set VAULT_ROLLOUT_WEBHOOK_SECRET or VAULT_ROLLOUT_WEBHOOK_TOKEN, or add --${UNAUTHENTICATED_ACCESS_FLAG}\n`,
    );
    return EXIT.failure;
  }
  return { secrets, refreshSeconds };
}

/**
 * serve's settings from the environment (following, watches, visibility, when a loop counts as stuck); throws on a bad
 * one.
 */
function serveEnvironment(env: CliIo['env']) {
  return {
    follows: followFromEnv(env),
    watches: watchFromEnv(env),
    visibilitySeconds: visibilitySecondsFromEnv(env),
    stuckAfterMs: stuckAfterMsFromEnv(env),
  };
}

/** The SQLite queue (in memory for a dry run), or the exit code when it cannot be opened (said on stderr). */
function openServeQueue(
  io: CliIo,
  values: ServeValues,
  visibilitySeconds: number,
): { queue: SqliteRolloutQueue; queueFile: string } | number {
  const queueFile = values['dry-run']
    ? ':memory:'
    : resolvePath(values['queue-file'] ?? defaultQueueFile(io.env, homedir()));
  try {
    return {
      queue: new SqliteRolloutQueue({ file: queueFile, visibilityTimeoutMs: visibilitySeconds * 1000 }),
      queueFile,
    };
  } catch (e) {
    if (!(e instanceof QueueUnavailableError)) throw e;
    io.stderr(`vault-rollout serve: ${e.message}\n`);
    return EXIT.failure;
  }
}

/** The HTTP app of serve's intake on its queue, with /metrics, /readyz and (when opened) /status. */
function serveApp(o: {
  table: RoutingTable;
  queue: SqliteRolloutQueue;
  telemetry: Telemetry;
  secrets: WebhookSecrets;
  notReady: () => string[];
  prometheus: PrometheusMetrics;
  rotations: RotationStore;
  page: StatusPageServer | undefined;
  access: StatusAccess | undefined;
}) {
  const { page, access, rotations, queue } = o;
  // The rotation store keeps the key baselines too: serve's intake compares each write's keys with them.
  return buildApp({
    table: o.table,
    queue,
    telemetry: o.telemetry,
    secrets: async () => o.secrets,
    // Accepted signatures are remembered in the queue file: a restart of serve does not reopen the replay window.
    replayGuard: storedReplayWindow(queue),
    notReady: o.notReady,
    metrics: () => o.prometheus.scrape(),
    ...(page
      ? { statusPage: page.render, safeToRevoke: page.safeToRevoke, ...(access ? { statusAccess: access } : {}) }
      : {}),
    ...(isKeyBaselineStore(rotations) ? { baselines: rotations } : {}),
  });
}

/**
 * --status-page: GET /status, what `status` reads (the same source, this process's store and cluster clients),
 * behind its own credential. Returns the page and its access, nothing without the flag, or the exit code on a refusal.
 */
async function openServeStatusPage(
  io: CliIo,
  values: ServeValues,
  table: RoutingTable,
  secrets: WebhookSecrets,
  refreshSeconds: number,
  services: ServeServices,
  queue: SqliteRolloutQueue,
): Promise<{ page?: StatusPageServer; access?: StatusAccess } | number> {
  const access = values['status-page'] ? statusAccess(io.env, secrets, values['status-behind-tls-proxy']) : undefined;
  if (access !== undefined && 'error' in access) {
    io.stderr(`vault-rollout serve: --status-page: ${access.error}\n`);
    return EXIT.failure;
  }
  if (!values['status-page']) return {};
  const opened = await statusPageServer(io, table, values.routes, {
    rotations: services.rotations,
    clients: services.clients,
    queue,
    refreshSeconds,
    source: `vault-rollout serve on ${values.host}`,
  });
  if ('error' in opened) {
    io.stderr(`vault-rollout serve: --status-page: ${opened.error}\n`);
    return EXIT.failure;
  }
  services.page = opened;
  return { page: opened, ...(access ? { access } : {}) };
}

/** What serve's listener calls per request (the app's fetch). */
type Fetch = Parameters<typeof serve>[0]['fetch'];

/** The listening HTTP server, or why it cannot listen. */
async function listenServer(fetch: Fetch, values: ServeValues): Promise<{ server: ServerType } | { error: string }> {
  const requestTimeoutMs = values['request-timeout'];
  // Bounded request time: a sender that trickles its headers or body (slowloris) is cut off, not waited for. Node
  // checks
  // those deadlines every connectionsCheckingInterval (30 s unless told), so it is checked every second here.
  const server = serve({
    fetch,
    port: values.port,
    hostname: values.host,
    serverOptions: {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(requestTimeoutMs, 10_000),
      connectionsCheckingInterval: 1000,
    },
  });
  // Bounded connections: past the cap Node closes a new socket at once, so idle or slow peers cannot exhaust the
  // process.
  server.maxConnections = values['max-connections'];
  const listenError = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    server.once('listening', () => resolve(undefined));
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
  });
  if (listenError === undefined) return { server };
  const why =
    listenError.code === 'EADDRINUSE'
      ? 'the address is already in use (stop what holds it, or pass another --port)'
      : listenError.code === 'EACCES'
        ? 'permission denied (ports below 1024 need privileges; pass another --port)'
        : listenError.code === 'EADDRNOTAVAIL'
          ? 'no interface has this address (check --host)'
          : listenErrorText(listenError);
  return { error: why };
}

/** serve's start line: where it listens, the table, authentication and the queue. */
function listeningText(o: {
  values: ServeValues;
  bound: number;
  table: RoutingTable;
  secrets: WebhookSecrets;
  queueFile: string;
  queue: SqliteRolloutQueue;
  statusPage: boolean;
}): string {
  const { values, secrets, table, queueFile } = o;
  const auth =
    secrets.hmacSecret !== undefined || secrets.bearerToken !== undefined
      ? [secrets.hmacSecret !== undefined ? 'HMAC' : '', secrets.bearerToken !== undefined ? 'bearer' : '']
          .filter(Boolean)
          .join(' + ')
      : 'NONE (--insecure-no-auth)';
  return `vault-rollout serve: listening on http://${values.host}:${o.bound} (POST /v1/vault/audit, POST /v1/vault/events, GET /healthz, GET /readyz, GET /metrics${o.statusPage ? ', GET /status, GET /safe-to-revoke' : ''}); routes ${values.routes}: ${table.routes.length} routes, ${table.clusters.size} clusters; auth ${auth}; queue ${queueFile === ':memory:' ? 'in memory (dry run)' : queueFile}${pendingText(o.queue)}${values['dry-run'] ? '; DRY RUN' : ''}\n`;
}

/** The way out after a stop signal: no new requests, queued work finished (10 s at most), everything released. */
async function stopServing(server: ServerType, services: ServeServices): Promise<void> {
  // Stop taking requests; keep-alive clients (an audit device, a relay) must not hold the shutdown open.
  const closed = new Promise((resolve) => server.close(resolve));
  if ('closeIdleConnections' in server) server.closeIdleConnections();
  const forced = setTimeout(() => 'closeAllConnections' in server && server.closeAllConnections(), 5000);
  await closed;
  clearTimeout(forced);
  await Promise.race([services.worker.idle(), new Promise((r) => setTimeout(r, 10_000))]);
  await services.release();
  services.rotations.close?.();
}

/** What a restarted serve found in its queue: the work a stop or crash left, worked first. */
function pendingText(queue: SqliteRolloutQueue): string {
  const { available, inFlight, deadLetters } = queue.counts();
  const waiting = available + inFlight;
  return `${waiting > 0 ? ` (${waiting} messages waiting from before)` : ''}${deadLetters > 0 ? ` (${deadLetters} dead letters)` : ''}`;
}
