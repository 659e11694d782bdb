/**
 * The HTTP intake as a Hono app, built from its dependencies so the same routes run in tests (`app.request`), in
 * `vault-rollout serve` and in Lambda. It answers fast: 202 once the work is durably queued. A down cluster never
 * makes it fail — Vault stops serving when all its audit devices fail, and OpenBao's http device counts any
 * non-2xx as an audit failure — so only what is wrong with the request itself is an error.
 */
import type { KeyBaselineStore } from '../rotations/key-baselines.ts';
import { IncomingMessage } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { Hono } from 'hono';
import { compress } from 'hono/compress';
import { HTTPException } from 'hono/http-exception';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import { intake } from '../pipeline/intake.ts';
import { QueueUnavailableError, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { FailedAuthLimiter } from './failed-auth-limiter.ts';
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
/** Stateless between calls (no `stream: true`), so one serves every request instead of one built per request. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

function problem(status: 400 | 401 | 413 | 503, error: string): HTTPException {
  return new HTTPException(status, { res: Response.json({ error }, { status }) });
}

/** A peer past its refused tries: answered at once, told when to come back, its credentials not even looked at. */
function tooManyFailures(retryAfterSeconds: number): HTTPException {
  const error = `too many refused authentications from this address; retry after ${retryAfterSeconds} s`;
  const headers = { 'retry-after': String(retryAfterSeconds) };
  return new HTTPException(429, { res: Response.json({ error }, { status: 429, headers }) });
}

/**
 * The raw body, counted while it streams in: a body over the limit is refused at the first byte past it, whether the
 * sender declared a Content-Length or sent chunks, so an unauthenticated upload never grows the process.
 */
async function readRawBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw problem(413, `the body is larger than ${maxBytes} bytes`);
  if (request.body === null) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      // The server drains or drops the rest of the upload; nothing more is kept.
      await reader.cancel().catch(() => undefined);
      throw problem(413, `the body is larger than ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * `readRawBody` on the Node request itself, which `serve` (@hono/node-server) hands over as `env.incoming`: the same
 * bound, counted per chunk, without the web stream wrapped around it (that wrapper cost more than the audit
 * entries' JSON.parse on 1,000-entry bodies). Past the limit it stops reading; Node drains or drops the rest.
 */
function readIncomingBody(incoming: IncomingMessage, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(incoming.headers['content-length'] ?? '0');
  if (declared > maxBytes) return Promise.reject(problem(413, `the body is larger than ${maxBytes} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const finish = (settle: () => void) => {
      incoming.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      settle();
    };
    const onData = (chunk: Buffer) => {
      total += chunk.byteLength;
      if (total > maxBytes) {
        incoming.pause();
        finish(() => reject(problem(413, `the body is larger than ${maxBytes} bytes`)));
      } else chunks.push(chunk);
    };
    const onEnd = () =>
      finish(() => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total)));
    const onError = (error: Error) => finish(() => reject(error));
    const onClose = () => finish(() => reject(new Error('the connection closed before the body ended')));
    incoming.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

/** The Node request under a Hono context, when the server is @hono/node-server (`serve`); undefined in Lambda and tests. */
function nodeIncoming(env: unknown): IncomingMessage | undefined {
  const incoming = (env as { incoming?: unknown } | undefined)?.incoming;
  // Not yet read by anyone: hono's own body readers mark it read.
  return incoming instanceof IncomingMessage && !incoming.readableDidRead ? incoming : undefined;
}

/**
 * The authenticated body as text: gunzipped (once authenticated: the signature covers the bytes sent) when the sender
 * said so, inflating at most `maxBytes`, and valid UTF-8 — or a 400/413 that says why.
 */
function decodeBody(request: Request, raw: Uint8Array, maxBytes: number): string {
  let bytes = raw;
  if ((request.headers.get('content-encoding') ?? '').toLowerCase() === 'gzip') {
    try {
      // maxOutputLength stops inflating at the cap: a gzip bomb costs at most maxBytes of memory.
      bytes = gunzipSync(raw, { maxOutputLength: maxBytes });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
        throw problem(413, `the decompressed body is larger than ${maxBytes} bytes`);
      throw problem(400, 'Content-Encoding says gzip, but the body is not gzip');
    }
  }
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw problem(400, 'the body is not UTF-8 text');
  }
}

