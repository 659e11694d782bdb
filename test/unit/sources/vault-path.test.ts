/**
 * A path built for Vault never leaves `<mount>/metadata/`. Segments are checked before a request is built
 * (`.`, `..`, empty, control characters), and every URL sent, redirects included, must resolve under the prefix.
 * Against a real local HTTP server standing in for Vault, which records every request it receives (the real OpenBao
 * and its audit log: test/integration/status.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { staticTokenSource } from '../../../lib/vault/vault-auth.ts';
import { compilePattern } from '../../../lib/routing/path-pattern.ts';
import { expandPattern } from '../../../lib/vault/expand-pattern.ts';
import { VaultMetadataClient } from '../../../lib/vault/metadata-client.ts';
import { VaultPathError, vaultPathProblem } from '../../../lib/sources/vault-path.ts';
import { vaultRequest } from '../../../lib/vault/vault-request.ts';
import { startFakeVault, type FakeVault } from '../relay/fake-vault.ts';

const closing: FakeVault[] = [];
afterEach(async () => {
  for (const v of closing.splice(0)) await v.close();
});

/** A Vault answering every request with KV v2 metadata (or `answer`), recording each URL it receives. */
async function recordingVault(
  answer?: (url: string) => { status: number; body?: unknown; headers?: Record<string, string> },
): Promise<{ vault: FakeVault; seen: string[] }> {
  const seen: string[] = [];
  const vault = await startFakeVault({
    api: (req) => {
      seen.push(`${req.method} ${req.url}`);
      return (
        answer?.(req.url ?? '') ?? {
          status: 200,
          body: { data: { current_version: 1, versions: { 1: { created_time: '2026-01-01T00:00:00Z' } } } },
        }
      );
    },
  });
  closing.push(vault);
  return { vault, seen };
}

describe('vaultPathProblem', () => {
  it.each<[string, string | undefined]>([
    ['apps/db', undefined],
    ['app.v2/..db/x..', undefined],
    ['a b/ü', undefined],
    ['', 'it is empty'],
    ['apps/../../data/db', 'it has a ".." segment'],
    ['..', 'it has a ".." segment'],
    ['apps/./db', 'it has a "." segment'],
    ['apps//db', 'it has an empty segment (`//`, or a leading or trailing `/`)'],
    ['apps/db/', 'it has an empty segment (`//`, or a leading or trailing `/`)'],
    ['apps/\u001b[2J', 'it has a control character'],
    ['apps/a\u0085b', 'it has a control character'],
    ['apps/a\nb', 'it has a control character'],
  ])('%j: %s', (path, problem) => {
    expect(vaultPathProblem(path)).toBe(problem);
  });
});

describe('the metadata client sends nothing outside <mount>/metadata/', () => {
  it.each<[string, (c: VaultMetadataClient) => Promise<unknown>]>([
    ['a ".." key (data/)', (c) => c.readMetadata('kv', 'app/../../data/app')],
    ['a ".." key (sys/)', (c) => c.readMetadata('kv', 'app/../../../sys/mounts')],
    ['a "." key', (c) => c.readMetadata('kv', 'app/./db')],
    ['an empty segment', (c) => c.readMetadata('kv', 'app//db')],
    ['a control character', (c) => c.readMetadata('kv', 'app/\u0000db')],
    ['a ".." mount', (c) => c.readMetadata('..', 'sys/mounts')],
    ['a ".." folder to list', (c) => c.listMetadata('kv', 'app/../..')],
  ])('%s: refused, no request', async (_what, call) => {
    const { vault, seen } = await recordingVault();
    const client = new VaultMetadataClient({ vaultAddr: vault.url, auth: staticTokenSource('t') });
    await expect(call(client)).rejects.toBeInstanceOf(VaultPathError);
    expect(seen).toEqual([]);
    expect(client.requests).toBe(0);
  });

  it('a valid key is read where it should be', async () => {
    const { vault, seen } = await recordingVault();
    const client = new VaultMetadataClient({ vaultAddr: vault.url, auth: staticTokenSource('t') });
    expect((await client.readMetadata('kv', 'app/a b'))?.currentVersion).toBe(1);
    expect(seen).toEqual(['GET /v1/kv/metadata/app/a%20b']);
  });

  it('a redirect out of the metadata prefix is refused, not followed', async () => {
    const { vault: active, seen: activeSeen } = await recordingVault();
    const { vault: standby } = await recordingVault(() => ({
      status: 307,
      headers: { location: `${active.url}/v1/kv/data/app` },
    }));
    const client = new VaultMetadataClient({ vaultAddr: standby.url, auth: staticTokenSource('t'), maxAttempts: 1 });
    await expect(client.readMetadata('kv', 'app/db')).rejects.toThrow(
      /resolves to \/v1\/kv\/data\/app, outside \/v1\/kv\/metadata\/: refused, not sent/,
    );
    expect(activeSeen).toEqual([]);
  });

  it('vaultRequest checks the path URL resolution makes of it, before sending', async () => {
    const { vault, seen } = await recordingVault();
    await expect(
      vaultRequest({
        vaultAddr: vault.url,
        method: 'GET',
        path: 'kv/metadata/app/../../data/app',
        pathPrefix: 'kv/metadata/',
      }),
    ).rejects.toThrow(/resolves to \/v1\/kv\/data\/app, outside \/v1\/kv\/metadata\//);
    await expect(
      vaultRequest({
        vaultAddr: vault.url,
        method: 'GET',
        path: 'kv/metadata/app/%2e%2e/%2E%2e/data/app',
        pathPrefix: 'kv/metadata/',
      }),
    ).rejects.toBeInstanceOf(VaultPathError);
    expect(seen).toEqual([]);
  });
});

describe("reconcile's expansion ignores listed names that are no segment", () => {
  it('skips "..", ".", empty and control-character names Vault lists, and says how many', async () => {
    const lists: string[] = [];
    const list = (_ns: string, _mount: string, folder: string) => {
      lists.push(folder);
      const keys =
        folder === 'app' ? ['../', './', '/', 'ok', '..', 'x\u001by', 'sub/'] : folder === 'app/sub' ? ['deep'] : [];
      return Promise.resolve({ keys, truncated: false, total: keys.length });
    };
    const out = await expandPattern(compilePattern('kv/app/**'), '', new Map([['kv', 2 as const]]), list);
    expect(out).toMatchObject({
      kind: 'kv2',
      keys: ['app/ok', 'app/sub/deep'],
      ignored:
        'ignored 5 name(s) Vault listed that are no path segment (empty, ".", "..", a "/" or a control character)',
    });
    expect(lists).toEqual(['app', 'app/sub']);
  });
});
