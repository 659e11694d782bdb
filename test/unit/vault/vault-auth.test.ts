import { afterEach, describe, expect, it } from 'vitest';
import { memoryLog } from '../../../lib/kernel/log.ts';
import {
  AppRoleTokenSource,
  GivenTokenSource,
  staticTokenSource,
  VaultTokenUnusableError,
} from '../../../lib/vault/vault-auth.ts';
import { startFakeVault, type FakeVault } from '../relay/fake-vault.ts';
import { fastSleep, waitFor } from '../relay/helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Calls {
  logins: Array<{ body: unknown; namespace: string | undefined }>;
  renewals: string[];
}

/** A Vault whose AppRole login hands out token-1, token-2, …; `renew` decides each renewal's answer. */
async function approleVault(
  options: {
    failLogins?: number;
    renew?: (token: string, n: number) => { status: number; body?: unknown };
    ttl?: number;
  } = {},
): Promise<{ vault: FakeVault; calls: Calls }> {
  const calls: Calls = { logins: [], renewals: [] };
  const vault = await startFakeVault({
    api: (req, body) => {
      if (req.url === '/v1/auth/approle/login' && req.method === 'POST') {
        calls.logins.push({
          body: JSON.parse(body),
          namespace: req.headers['x-vault-namespace'] as string | undefined,
        });
        if (calls.logins.length <= (options.failLogins ?? 0))
          return { status: 400, body: { errors: ['invalid role or secret ID'] } };
        return {
          status: 200,
          body: {
            auth: { client_token: `token-${calls.logins.length}`, lease_duration: options.ttl ?? 60, renewable: true },
          },
        };
      }
      if (req.url === '/v1/auth/token/renew-self' && req.method === 'POST') {
        const token = req.headers['x-vault-token'] as string;
        calls.renewals.push(token);
        return (
          options.renew?.(token, calls.renewals.length) ?? {
            status: 200,
            body: { auth: { client_token: token, lease_duration: 60, renewable: true } },
          }
        );
      }
      return { status: 404 };
    },
  });
  cleanups.push(() => vault.close());
  return { vault, calls };
}

function source(vaultAddr: string, extra: Partial<ConstructorParameters<typeof AppRoleTokenSource>[0]> = {}) {
  const log = memoryLog();
  const s = new AppRoleTokenSource({
    vaultAddr,
    roleId: 'role',
    secretId: 'secret',
    log,
    sleep: fastSleep().sleep,
    renewDelayMs: () => 20,
    minRenewSeconds: 0,
    ...extra,
  });
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
    const { vault, calls } = await approleVault({
      renew: () => ({ status: 403, body: { errors: ['permission denied'] } }),
    });
    const { s, log } = source(vault.url);
    expect(await s.token()).toBe('token-1');
    await waitFor(() => calls.logins.length === 2);
    await waitFor(async () => (await s.token()) === 'token-2');
    expect(log.lines.find((l) => l.message.startsWith('cannot renew'))?.fields).toMatchObject({
      error: 'auth/token/renew-self: HTTP 403: permission denied',
    });
  });

  it('logs in again when the renewal no longer extends the token (max TTL reached)', async () => {
    const { vault, calls } = await approleVault({
      renew: (token) => ({ status: 200, body: { auth: { client_token: token, lease_duration: 2, renewable: true } } }),
    });
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
    const { s } = source(vault.url, {
      sleep: (ms, signal) =>
        new Promise((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true })),
    });
    const pending = s.token();
    await new Promise((r) => setTimeout(r, 30));
    s.stop();
    await expect(pending).rejects.toThrow(/stopped/);
  });
});

/** A fake fetch for a given token: lookup-self answers `lookup`, renew-self answers `renew(n)`; the calls are recorded. */
function givenTokenVault(
  lookup: { status: number; body?: unknown },
  renew: (n: number) => { status: number; body?: unknown } = () => ({
    status: 200,
    body: { auth: { client_token: '', lease_duration: 60, renewable: true } },
  }),
) {
  const calls: Array<{ path: string; token: string | undefined }> = [];
  const fetch = ((url: string, init: RequestInit) => {
    const path = new URL(url).pathname;
    calls.push({ path, token: (init.headers as Record<string, string>)['x-vault-token'] });
    const answer =
      path === '/v1/auth/token/lookup-self'
        ? lookup
        : path === '/v1/auth/token/renew-self'
          ? renew(calls.filter((c) => c.path === path).length)
          : { status: 404 };
    return Promise.resolve(Response.json(answer.body ?? {}, { status: answer.status }));
  }) as typeof globalThis.fetch;
  return { fetch, calls };
}

function givenSource(
  fetch: typeof globalThis.fetch,
  extra: Partial<ConstructorParameters<typeof GivenTokenSource>[0]> = {},
) {
  const log = memoryLog();
  const s = new GivenTokenSource({
    vaultAddr: 'http://vault.test:8200',
    token: 'planted-given-token',
    log,
    fetch,
    sleep: fastSleep().sleep,
    renewDelayMs: () => 20,
    minRenewSeconds: 0,
    now: () => Date.parse('2026-11-24T00:00:00Z'),
    ...extra,
  });
  cleanups.push(() => s.stop());
  return { s, log };
}

