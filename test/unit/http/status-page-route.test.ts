/**
 * GET /status (serve --status-page): absent unless given, and behind the intake's authentication — the bearer token
 * (also as a browser's Basic password), an HMAC signature of the empty body (once), or nothing only with
 * --insecure-no-auth. The page comes with headers that forbid scripts and caching.
 */
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildApp, type AppDeps } from '../../../lib/http/app.ts';
import { ReplayGuard, sign, SIGNATURE_HEADER, TIMESTAMP_HEADER, type WebhookSecrets } from '../../../lib/http/webhook-auth.ts';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile } from '../../helpers.ts';
import { BEARER_TOKEN, WEBHOOK_SECRET } from '../../secrets.ts';

const table = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');
const NOW = Date.parse('2026-11-27T13:00:00Z');
const PAGE = '<!DOCTYPE html><html><body>fleet</body></html>';

function setup(secrets: WebhookSecrets, over: Partial<AppDeps> = {}) {
  let rendered = 0;
  const app = buildApp({ table, queue: { send: async () => undefined }, telemetry: memoryTelemetry(), secrets: async () => secrets, now: () => NOW, replayGuard: new ReplayGuard(), statusPage: async () => (rendered++, PAGE), ...over });
  return { app, rendered: () => rendered };
}
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const at = String(Math.floor(NOW / 1000));

describe('GET /status', () => {
  it('is not served without --status-page', async () => {
    const app = buildApp({ table, queue: { send: async () => undefined }, telemetry: memoryTelemetry(), secrets: async () => ({ bearerToken: BEARER_TOKEN }), now: () => NOW });
    expect((await app.request('/status', { headers: { authorization: `Bearer ${BEARER_TOKEN}` } })).status).toBe(404);
  });

  const both = { bearerToken: BEARER_TOKEN, hmacSecret: WEBHOOK_SECRET };
  it.each([
    ['the bearer token', both, { authorization: `Bearer ${BEARER_TOKEN}` }, 200],
    ["a browser's Basic prompt with the token as password (any user)", both, { authorization: basic('ops', BEARER_TOKEN) }, 200],
    ['Basic with a wrong password', both, { authorization: basic('ops', 'wrong') }, 401],
    ['Basic with the token as user name', both, { authorization: basic(BEARER_TOKEN, '') }, 401],
    ['a wrong bearer token', both, { authorization: 'Bearer wrong' }, 401],
    ['no credentials', both, {}, 401],
    ['an HMAC signature of the empty body', both, { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, at, '') }, 200],
    ['an HMAC signature by another secret', both, { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign('other', at, '') }, 401],
    ['Basic when only HMAC is configured', { hmacSecret: WEBHOOK_SECRET }, { authorization: basic('ops', BEARER_TOKEN) }, 401],
    ['nothing, with --insecure-no-auth', { insecureNoAuth: true }, {}, 200],
    ['nothing, with no scheme configured and no --insecure-no-auth', {}, {}, 401],
  ] as const)('%s: %i', async (_name, secrets, headers, status) => {
    const { app, rendered } = setup(secrets);
    const res = await app.request('/status', { headers });
    expect(res.status).toBe(status);
    expect(rendered()).toBe(status === 200 ? 1 : 0);
    if (status === 200) {
      expect(await res.text()).toBe(PAGE);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(res.headers.get('cache-control')).toBe('no-store');
    } else {
      expect(await res.text()).not.toContain('fleet');
      // A browser asks for the token only where a bearer token is accepted.
      expect(res.headers.get('www-authenticate')).toBe('bearerToken' in secrets ? 'Basic realm="vault-rollout status", charset="UTF-8"' : null);
    }
  });

  it('is gzipped for a browser that accepts it', async () => {
    const big = `<!DOCTYPE html><html><body>${'<p>fleet row</p>'.repeat(2_000)}</body></html>`;
    const { app } = setup(both, { statusPage: async () => big });
    const res = await app.request('/status', { headers: { ...{ authorization: `Bearer ${BEARER_TOKEN}` }, 'accept-encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(gunzipSync(Buffer.from(await res.arrayBuffer())).toString('utf8')).toBe(big);
  });

  it('accepts an HMAC signature once (the replay window holds for pages too)', async () => {
    const { app } = setup(both);
    const headers = { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, at, '') };
    expect((await app.request('/status', { headers })).status).toBe(200);
    expect((await app.request('/status', { headers })).status).toBe(401);
  });
});
