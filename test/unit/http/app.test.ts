/** The HTTP intake through app.request: routes, authentication, limits, and what reaches the queue. */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildApp, type AppDeps } from '../../../lib/http/app.ts';
import { ReplayGuard, sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../../lib/http/webhook-auth.ts';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { QueueUnavailableError, type RolloutMessage, type RolloutQueue } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile, vaultSamples } from '../../helpers.ts';
import { BEARER_TOKEN, WEBHOOK_SECRET } from '../../secrets.ts';
import { plannedTargets } from '../../sqs/fixtures.ts';

const table = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');
const demo = readRepoFile('test/fixtures/demo/rotation.ndjson');
const SECRET = WEBHOOK_SECRET;
const TOKEN = BEARER_TOKEN;
const NOW = Date.parse('2026-11-20T10:16:00Z');

function setup(over: Partial<AppDeps> = {}, queueFails = false) {
  const sent: RolloutMessage[] = [];
  const queue: RolloutQueue = {
    send: async (messages) => {
      if (queueFails) throw new QueueUnavailableError('SendMessageBatch: connect ECONNREFUSED');
      sent.push(...(messages as RolloutMessage[]));
    },
  };
  const telemetry = memoryTelemetry();
  const app = buildApp({
    table,
    queue,
    telemetry,
    secrets: async () => ({ hmacSecret: SECRET, bearerToken: TOKEN }),
    now: () => NOW,
    replayGuard: new ReplayGuard(),
    ...over,
  });
  return { app, sent, telemetry };
}

function signed(
  body: string | Uint8Array,
  { secret = SECRET, at = Math.floor(NOW / 1000) } = {},
): Record<string, string> {
  return { [TIMESTAMP_HEADER]: String(at), [SIGNATURE_HEADER]: sign(secret, String(at), body) };
}

const post = (
  app: ReturnType<typeof setup>['app'],
  body: string | Uint8Array,
  headers: Record<string, string>,
  path = '/v1/vault/audit',
) => app.request(path, { method: 'POST', body, headers });

describe('POST /v1/vault/audit and /v1/vault/events', () => {
  it('accepts a signed batch: 202 with the counts, one message per cluster queued', async () => {
    const { app, sent } = setup();
    const res = await post(app, demo, signed(demo));
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ accepted: 5, ignored: 1, rejected: 0, queued: 3, errors: [], problems: [] });
    expect(sent.map((m) => [m.cluster, plannedTargets(table, m).length])).toEqual([
      ['alpha', 6],
      ['beta', 3],
      ['gamma', 2],
    ]);
  });

  it('takes every input format on both routes, whatever the Content-Type', async () => {
    const { app } = setup();
    const event = readFileSync(`${vaultSamples}event-kvv2-data-write.json`, 'utf8');
    let at = Math.floor(NOW / 1000);
    for (const path of ['/v1/vault/audit', '/v1/vault/events']) {
      for (const contentType of ['application/json', 'text/plain', 'application/x-ndjson']) {
        // each signature is accepted once: sign each request at its own second
        const res = await post(app, event, { ...signed(event, { at: at-- }), 'content-type': contentType }, path);
        expect(res.status).toBe(202);
        expect(((await res.json()) as { accepted: number }).accepted).toBe(1);
      }
    }
  });

  it('accepts a static bearer token (OpenBao http audit device, Fluent Bit)', async () => {
    const { app } = setup();
    const res = await post(app, demo, { authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(202);
  });

  it('reads gzip bodies when Content-Encoding says so (the signature covers the bytes sent)', async () => {
    const { app } = setup();
    const body = gzipSync(demo);
    const res = await post(app, body, { ...signed(body), 'content-encoding': 'gzip' });
    expect(res.status).toBe(202);
    expect(((await res.json()) as { accepted: number }).accepted).toBe(5);
  });

  it('reports rejected records with where and why, and still queues the rest', async () => {
    const { app, sent } = setup();
    const body = `${demo}not json\n`;
    const res = await post(app, body, signed(body));
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({
      accepted: 5,
      rejected: 1,
      errors: [{ record: 'line 7', error: 'invalid JSON' }],
    });
    expect(sent).toHaveLength(3);
  });

  it.each([
    [
      'no credentials',
      () => ({}),
      'missing credentials: send x-vault-rollout-signature with x-vault-rollout-timestamp or Authorization: Bearer',
    ],
    ['a wrong signature', () => signed(demo, { secret: 'other' }), 'the signature does not match the body'],
    ['a signature of another body', () => signed(`${demo} `), 'the signature does not match the body'],
    [
      'a stale timestamp',
      () => signed(demo, { at: Math.floor(NOW / 1000) - 301 }),
      "x-vault-rollout-timestamp is more than 300 s from the server's clock",
    ],
    [
      'a timestamp from the future',
      () => signed(demo, { at: Math.floor(NOW / 1000) + 301 }),
      "x-vault-rollout-timestamp is more than 300 s from the server's clock",
    ],
    [
      'a timestamp that is no number',
      () => ({ ...signed(demo), [TIMESTAMP_HEADER]: 'yesterday' }),
      'x-vault-rollout-timestamp must be unix seconds',
    ],
    ['a wrong bearer token', () => ({ authorization: 'Bearer nope' }), 'the bearer token is not accepted'],
  ])('refuses %s with 401 and queues nothing', async (_name, headers, error) => {
    const { app, sent } = setup();
    const res = await post(app, demo, headers());
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error });
    expect(sent).toEqual([]);
  });

  it('refuses a replayed signature', async () => {
    const { app, sent } = setup();
    const headers = signed(demo);
    expect((await post(app, demo, headers)).status).toBe(202);
    const again = await post(app, demo, headers);
    expect(again.status).toBe(401);
    expect(await again.json()).toEqual({ error: 'this signature was already used (replay)' });
    expect(sent).toHaveLength(3);
  });

  it('takes IAM-authenticated calls without app credentials (Function URL AWS_IAM)', async () => {
    const { app } = setup({ secrets: async () => ({ iam: true }) });
    expect((await post(app, demo, {})).status).toBe(202);
  });

  it('fails closed: with no scheme configured every request is refused, unless serve said --insecure-no-auth', async () => {
    const { app, sent } = setup({ secrets: async () => ({}) });
    const res = await post(app, demo, {});
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: 'no authentication is configured on this endpoint: every request is refused',
    });
    expect(sent).toEqual([]);
    const open = setup({ secrets: async () => ({ insecureNoAuth: true }) });
    expect((await post(open.app, demo, {})).status).toBe(202);
  });

  it('authenticates before it decompresses: an unauthenticated gzip bomb is refused with 401, not inflated', async () => {
    const { app, sent } = setup({ maxBodyBytes: 1000 });
    const bomb = gzipSync('{}\n'.repeat(10_000));
    const res = await post(app, bomb, { 'content-encoding': 'gzip' });
    expect(res.status).toBe(401);
    expect(sent).toEqual([]);
  });

  it.each([
    [
      'no credentials',
      {},
      'missing credentials: send x-vault-rollout-signature with x-vault-rollout-timestamp or Authorization: Bearer',
    ],
    ['a wrong bearer token', { authorization: 'Bearer not-the-token' }, 'the bearer token is not accepted'],
    [
      'a signature without a timestamp',
      { [SIGNATURE_HEADER]: `sha256=${'0'.repeat(64)}` },
      'x-vault-rollout-timestamp must be unix seconds',
    ],
    [
      'a timestamp outside the window',
      { [SIGNATURE_HEADER]: `sha256=${'0'.repeat(64)}`, [TIMESTAMP_HEADER]: String(Math.floor(NOW / 1000) - 301) },
      "x-vault-rollout-timestamp is more than 300 s from the server's clock",
    ],
    [
      'a signature of the wrong form',
      { [SIGNATURE_HEADER]: 'sha256=xyz', [TIMESTAMP_HEADER]: String(Math.floor(NOW / 1000)) },
      'x-vault-rollout-signature must be sha256=<64 hex digits>',
    ],
  ])('refuses %s with 401 from the headers alone, before reading a byte of the body', async (_name, headers, error) => {
    const { app, sent } = setup();
    let pulls = 0;
    // highWaterMark 0: the stream is pulled only when someone reads it.
    const body = new ReadableStream<Uint8Array>(
      {
        pull: (controller) =>
          void (++pulls > 1000 ? controller.close() : controller.enqueue(new Uint8Array(100).fill(0x20))),
      },
      { highWaterMark: 0 },
    );
    const res = await app.request('/v1/vault/audit', { method: 'POST', body, headers, duplex: 'half' } as RequestInit);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error });
    expect(pulls).toBe(0);
    expect(sent).toEqual([]);
  });

  it('refuses with 401, not 413, a request without credentials that declares a body over the limit', async () => {
    const { app } = setup({ maxBodyBytes: 1000 });
    const res = await app.request('/v1/vault/audit', {
      method: 'POST',
      body: 'x',
      headers: { 'content-length': String(10 ** 9) },
    });
    expect(res.status).toBe(401);
  });

  it('counts a chunked body while it streams and refuses it past the limit (no Content-Length)', async () => {
    const { app, sent } = setup({ maxBodyBytes: 1000 });
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        // Bounded: a body that never ends would be pulled at most this often before the 413.
        if (++pulls > 1000) return controller.close();
        controller.enqueue(new Uint8Array(100).fill(0x20));
      },
    });
    const res = await app.request('/v1/vault/audit', {
      method: 'POST',
      body,
      headers: { authorization: `Bearer ${TOKEN}` },
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(pulls).toBeLessThan(20);
    expect(sent).toEqual([]);
  });

  it.each([
    ['an empty body', '', {}, 400, 'the body is empty: send audit entries, event notifications or a log-shipper batch'],
    ['invalid UTF-8', new Uint8Array([0xff, 0xfe, 0x00]), {}, 400, 'the body is not UTF-8 text'],
    [
      'a body that is not the gzip it claims',
      'plain',
      { 'content-encoding': 'gzip' },
      400,
      'Content-Encoding says gzip, but the body is not gzip',
    ],
  ])('answers 400 for %s', async (_name, body, extra, status, error) => {
    const { app, sent } = setup();
    const res = await post(app, body, { ...signed(typeof body === 'string' ? body : body), ...extra });
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ error });
    expect(sent).toEqual([]);
  });

  it('answers 413 over the size limit, compressed or once decompressed', async () => {
    const { app, sent } = setup({ maxBodyBytes: 1000 });
    const big = 'x'.repeat(2000);
    expect((await post(app, big, signed(big))).status).toBe(413);
    const bomb = gzipSync('{}\n'.repeat(10_000));
    expect(bomb.byteLength).toBeLessThan(1000);
    const res = await post(app, bomb, { ...signed(bomb), 'content-encoding': 'gzip' });
    expect(res.status).toBe(413);
    expect(sent).toEqual([]);
  });

  it('answers 503 when the queue is unavailable, so the sender retries', async () => {
    const { app, telemetry } = setup({}, true);
    const res = await post(app, demo, signed(demo));
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: 'the queue is unavailable; retry later (nothing was accepted)' });
    expect(telemetry.lines.some((l) => l.level === 'error' && l.message === 'queue unavailable')).toBe(true);
  });

  it('counts changes and ignored records by reason', async () => {
    const { app, telemetry } = setup();
    await post(app, demo, signed(demo));
    expect(telemetry.metrics).toEqual([
      { name: 'ChangesReceived', value: 5 },
      { name: 'RecordsIgnored', value: 1, dimensions: { reason: 'read' } },
    ]);
    expect(JSON.stringify(telemetry.lines)).not.toContain(SECRET);
  });
});

describe('other routes', () => {
  it('GET /healthz', async () => {
    const { app } = setup();
    const res = await app.request('/healthz');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, routes: 4, clusters: 3 });
  });

  it('404 names the routes', async () => {
    const { app } = setup();
    const res = await app.request('/v1/other', { method: 'POST' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: string }).error).toContain('POST /v1/vault/audit');
  });

  it('500 for an unexpected error, without details', async () => {
    const { app } = setup({
      secrets: async () => {
        throw new Error('boom');
      },
    });
    const res = await post(app, demo, {});
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'internal error' });
  });
});
