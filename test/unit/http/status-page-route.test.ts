/**
 * GET /status (serve --status-page): absent unless given, and behind its own read-only credential — never the
 * intake's bearer token or HMAC key — as a bearer token, or as a browser's Basic password only over TLS or from a
 * loopback peer (or behind a TLS proxy the operator vouches for); nothing only with --insecure-no-auth. The page
 * comes with headers that forbid scripts and caching. Refused tries from one peer are answered 429 past a bound.
 */
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildApp, type AppDeps } from '../../../lib/http/app.ts';
import { FailedAuthLimiter, MAX_FAILURES } from '../../../lib/http/failed-auth-limiter.ts';
import type { StatusAccess } from '../../../lib/http/status-auth.ts';
import { ReplayGuard, sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../../lib/http/webhook-auth.ts';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile } from '../../helpers.ts';
import { BEARER_TOKEN, STATUS_TOKEN, WEBHOOK_SECRET } from '../../secrets.ts';

const table = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');
const NOW = Date.parse('2026-11-27T13:00:00Z');
const PAGE = '<!DOCTYPE html><html><body>fleet</body></html>';
const intake = { bearerToken: BEARER_TOKEN, hmacSecret: WEBHOOK_SECRET };
const access: StatusAccess = { token: STATUS_TOKEN };

function setup(access: StatusAccess, over: Partial<AppDeps> = {}) {
  let rendered = 0;
  let now = NOW;
  const app = buildApp({
    table,
    queue: { send: async () => undefined },
    telemetry: memoryTelemetry(),
    secrets: async () => intake,
    now: () => now,
    replayGuard: new ReplayGuard(),
    statusPage: async () => (rendered++, PAGE),
    statusAccess: access,
    ...over,
  });
  return { app, rendered: () => rendered, advance: (ms: number) => void (now += ms) };
}
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const at = String(Math.floor(NOW / 1000));
/** What @hono/node-server hands the app: the socket the request came on. */
const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } });
const LAN = from('10.1.2.3');
const LOOPBACK = from('127.0.0.1');

describe('GET /status', () => {
  it('is not served without --status-page', async () => {
    const app = buildApp({
      table,
      queue: { send: async () => undefined },
      telemetry: memoryTelemetry(),
      secrets: async () => intake,
      now: () => NOW,
    });
    expect((await app.request('/status', { headers: { authorization: `Bearer ${BEARER_TOKEN}` } })).status).toBe(404);
  });

  it.each([
    ['the status token', access, 'http://serve/status', { authorization: `Bearer ${STATUS_TOKEN}` }, LAN, 200],
    [
      "a browser's Basic prompt from loopback (kubectl port-forward), any user",
      access,
      'http://serve/status',
      { authorization: basic('ops', STATUS_TOKEN) },
      LOOPBACK,
      200,
    ],
    [
      "a browser's Basic prompt over TLS",
      access,
      'https://serve/status',
      { authorization: basic('ops', STATUS_TOKEN) },
      LAN,
      200,
    ],
    [
      'Basic over plain HTTP from another host',
      access,
      'http://serve/status',
      { authorization: basic('ops', STATUS_TOKEN) },
      LAN,
      401,
    ],
    [
      'Basic behind a TLS proxy the operator vouches for',
      { ...access, behindTlsProxy: true },
      'http://serve/status',
      { authorization: basic('ops', STATUS_TOKEN), 'x-forwarded-proto': 'https' },
      LAN,
      200,
    ],
    [
      'Basic with X-Forwarded-Proto nobody vouched for',
      access,
      'http://serve/status',
      { authorization: basic('ops', STATUS_TOKEN), 'x-forwarded-proto': 'https' },
      LAN,
      401,
    ],
    ["the intake's bearer token", access, 'http://serve/status', { authorization: `Bearer ${BEARER_TOKEN}` }, LAN, 401],
    [
      "the intake's bearer token as Basic password",
      access,
      'http://serve/status',
      { authorization: basic('ops', BEARER_TOKEN) },
      LOOPBACK,
      401,
    ],
    [
      "an HMAC signature by the intake's key",
      access,
      'http://serve/status',
      { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, at, '') },
      LAN,
      401,
    ],
    [
      'Basic with a wrong password',
      access,
      'http://serve/status',
      { authorization: basic('ops', 'wrong') },
      LOOPBACK,
      401,
    ],
    [
      'Basic with the token as user name',
      access,
      'http://serve/status',
      { authorization: basic(STATUS_TOKEN, '') },
      LOOPBACK,
      401,
    ],
    ['no credentials', access, 'http://serve/status', {}, LAN, 401],
    ['nothing, with --insecure-no-auth', { insecureNoAuth: true }, 'http://serve/status', {}, LAN, 200],
    [
      'nothing, with no status token and no --insecure-no-auth',
      {},
      'http://serve/status',
      { authorization: `Bearer ${BEARER_TOKEN}` },
      LAN,
      401,
    ],
  ] as const)('%s: %i', async (_name, given, url, headers, env, status) => {
    const { app, rendered } = setup(given);
    const res = await app.request(url, { headers }, env);
    expect(res.status).toBe(status);
    expect(rendered()).toBe(status === 200 ? 1 : 0);
    if (status === 200) {
      expect(await res.text()).toBe(PAGE);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(res.headers.get('cache-control')).toBe('no-store');
    } else {
      expect(await res.text()).not.toContain('fleet');
    }
  });

  it('asks the browser for a password only where Basic is taken', async () => {
    const { app } = setup(access);
    expect((await app.request('http://serve/status', {}, LOOPBACK)).headers.get('www-authenticate')).toBe(
      'Basic realm="vault-rollout status", charset="UTF-8"',
    );
    expect((await app.request('https://serve/status', {}, LAN)).headers.get('www-authenticate')).not.toBeNull();
    expect((await app.request('http://serve/status', {}, LAN)).headers.get('www-authenticate')).toBeNull();
  });

  it('is gzipped for a browser that accepts it', async () => {
    const big = `<!DOCTYPE html><html><body>${'<p>fleet row</p>'.repeat(2_000)}</body></html>`;
    const { app } = setup(access, { statusPage: async () => big });
    const res = await app.request('/status', {
      headers: { authorization: `Bearer ${STATUS_TOKEN}`, 'accept-encoding': 'gzip' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(gunzipSync(Buffer.from(await res.arrayBuffer())).toString('utf8')).toBe(big);
  });

  it("answers a peer past its refused tries 429 with Retry-After, at once, even with the right token; other peers and the window's end are unaffected", async () => {
    const { app, rendered, advance } = setup(access, { authLimiter: new FailedAuthLimiter() });
    for (let i = 0; i < MAX_FAILURES; i++)
      expect((await app.request('/status', { headers: { authorization: 'Bearer guess' } }, LAN)).status).toBe(401);
    const blocked = await app.request('/status', { headers: { authorization: `Bearer ${STATUS_TOKEN}` } }, LAN);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('60');
    expect(rendered()).toBe(0);
    expect(
      (await app.request('/status', { headers: { authorization: `Bearer ${STATUS_TOKEN}` } }, from('10.9.9.9'))).status,
    ).toBe(200);
    advance(45_000);
    expect((await app.request('/status', {}, LAN)).headers.get('retry-after')).toBe('15');
    advance(15_000);
    expect((await app.request('/status', { headers: { authorization: `Bearer ${STATUS_TOKEN}` } }, LAN)).status).toBe(
      200,
    );
  });
});

describe('the intake', () => {
  it('never takes the status token, and slows down a peer that keeps failing', async () => {
    const { app } = setup(access);
    const post = (authorization: string, env = LAN) =>
      app.request('/v1/vault/audit', { method: 'POST', body: '{}', headers: { authorization } }, env);
    expect((await post(`Bearer ${STATUS_TOKEN}`)).status).toBe(401);
    for (let i = 1; i < MAX_FAILURES; i++) expect((await post('Bearer guess')).status).toBe(401);
    const blocked = await post(`Bearer ${BEARER_TOKEN}`);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await post(`Bearer ${BEARER_TOKEN}`, from('10.9.9.9'))).status).toBe(202);
  });
});

