/**
 * The HTTP intake as a Hono app, built from its dependencies so the same routes run in tests (`app.request`), in
 * `vault-rollout serve` and in Lambda. It answers fast: 202 once the work is durably queued. A down cluster never
 * makes it fail — Vault stops serving when all its audit devices fail, and OpenBao's http device counts any
 * non-2xx as an audit failure — so only what is wrong with the request itself is an error.
 */
import type { KeyBaselineStore } from '../rotations/key-baselines.ts';
import { Hono, type Context } from 'hono';
import { compress } from 'hono/compress';
import { HTTPException } from 'hono/http-exception';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import { intake, type IntakeResult } from '../pipeline/intake.ts';
import { QueueUnavailableError, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { FailedAuthLimiter } from './failed-auth-limiter.ts';
import { decodeBody, nodeIncoming, problem, readIncomingBody, readRawBody } from './request-body.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import { authenticateStatus, basicAllowed, type StatusAccess } from './status-auth.ts';
import {
  authenticate,
  authenticateHeaders,
  ReplayGuard,
  type ReplayWindow,
  type WebhookSecrets,
} from './webhook-auth.ts';

export interface AppDeps {
  table: RoutingTable;
  queue: RolloutQueue;
  /** Resolved once and cached by the caller (SSM in Lambda, environment locally). */
  secrets: () => Promise<WebhookSecrets>;
  telemetry: Telemetry;
  now?: () => number;
  /** Largest body accepted, compressed or not (Lambda itself caps requests at 6 MB). */
  maxBodyBytes?: number;
  /** Where accepted signatures are remembered (default: this process's memory). */
  replayGuard?: ReplayWindow;
  /**
   * Why this process should not get traffic now (serve: the queue cannot be written, the worker loops are stuck);
   * empty when ready. Without it, /readyz answers ready whenever /healthz does.
   */
  notReady?: () => Promise<string[]> | string[];
  /** Key-level restarts: where each path's key baselines are kept; without it every change is every key. */
  baselines?: KeyBaselineStore;
  /**
   * Prometheus's text exposition (serve: GET /metrics). Unauthenticated like /healthz and /readyz: counts with enum and
   * cluster labels only (docs/how-to/metrics-and-dashboards.md says why, and how to keep it from reach).
   */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /**
   * The fleet status page (serve --status-page: GET /status), rendered HTML; absent: no such route. Behind its own
   * read-only credential (status-auth.ts), never the intake's: it names paths, workloads and namespaces.
   */
  statusPage?: () => Promise<string>;
  /** Who may read the status page (required with statusPage; without a token the page refuses every request). */
  statusAccess?: StatusAccess;
  /**
   * GET /safe-to-revoke?path=P (with statusPage, behind the same credential): the answer of
   * lib/report/safe-to-revoke.ts, from the page's status read; `safe` decides 200 or 409.
   */
  safeToRevoke?: (path: string) => Promise<{ safe: boolean }>;
  /** Where refused authentications are counted per peer (default: this process's memory). */
  authLimiter?: FailedAuthLimiter;
}

/**
 * The peer's address: serve's socket (@hono/node-server's `env.incoming`), or the Function URL's source IP in
 * Lambda (hono/aws-lambda's `env.event`); undefined in tests that pass neither.
 */
function peerAddress(env: unknown): string | undefined {
  type Carriers = {
    incoming?: { socket?: { remoteAddress?: unknown } };
    event?: { requestContext?: { http?: { sourceIp?: unknown } } };
  };
  const e = env as Carriers | undefined;
  const address = e?.incoming?.socket?.remoteAddress ?? e?.event?.requestContext?.http?.sourceIp;
  return typeof address === 'string' && address !== '' ? address : undefined;
}

/** The longest `path` GET /safe-to-revoke takes (Vault's own paths are far shorter). */
const MAX_STATUS_PATH = 1024;

const BASIC_CHALLENGE = 'Basic realm="vault-rollout status", charset="UTF-8"';

/** The page runs no script and loads nothing: a policy that forbids both, should an escape ever be missed. */
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;
const MAX_ERRORS_SHOWN = 20;

/** A peer past its refused tries: answered at once, told when to come back, its credentials not even looked at. */
function tooManyFailures(retryAfterSeconds: number): HTTPException {
  const error = `too many refused authentications from this address; retry after ${retryAfterSeconds} s`;
  const headers = { 'retry-after': String(retryAfterSeconds) };
  return new HTTPException(429, { res: Response.json({ error }, { status: 429, headers }) });
}

/**
 * What the routes share: the dependencies, the clock, the body bound, the replay window, and the refused-tries gate.
 */
interface AppContext {
  readonly deps: AppDeps;
  readonly now: () => number;
  readonly maxBodyBytes: number;
  readonly replay: ReplayWindow;
  readonly limiter: FailedAuthLimiter;
}

/** Throws 429 while the peer is past its refused tries. */
function admit(ctx: AppContext, peer: string | undefined): void {
  const wait = ctx.limiter.retryAfterSeconds(peer, ctx.now());
  if (wait !== undefined) throw tooManyFailures(wait);
}

/** Counts a refusal, logs it, and throws the 401. */
function refuse(ctx: AppContext, peer: string | undefined, reason: string, path?: string): never {
  ctx.limiter.failed(peer, ctx.now());
  ctx.deps.telemetry.warn('request refused', { reason, ...(path ? { path } : {}) });
  throw problem(401, reason);
}

/** Liveness: cheap, touches nothing. Readiness: whether accepted work would be queued and worked. */
function registerProbes(app: Hono, deps: AppDeps): void {
  app.get('/healthz', (c) =>
    c.json({ ok: true, routes: deps.table.routes.length, clusters: deps.table.clusters.size }),
  );
  app.get('/readyz', async (c) => {
    let reasons: string[];
    try {
      reasons = deps.notReady === undefined ? [] : await deps.notReady();
    } catch (e) {
      reasons = [`the readiness check failed: ${e instanceof Error ? e.message : String(e)}`];
    }
    return reasons.length === 0 ? c.json({ ok: true }) : c.json({ ok: false, reasons }, 503);
  });
  const metrics = deps.metrics;
  if (metrics !== undefined) {
    app.get('/metrics', async () => {
      const { contentType, body } = await metrics();
      return new Response(body, { headers: { 'content-type': contentType } });
    });
  }
}

/** A request to a status route refused (401), or undefined when its credential is the status page's. */
function statusRefusal(ctx: AppContext, c: Context, path: string): Response | undefined {
  const access = ctx.deps.statusAccess ?? {};
  const peer = peerAddress(c.env);
  admit(ctx, peer);
  const channel = { url: c.req.url, peer, header: (name: string) => c.req.header(name) };
  const auth = authenticateStatus(channel, access);
  if (auth.ok) {
    ctx.limiter.succeeded(peer);
    return undefined;
  }
  ctx.limiter.failed(peer, ctx.now());
  ctx.deps.telemetry.warn('request refused', { reason: auth.reason, path });
  // The browser's prompt only where Basic is taken: elsewhere it would send the password readable.
  const asks = access.token !== undefined && basicAllowed(channel, access);
  const challenge: Record<string, string> = asks ? { 'www-authenticate': BASIC_CHALLENGE } : {};
  return new Response(`401 ${auth.reason}\n`, {
    status: 401,
    headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...challenge },
  });
}

