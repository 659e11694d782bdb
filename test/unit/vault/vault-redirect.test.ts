/**
 * Where the relay's Vault token (and its AppRole secret ID) may be redirected: the same host (a standby's 307 to the
 * active node), hosts named with --vault-redirect-hosts, never from TLS to plain text. Real local servers: a fake
 * Vault on 127.0.0.1 and on `localhost` (another host name), and a TLS one with a test CA.
 */
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EventSubscriber } from '../../../lib/relay/event-subscriber.ts';
import { memoryLog } from '../../../lib/kernel/log.ts';
import { AppRoleTokenSource, staticTokenSource } from '../../../lib/vault/vault-auth.ts';
import { checkVaultRedirect } from '../../../lib/vault/vault-redirect.ts';
import { issueCert, writeCa } from '../../clusters/pki.ts';
import { startFakeVault, type FakeVault } from '../relay/fake-vault.ts';
import { fastSleep, temporaryDir, waitFor } from '../relay/helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function vault(options: Parameters<typeof startFakeVault>[0] = {}): Promise<FakeVault> {
  const v = await startFakeVault(options);
  cleanups.push(() => v.close());
  return v;
}

/** A Vault whose AppRole login succeeds, counting logins. */
async function activeVault(): Promise<{ v: FakeVault; logins: string[] }> {
  const logins: string[] = [];
  const v = await vault({
    api: (req, body) => {
      logins.push(body);
      return req.url === '/v1/auth/approle/login'
        ? { status: 200, body: { auth: { client_token: 'token-1', lease_duration: 60, renewable: false } } }
        : { status: 404 };
    },
  });
  return { v, logins };
}

/** A standby: every API call answers 307 to `to` + the same path. */
const standbyTo = (to: () => string) =>
  vault({ api: (req) => ({ status: 307, headers: { location: `${to()}${req.url ?? ''}` } }) });

function approle(vaultAddr: string, extra: Partial<ConstructorParameters<typeof AppRoleTokenSource>[0]> = {}) {
  const log = memoryLog();
  const s = new AppRoleTokenSource({
    vaultAddr,
    roleId: 'role',
    secretId: 'planted-secret-id',
    log,
    sleep: fastSleep().sleep,
    ...extra,
  });
  cleanups.push(() => s.stop());
  return { s, log };
}

describe('checkVaultRedirect', () => {
  it.each([
    ['https://vault-2:8200/x', 'https://vault-1:8200', { allowedHosts: ['vault-2'] }, true],
    ['https://vault-1:8201/x', 'https://vault-1:8200', {}, true],
    ['/v1/x', 'https://vault-1:8200', {}, true],
    ['https://vault-2:8200/x', 'http://vault-1:8200', { allowedHosts: ['vault-2'] }, true],
    ['http://vault-1:8200/x', 'https://vault-1:8200', {}, false],
    ['ws://vault-1:8200/x', 'wss://vault-1:8200', {}, false],
    ['https://evil.example/x', 'https://vault-1:8200', {}, false],
    ['https://vault-1.evil.example/x', 'https://vault-1:8200', { allowedHosts: ['vault-2'] }, false],
  ])('%s from %s (%o): followed %s', (location, from, policy, ok) => {
    expect(checkVaultRedirect(from, location, policy).ok).toBe(ok);
  });
});

