import { afterEach, describe, expect, it } from 'vitest';
import { memoryLog } from '../../../lib/relay/relay-log.ts';
import { AppRoleTokenSource, staticTokenSource } from '../../../lib/relay/vault-auth.ts';
import { startFakeVault, type FakeVault } from './fake-vault.ts';
import { fastSleep, waitFor } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Calls {
  logins: Array<{ body: unknown; namespace: string | undefined }>;
  renewals: string[];
}

/** A Vault whose AppRole login hands out token-1, token-2, …; `renew` decides each renewal's answer. */
async function approleVault(options: { failLogins?: number; renew?: (token: string, n: number) => { status: number; body?: unknown }; ttl?: number } = {}): Promise<{ vault: FakeVault; calls: Calls }> {
  const calls: Calls = { logins: [], renewals: [] };
  const vault = await startFakeVault({
    api: (req, body) => {
      if (req.url === '/v1/auth/approle/login' && req.method === 'POST') {
        calls.logins.push({ body: JSON.parse(body), namespace: req.headers['x-vault-namespace'] as string | undefined });
        if (calls.logins.length <= (options.failLogins ?? 0)) return { status: 400, body: { errors: ['invalid role or secret ID'] } };
        return { status: 200, body: { auth: { client_token: `token-${calls.logins.length}`, lease_duration: options.ttl ?? 60, renewable: true } } };
      }
      if (req.url === '/v1/auth/token/renew-self' && req.method === 'POST') {
        const token = req.headers['x-vault-token'] as string;
        calls.renewals.push(token);
        return options.renew?.(token, calls.renewals.length) ?? { status: 200, body: { auth: { client_token: token, lease_duration: 60, renewable: true } } };
      }
      return { status: 404 };
    },
  });
  cleanups.push(() => vault.close());
  return { vault, calls };
}

function source(vaultAddr: string, extra: Partial<ConstructorParameters<typeof AppRoleTokenSource>[0]> = {}) {
  const log = memoryLog();
  const s = new AppRoleTokenSource({ vaultAddr, roleId: 'role', secretId: 'secret', log, sleep: fastSleep().sleep, renewDelayMs: () => 20, minRenewSeconds: 0, ...extra });
  cleanups.push(() => s.stop());
  return { s, log };
}

describe('staticTokenSource', () => {
  it('always gives the same token', async () => {
    const s = staticTokenSource('t');
    s.invalidate();
    expect(await s.token()).toBe('t');
    s.stop();
  });
});

describe('AppRoleTokenSource', () => {
  it('logs in with role_id and secret_id (once for concurrent callers), in the namespace, and renews before the TTL ends', async () => {
    const { vault, calls } = await approleVault();
    const { s, log } = source(vault.url, { namespace: 'team-a' });
    expect(await Promise.all([s.token(), s.token()])).toEqual(['token-1', 'token-1']);
    expect(calls.logins).toEqual([{ body: { role_id: 'role', secret_id: 'secret' }, namespace: 'team-a' }]);
    await waitFor(() => calls.renewals.length >= 2);
    expect(calls.renewals[0]).toBe('token-1');
    expect(await s.token()).toBe('token-1');
    // Never the token or the secret in the logs.
    expect(JSON.stringify(log.lines)).not.toMatch(/token-1|"secret"/);
  });

  it('logs in again when renewal fails', async () => {
    const { vault, calls } = await approleVault({ renew: () => ({ status: 403, body: { errors: ['permission denied'] } }) });
    const { s, log } = source(vault.url);
    expect(await s.token()).toBe('token-1');
    await waitFor(() => calls.logins.length === 2);
    await waitFor(async () => (await s.token()) === 'token-2');
    expect(log.lines.find((l) => l.message.startsWith('cannot renew'))?.fields).toMatchObject({ error: 'auth/token/renew-self: HTTP 403: permission denied' });
  });

  it('logs in again when the renewal no longer extends the token (max TTL reached)', async () => {
    const { vault, calls } = await approleVault({ renew: (token) => ({ status: 200, body: { auth: { client_token: token, lease_duration: 2, renewable: true } } }) });
    const { s } = source(vault.url, { minRenewSeconds: 10 });
    await s.token();
    await waitFor(() => calls.logins.length === 2);
  });

  it('retries a failed login with backoff until it succeeds', async () => {
    const { vault, calls } = await approleVault({ failLogins: 2 });
    const { s, log } = source(vault.url);
    expect(await s.token()).toBe('token-3');
    expect(calls.logins).toHaveLength(3);
    expect(log.lines.filter((l) => l.message.startsWith('AppRole login failed'))).toHaveLength(2);
  });

  it('after invalidate(), the next token() logs in again; after stop(), token() rejects', async () => {
    const { vault } = await approleVault();
    const { s } = source(vault.url, { renewDelayMs: () => 60_000 });
    expect(await s.token()).toBe('token-1');
    s.invalidate();
    expect(await s.token()).toBe('token-2');
    s.stop();
    await expect(s.token()).rejects.toThrow(/stopped/);
  });

  it('gives up a login in progress when stopped', async () => {
    const { vault } = await approleVault({ failLogins: 1000 });
    const { s } = source(vault.url, { sleep: (ms, signal) => new Promise((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true })) });
    const pending = s.token();
    await new Promise((r) => setTimeout(r, 30));
    s.stop();
    await expect(pending).rejects.toThrow(/stopped/);
  });
});
