import { serve } from '@hono/node-server';
import { parseArgs } from 'node:util';
import { buildApp } from '../http/app.ts';
import type { WebhookSecrets } from '../http/webhook-auth.ts';
import { powertoolsTelemetry } from '../observability/powertools.ts';
import { followBudgetFromEnv } from '../pipeline/worker.ts';
import { MemoryRolloutQueue } from '../queue/memory-queue.ts';
import type { RolloutMessage } from '../queue/rollout-message.ts';
import { startLocalWorker } from '../runtime/local-worker.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, untilStopped, usageError } from './shared.ts';

/** Secrets for `serve`: from the environment; none at all only when the user says --insecure-no-auth. */
export function localSecrets(env: CliIo['env'], insecureNoAuth: boolean): WebhookSecrets | { error: string } {
  const secrets: WebhookSecrets = {};
  if (env.VAULT_ROLLOUT_WEBHOOK_SECRET) secrets.hmacSecret = env.VAULT_ROLLOUT_WEBHOOK_SECRET;
  if (env.VAULT_ROLLOUT_WEBHOOK_TOKEN) secrets.bearerToken = env.VAULT_ROLLOUT_WEBHOOK_TOKEN;
  if (secrets.hmacSecret === undefined && secrets.bearerToken === undefined && !insecureNoAuth) {
    return { error: 'no authentication configured: set VAULT_ROLLOUT_WEBHOOK_SECRET (HMAC) and/or VAULT_ROLLOUT_WEBHOOK_TOKEN (bearer), or pass --insecure-no-auth to accept unauthenticated requests' };
  }
  if (secrets.hmacSecret === undefined && secrets.bearerToken === undefined) secrets.insecureNoAuth = true;
  return secrets;
}

/**
 * `vault-rollout serve`: the Lambda HTTP app on Node, with an in-process queue and worker — the same code as the
 * deployed functions, on a laptop. The queue lives in memory: for durability, deploy (SQS) or use the relay's spool.
 */
export async function serveCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { routes: { type: 'string', default: 'infra/routes/example.yaml' }, port: { type: 'string', default: '8787' }, host: { type: 'string', default: '127.0.0.1' }, 'insecure-no-auth': { type: 'boolean', default: false }, 'dry-run': { type: 'boolean', default: false }, 'request-timeout': { type: 'string', default: '30' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    return usageError(io, 'serve', e);
  }
  const port = Number(values.port);
  const requestTimeoutMs = Number(values['request-timeout']) * 1000;
  if (!(requestTimeoutMs > 0)) return usageError(io, 'serve', '--request-timeout must be a number of seconds');
  if (!Number.isInteger(port) || port < 0 || port > 65535) return usageError(io, 'serve', '--port must be a port number');
  const secrets = localSecrets(io.env, values['insecure-no-auth']);
  if ('error' in secrets) {
    io.stderr(`vault-rollout serve: ${secrets.error}\n`);
    return EXIT.failure;
  }
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;

  const telemetry = powertoolsTelemetry();
  const queue = new MemoryRolloutQueue();
  let followBudgetMs: number;
  try {
    followBudgetMs = followBudgetFromEnv(io.env);
  } catch (e) {
    return usageError(io, 'serve', e);
  }
  const clients = cliClusterClients(io, values.routes);
  const worker = startLocalWorker(queue, {
    table,
    telemetry,
    executor: { access: (name, config) => clients.get(name, config), dryRun: values['dry-run'], logger: telemetry },
    invalidate: (cluster) => clients.invalidate(cluster),
    // Gates queue the next wave here (issue #12).
    queue,
    // As in Lambda: follow each rollout for a bounded time, then hand it back to the (in-process) queue.
    ...(values['dry-run'] || followBudgetMs === 0 ? {} : { follow: { budgetMs: () => followBudgetMs, requeue: (m: RolloutMessage) => queue.send([m]) } }),
  });
  const app = buildApp({ table, queue, telemetry, secrets: async () => secrets });
  // Bounded request time: a sender that trickles its body (slowloris) is cut off, not waited for.
  const server = serve({ fetch: app.fetch, port, hostname: values.host, serverOptions: { requestTimeout: requestTimeoutMs, headersTimeout: Math.min(requestTimeoutMs, 10_000) } });
  const listenError = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    server.once('listening', () => resolve(undefined));
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
  });
  if (listenError !== undefined) {
    const why = listenError.code === 'EADDRINUSE' ? 'the address is already in use (stop what holds it, or pass another --port)' : listenError.code === 'EACCES' ? 'permission denied (ports below 1024 need privileges; pass another --port)' : listenError.code === 'EADDRNOTAVAIL' ? 'no interface has this address (check --host)' : (listenError.code ?? listenError.message);
    io.stderr(`vault-rollout serve: cannot listen on ${values.host}:${port}: ${why}\n`);
    await worker.stop();
    return EXIT.failure;
  }
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  const auth = secrets.hmacSecret !== undefined || secrets.bearerToken !== undefined ? [secrets.hmacSecret !== undefined ? 'HMAC' : '', secrets.bearerToken !== undefined ? 'bearer' : ''].filter(Boolean).join(' + ') : 'NONE (--insecure-no-auth)';
  io.stderr(`vault-rollout serve: listening on http://${values.host}:${bound} (POST /v1/vault/audit, POST /v1/vault/events, GET /healthz); routes ${values.routes}: ${table.routes.length} routes, ${table.clusters.size} clusters; auth ${auth}${values['dry-run'] ? '; DRY RUN' : ''}\n`);

  await untilStopped(signal);
  io.stderr('vault-rollout serve: stopping: finishing queued work\n');
  // Stop taking requests; keep-alive clients (an audit device, a relay) must not hold the shutdown open.
  const closed = new Promise((resolve) => server.close(resolve));
  if ('closeIdleConnections' in server) server.closeIdleConnections();
  const forced = setTimeout(() => 'closeAllConnections' in server && server.closeAllConnections(), 5000);
  await closed;
  clearTimeout(forced);
  await Promise.race([worker.idle(), new Promise((r) => setTimeout(r, 10_000))]);
  await worker.stop();
  return EXIT.ok;
}