describe('AppRole login redirects', () => {
  it('follows a standby 307 to the active node on the same host', async () => {
    const active = await activeVault();
    const standby = await standbyTo(() => active.v.url);
    const { s } = approle(standby.url);
    expect(await s.token()).toBe('token-1');
    expect(active.logins).toHaveLength(1);
  });

  it('refuses a redirect to another host: the secret ID never reaches it', async () => {
    const active = await activeVault();
    const standby = await standbyTo(() => active.v.url.replace('127.0.0.1', 'localhost'));
    const { s, log } = approle(standby.url);
    void s.token().catch(() => undefined);
    await waitFor(() => log.lines.some((l) => String(l.fields?.error ?? '').includes('to another host')));
    expect(active.logins).toEqual([]);
    expect(JSON.stringify(log.lines)).not.toContain('planted-secret-id');
  });

  it('follows it when the host is named in --vault-redirect-hosts', async () => {
    const active = await activeVault();
    const standby = await standbyTo(() => active.v.url.replace('127.0.0.1', 'localhost'));
    const { s } = approle(standby.url, { redirects: { allowedHosts: ['localhost'] } });
    expect(await s.token()).toBe('token-1');
  });

  it('refuses a redirect from https to http on the same host', async () => {
    const active = await activeVault();
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const ca = writeCa(tmp.dir, 'test-vault-ca');
    const cert = issueCert(tmp.dir, ca, {
      name: 'vault',
      commonName: '127.0.0.1',
      sans: ['IP:127.0.0.1'],
      usage: 'server',
    });
    const tls = createHttpsServer(
      { cert: readFileSync(cert.certFile), key: readFileSync(cert.keyFile) },
      (req, res) => {
        res.writeHead(307, { location: `${active.v.url}${req.url ?? ''}` });
        res.end();
      },
    );
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => tls.close(() => resolve())));
    const caPem = readFileSync(ca.certFile);
    // fetch with the test CA trusted (and plain http for the hop it must not take).
    const fetchWithCa: typeof fetch = (input, init) =>
      new Promise((resolve, reject) => {
        const url = String(input);
        const send = url.startsWith('https:') ? httpsRequest : httpRequest;
        const req = send(
          url,
          {
            method: init?.method ?? 'GET',
            headers: init?.headers as Record<string, string>,
            ...(url.startsWith('https:') ? { ca: caPem } : {}),
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve(
                new Response(res.statusCode === 204 ? null : Buffer.concat(chunks), {
                  status: res.statusCode ?? 500,
                  headers: Object.entries(res.headers as IncomingHttpHeaders).map(([k, v]) => [k, String(v)]),
                }),
              ),
            );
          },
        );
        req.on('error', reject);
        req.end(typeof init?.body === 'string' ? init.body : undefined);
      });
    const { s, log } = approle(`https://127.0.0.1:${(tls.address() as AddressInfo).port}`, { fetch: fetchWithCa });
    void s.token().catch(() => undefined);
    await waitFor(() =>
      log.lines.some((l) => String(l.fields?.error ?? '').includes('it would send the Vault token unencrypted')),
    );
    expect(active.logins).toEqual([]);
  });
});

describe('event subscription redirects', () => {
  function subscriber(vaultAddr: string, redirects?: { allowedHosts: string[] }) {
    const log = memoryLog();
    const s = new EventSubscriber({
      vaultAddr,
      eventType: 'kv-v2/*',
      auth: staticTokenSource('planted-vault-token'),
      onMessage: () => undefined,
      log,
      sleep: fastSleep().sleep,
      reconnectBaseMs: 1,
      ...(redirects ? { redirects } : {}),
    });
    cleanups.push(() => s.stop());
    return { s, log };
  }

  it('refuses a 307 to another host: the token is never sent there', async () => {
    const other = await vault();
    const standby = await vault({ redirectTo: other.url.replace('127.0.0.1', 'localhost') });
    const { s, log } = subscriber(standby.url);
    s.start();
    await waitFor(() => log.lines.some((l) => l.message.includes('to another host')));
    expect(other.upgrades).toEqual([]);
    expect(JSON.stringify(log.lines)).not.toContain('planted-vault-token');
  });

  it('follows it to a host named in --vault-redirect-hosts', async () => {
    const other = await vault();
    const standby = await vault({ redirectTo: other.url.replace('127.0.0.1', 'localhost') });
    const { s } = subscriber(standby.url, { allowedHosts: ['localhost'] });
    s.start();
    await waitFor(() => other.sockets.length === 1);
    expect(other.upgrades[0]?.token).toBe('planted-vault-token');
  });
});