const lookup = (ttl: number, renewable: boolean, expire_time: string | null = '2026-11-24T01:00:00Z') => ({
  status: 200,
  body: { data: { ttl, renewable, expire_time, policies: ['default'] } },
});

describe('GivenTokenSource', () => {
  it('looks the token up on first use and renews it on schedule, with that token, never logging it', async () => {
    const { fetch, calls } = givenTokenVault(lookup(30, true));
    const { s, log } = givenSource(fetch);
    expect(await s.token()).toBe('planted-given-token');
    expect(calls[0]).toEqual({ path: '/v1/auth/token/lookup-self', token: 'planted-given-token' });
    await waitFor(() => calls.filter((c) => c.path === '/v1/auth/token/renew-self').length >= 2);
    expect(
      calls.filter((c) => c.path === '/v1/auth/token/renew-self').every((c) => c.token === 'planted-given-token'),
    ).toBe(true);
    expect(await s.token()).toBe('planted-given-token');
    expect(log.lines.map((l) => l.message)).toContain('renewed the Vault token');
    expect(JSON.stringify(log.lines)).not.toContain('planted-given-token');
  });

  it('renews at two thirds of the TTL by default (the login schedule)', async () => {
    const asked: number[] = [];
    const { fetch } = givenTokenVault(lookup(30, true));
    const { s } = givenSource(fetch, { renewDelayMs: undefined as never });
    const setTimeoutSpy = globalThis.setTimeout;
    globalThis.setTimeout = ((fn: () => void, ms: number) => (
      asked.push(ms),
      setTimeoutSpy(() => undefined, 0)
    )) as typeof setTimeout;
    try {
      await s.token();
    } finally {
      globalThis.setTimeout = setTimeoutSpy;
    }
    expect(asked).toContain(20_000);
  });

  it.each([
    ['a root token (ttl 0)', lookup(0, false, null)],
    ['a non-renewable token', lookup(3600, false)],
  ])('uses %s without renewal and says so once', async (_, answer) => {
    const { fetch, calls } = givenTokenVault(answer);
    const { s, log } = givenSource(fetch);
    expect(await s.token()).toBe('planted-given-token');
    s.invalidate();
    expect(await s.token()).toBe('planted-given-token');
    await new Promise((r) => setTimeout(r, 50));
    expect(calls.map((c) => c.path)).not.toContain('/v1/auth/token/renew-self');
    expect(log.lines.filter((l) => l.message.includes('not renewable')).map((l) => l.level)).toEqual(['info']);
  });

  it('a failed renewal is logged without the token and the token looked up again', async () => {
    const { fetch, calls } = givenTokenVault(lookup(30, true), (n) =>
      n === 1
        ? { status: 500, body: { errors: ['internal error'] } }
        : { status: 200, body: { auth: { client_token: '', lease_duration: 60, renewable: true } } },
    );
    const { s, log } = givenSource(fetch);
    await s.token();
    await waitFor(() => calls.filter((c) => c.path === '/v1/auth/token/renew-self').length >= 2);
    expect(calls.filter((c) => c.path === '/v1/auth/token/lookup-self').length).toBeGreaterThanOrEqual(2);
    const warning = log.lines.find((l) => l.message.startsWith('cannot renew the Vault token'));
    expect(warning?.message).toBe('cannot renew the Vault token: looking it up again');
    expect(JSON.stringify(log.lines)).not.toContain('planted-given-token');
    expect(await s.token()).toBe('planted-given-token');
  });

  it.each([
    [
      'Vault refuses it (expired and revoked)',
      { status: 403, body: { errors: ['permission denied'] } },
      /HTTP 403.*supply a new token/,
    ],
    [
      'its expire_time has passed',
      lookup(30, true, '2026-11-23T23:00:00Z'),
      /expired at 2026-11-23T23:00:00Z; supply a new token/,
    ],
  ])('rejects, without retrying, when %s', async (_, answer, message) => {
    const { fetch, calls } = givenTokenVault(answer);
    const { s, log } = givenSource(fetch);
    const error = await s.token().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VaultTokenUnusableError);
    expect((error as Error).message).toMatch(message);
    expect(calls).toHaveLength(1);
    expect(JSON.stringify(log.lines)).not.toContain('planted-given-token');
  });

  it('retries a lookup that fails for another reason (Vault sealed, unreachable)', async () => {
    let n = 0;
    const inner = givenTokenVault(lookup(30, true)).fetch;
    const fetch = ((url: string, init: RequestInit) =>
      ++n === 1
        ? Promise.resolve(Response.json({ errors: ['Vault is sealed'] }, { status: 503 }))
        : inner(url, init)) as typeof globalThis.fetch;
    const { s, log } = givenSource(fetch, { renewDelayMs: () => 60_000 });
    expect(await s.token()).toBe('planted-given-token');
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(1);
  });
});