/** Why a `path` query cannot be answered for (a literal Vault path, bounded), or undefined. */
function safeToRevokePathProblem(path: string | undefined): string | undefined {
  if (path === undefined || path === '') return 'give the path: GET /safe-to-revoke?path=secret/app/db';
  if (path.length > MAX_STATUS_PATH) return `path: at most ${MAX_STATUS_PATH} characters`;
  if (/[*{}]/.test(path)) return 'path: one literal path (no * or {})';
  const problem = vaultPathProblem(path.replace(/^\/+/, ''));
  return problem === undefined ? undefined : `path: ${problem}`;
}

/** GET /status and GET /safe-to-revoke, behind their own read-only credential. */
function registerStatusPage(app: Hono, ctx: AppContext, statusPage: () => Promise<string>): void {
  // Compressed when the browser accepts it: a fleet's page is repetitive markup (hundreds of KiB to a phone).
  app.get('/status', compress(), async (c) => {
    const refused = statusRefusal(ctx, c, '/status');
    if (refused) return refused;
    return new Response(await statusPage(), { headers: PAGE_HEADERS });
  });
  const answer = ctx.deps.safeToRevoke;
  if (answer === undefined) return;
  app.get('/safe-to-revoke', async (c) => {
    const refused = statusRefusal(ctx, c, '/safe-to-revoke');
    if (refused) return refused;
    const path = c.req.query('path');
    const problem = safeToRevokePathProblem(path);
    if (problem !== undefined) return c.json({ error: problem }, 400, { 'cache-control': 'no-store' });
    const result = await answer(path as string);
    return c.json(result, result.safe ? 200 : 409, { 'cache-control': 'no-store' });
  });
}

/**
 * The body of an intake request once it is authenticated, as text, with how it was authenticated. Order matters:
 * what the headers alone can refuse is refused before a byte of the body is read (a bearer token in full; HMAC's
 * timestamp window and signature form); then a bounded read, authentication on the raw bytes, and only then any
 * decompression or parsing.
 */