export function buildApp(deps: AppDeps): Hono {
  const now = deps.now ?? Date.now;
  const maxBodyBytes = deps.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const replay = deps.replayGuard ?? new ReplayGuard();
  const app = new Hono();

  // Liveness: cheap, touches nothing. Readiness: whether accepted work would be queued and worked.
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

  const limiter = deps.authLimiter ?? new FailedAuthLimiter();
  /** Throws 429 while the peer is past its refused tries. */
  const admit = (peer: string | undefined): void => {
    const wait = limiter.retryAfterSeconds(peer, now());
    if (wait !== undefined) throw tooManyFailures(wait);
  };
  /** Counts a refusal, logs it, and throws the 401. */
  const refuse = (peer: string | undefined, reason: string, path?: string): never => {
    limiter.failed(peer, now());
    deps.telemetry.warn('request refused', { reason, ...(path ? { path } : {}) });
    throw problem(401, reason);
  };

  const statusPage = deps.statusPage;
  if (statusPage !== undefined) {
    const access = deps.statusAccess ?? {};
    // Compressed when the browser accepts it: a fleet's page is repetitive markup (hundreds of KiB to a phone).
    app.get('/status', compress(), async (c) => {
      const peer = peerAddress(c.env);
      admit(peer);
      const channel = { url: c.req.url, peer, header: (name: string) => c.req.header(name) };
      const auth = authenticateStatus(channel, access);
      if (!auth.ok) {
        limiter.failed(peer, now());
        deps.telemetry.warn('request refused', { reason: auth.reason, path: '/status' });
        // The browser's prompt only where Basic is taken: elsewhere it would send the password readable.
        const asks = access.token !== undefined && basicAllowed(channel, access);
        const challenge: Record<string, string> = asks ? { 'www-authenticate': BASIC_CHALLENGE } : {};
        return new Response(`401 ${auth.reason}\n`, {
          status: 401,
          headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...challenge },
        });
      }
      limiter.succeeded(peer);
      return new Response(await statusPage(), { headers: PAGE_HEADERS });
    });
  }

  const receive = async (c: { req: { raw: Request; header(name: string): string | undefined }; env: unknown }) => {
    // Order matters: what the headers alone can refuse is refused before a byte of the body is read (a bearer token
    // in full; HMAC's timestamp window and signature form); then a bounded read, authentication on the raw bytes, and
    // only then any decompression or parsing.
    const peer = peerAddress(c.env);
    admit(peer);
    const secrets = await deps.secrets();
    const header = (name: string) => c.req.header(name);
    const early = authenticateHeaders(header, secrets, Math.floor(now() / 1000));
    if (!early.ok) refuse(peer, early.reason);
    const incoming = nodeIncoming(c.env);
    const raw = incoming ? await readIncomingBody(incoming, maxBodyBytes) : await readRawBody(c.req.raw, maxBodyBytes);
    if (raw.byteLength === 0)
      throw problem(400, 'the body is empty: send audit entries, event notifications or a log-shipper batch');
    const auth = authenticate(header, raw, secrets, Math.floor(now() / 1000), replay);
    if (!auth.ok) return refuse(peer, auth.reason);
    limiter.succeeded(peer);
    const text = decodeBody(c.req.raw, raw, maxBodyBytes);
    let result;
    try {
      result = await intake(text, {
        table: deps.table,
        queue: deps.queue,
        now,
        ...(deps.baselines ? { baselines: deps.baselines } : {}),
      });
    } catch (e) {
      if (e instanceof QueueUnavailableError) {
        deps.telemetry.error('queue unavailable', { error: e.message });
        throw problem(503, 'the queue is unavailable; retry later (nothing was accepted)');
      }
      throw e;
    }
    const { summary, parsed, plan } = result;
    deps.telemetry.setCorrelationId(parsed.changes[0]?.id);
    deps.telemetry.metric(METRICS.changesReceived, summary.accepted, 'Count');
    // One data point per reason with its count, not one per record: a busy Vault's batch is mostly ignored reads,
    // and each dimensioned point is an EMF document of its own (it was 96 % of the intake's time at 1,000 entries).
    const ignored = new Map<string, number>();
    for (const i of parsed.ignored) ignored.set(i.reason, (ignored.get(i.reason) ?? 0) + 1);
    for (const [reason, count] of ignored) deps.telemetry.metric(METRICS.recordsIgnored, count, 'Count', { reason });
    if (summary.rejected > 0) deps.telemetry.metric(METRICS.recordsRejected, summary.rejected, 'Count');
    deps.telemetry.info('accepted', {
      ...summary,
      auth: auth.method,
      changes: parsed.changes.map((ch) => ({ id: ch.id, path: ch.path, version: ch.version })),
      targets: plan.targets.length,
    });
    // Publish this request's metrics now: a Lambda container may be frozen right after the answer.
    deps.telemetry.flush();
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

  app.notFound((c) =>
    c.json(
      {
        error: `no route ${c.req.method} ${c.req.path}; use POST /v1/vault/audit, POST /v1/vault/events, GET /healthz or GET /readyz${statusPage ? ', GET /status' : ''}`,
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