describe('GET /safe-to-revoke', () => {
  const answers: string[] = [];
  const withAnswer = (safe: boolean) =>
    setup(access, {
      safeToRevoke: async (path) => (answers.push(path), { safe, path, reasons: safe ? [] : ['1 of 2 not yet safe'] }),
    });
  const bearer = { authorization: `Bearer ${STATUS_TOKEN}` };

  it("behind the status page's credential: 401 without it, never the intake's token", async () => {
    const { app } = withAnswer(true);
    expect((await app.request('http://serve/safe-to-revoke?path=secret/app/db', {}, LAN)).status).toBe(401);
    const intakeToken = { authorization: `Bearer ${BEARER_TOKEN}` };
    expect(
      (await app.request('http://serve/safe-to-revoke?path=secret/app/db', { headers: intakeToken }, LAN)).status,
    ).toBe(401);
  });

  it('200 when safe, 409 when not, with the answer as JSON and never cached', async () => {
    const safe = await withAnswer(true).app.request(
      'http://serve/safe-to-revoke?path=secret/app/db',
      { headers: bearer },
      LAN,
    );
    expect(safe.status).toBe(200);
    expect(safe.headers.get('cache-control')).toBe('no-store');
    expect(await safe.json()).toEqual({ safe: true, path: 'secret/app/db', reasons: [] });
    const not = await withAnswer(false).app.request(
      'http://serve/safe-to-revoke?path=secret/app/db',
      { headers: bearer },
      LAN,
    );
    expect(not.status).toBe(409);
    expect(await not.json()).toMatchObject({ safe: false, reasons: ['1 of 2 not yet safe'] });
  });

  it('400 naming why for a missing, patterned, overlong or non-Vault path; nothing asked', async () => {
    answers.length = 0;
    const { app } = withAnswer(true);
    for (const [query, why] of [
      ['', 'give the path'],
      ['?path=secret/app/*', 'one literal path'],
      [`?path=secret/${'a'.repeat(1100)}`, 'at most 1024 characters'],
      ['?path=secret/../other', 'path:'],
    ] as const) {
      const res = await app.request(`http://serve/safe-to-revoke${query}`, { headers: bearer }, LAN);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { error: string }).error).toContain(why);
    }
    expect(answers).toEqual([]);
  });
});