async function authenticatedBody(ctx: AppContext, c: Context): Promise<{ text: string; method: string }> {
  const { deps, now, maxBodyBytes } = ctx;
  const peer = peerAddress(c.env);
  admit(ctx, peer);
  const secrets = await deps.secrets();
  const header = (name: string) => c.req.header(name);
  const early = authenticateHeaders(header, secrets, Math.floor(now() / 1000));
  if (!early.ok) refuse(ctx, peer, early.reason);
  const incoming = nodeIncoming(c.env);
  const raw = incoming ? await readIncomingBody(incoming, maxBodyBytes) : await readRawBody(c.req.raw, maxBodyBytes);
  if (raw.byteLength === 0)
    throw problem(400, 'the body is empty: send audit entries, event notifications or a log-shipper batch');
  const auth = authenticate(header, raw, secrets, Math.floor(now() / 1000), ctx.replay);
  if (!auth.ok) return refuse(ctx, peer, auth.reason);
  ctx.limiter.succeeded(peer);
  return { text: decodeBody(c.req.raw, raw, maxBodyBytes), method: auth.method };
}

/** The intake of an authenticated body; a queue that cannot be written is a 503 (nothing was accepted). */
async function queueChanges(ctx: AppContext, text: string): Promise<IntakeResult> {
  const { deps } = ctx;
  try {
    return await intake(text, {
      table: deps.table,
      queue: deps.queue,
      now: ctx.now,
      ...(deps.baselines ? { baselines: deps.baselines } : {}),
    });
  } catch (e) {
    if (e instanceof QueueUnavailableError) {
      deps.telemetry.error('queue unavailable', { error: e.message });
      throw problem(503, 'the queue is unavailable; retry later (nothing was accepted)');
    }
    throw e;
  }
}

/** The metrics and the log line of an accepted request, published before the answer. */
function reportAccepted(telemetry: Telemetry, { summary, parsed, plan }: IntakeResult, method: string): void {
  telemetry.setCorrelationId(parsed.changes[0]?.id);
  telemetry.metric(METRICS.changesReceived, summary.accepted, 'Count');
  // One data point per reason with its count, not one per record: a busy Vault's batch is mostly ignored reads,
  // and each dimensioned point is an EMF document of its own (it was 96 % of the intake's time at 1,000 entries).
  const ignored = new Map<string, number>();
  for (const i of parsed.ignored) ignored.set(i.reason, (ignored.get(i.reason) ?? 0) + 1);
  for (const [reason, count] of ignored) telemetry.metric(METRICS.recordsIgnored, count, 'Count', { reason });
  if (summary.rejected > 0) telemetry.metric(METRICS.recordsRejected, summary.rejected, 'Count');
  telemetry.info('accepted', {
    ...summary,
    auth: method,
    changes: parsed.changes.map((ch) => ({ id: ch.id, path: ch.path, version: ch.version })),
    targets: plan.targets.length,
  });
  // Publish this request's metrics now: a Lambda container may be frozen right after the answer.
  telemetry.flush();
}

/** POST /v1/vault/audit and /v1/vault/events: authenticate, queue, answer 202. */
function registerIntake(app: Hono, ctx: AppContext): void {
  const receive = async (c: Context) => {
    const { text, method } = await authenticatedBody(ctx, c);
    const result = await queueChanges(ctx, text);
    reportAccepted(ctx.deps.telemetry, result, method);
    const { summary, parsed, plan } = result;
    return Response.json(
      {
        ...summary,
        errors: parsed.rejected.slice(0, MAX_ERRORS_SHOWN),
        problems: plan.problems.slice(0, MAX_ERRORS_SHOWN),
      },
      { status: 202 },
    );
  };
  // Both routes take every input format, whatever the Content-Type: senders rarely set it right.
  app.post('/v1/vault/audit', receive);
  app.post('/v1/vault/events', receive);
}

export function buildApp(deps: AppDeps): Hono {
  const ctx: AppContext = {
    deps,
    now: deps.now ?? Date.now,
    maxBodyBytes: deps.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    replay: deps.replayGuard ?? new ReplayGuard(),
    limiter: deps.authLimiter ?? new FailedAuthLimiter(),
  };
  const app = new Hono();
  registerProbes(app, deps);
  const statusPage = deps.statusPage;
  if (statusPage !== undefined) registerStatusPage(app, ctx, statusPage);
  registerIntake(app, ctx);
  app.notFound((c) =>
    c.json(
      {
        error: `no route ${c.req.method} ${c.req.path}; use POST /v1/vault/audit, POST /v1/vault/events, GET /healthz or GET /readyz${statusPage ? ', GET /status' : ''}${statusPage && deps.safeToRevoke ? ', GET /safe-to-revoke?path=P' : ''}`,
      },
      404,
    ),
  );
  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    deps.telemetry.error('unexpected error', { error: error instanceof Error ? error.message : String(error) });
    return c.json({ error: 'internal error' }, 500);
  });
  return app;
}
