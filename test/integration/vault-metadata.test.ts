// The metadata client against real OpenBao 2.7.2 and Vault 1.21.1: read and list KV v2 metadata with a token whose
// policy is infra/vault/reconcile-policy.hcl (nothing on data/), deleted and destroyed versions, a token without
// `list` (the error names the policy line), AppRole logins. Never skipped: a missing server fails beforeAll.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryLog } from '../../lib/kernel/log.ts';
import { AppRoleTokenSource, staticTokenSource } from '../../lib/vault/vault-auth.ts';
import { VaultMetadataClient, VaultPermissionError } from '../../lib/vault/metadata-client.ts';
import { REPO_ROOT, startDevServer, type DevServer, type ServerKind } from '../vault/server.ts';

const POLICY = readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8');

describe.each<ServerKind>(['openbao', 'vault'])('Vault metadata client on %s', (kind) => {
  let server: DevServer;
  let token: string;

  beforeAll(async () => {
    server = await startDevServer({ kind });
    await server.client.writePolicy('vault-rollout-reconcile', POLICY);
    await server.client.writePolicy('read-only-metadata', 'path "+/metadata/*" { capabilities = ["read"] }');
    for (const key of ['apps/a/db', 'apps/b/db', 'apps/b/api', 'other'])
      await server.client.kv2Write('secret', key, { password: 'x' });
    await server.client.kv2Write('secret', 'apps/a/db', { password: 'y' });
    await server.client.kv2Write('secret', 'apps/a/db', { password: 'z' });
    await server.client.kv2DeleteVersions('secret', 'apps/a/db', [3]);
    await server.client.kv2Destroy('secret', 'apps/a/db', [1]);
    ({ token } = await server.client.createToken({ policies: ['vault-rollout-reconcile'] }));
  }, 120_000);
  afterAll(() => server?.stop());

  it('reads versions, times, deletion and destruction; never data/', async () => {
    const client = new VaultMetadataClient({ vaultAddr: server.addr, auth: staticTokenSource(token) });
    const meta = await client.readMetadata('secret', 'apps/a/db');
    expect(meta?.currentVersion).toBe(3);
    expect(Object.keys(meta?.versions ?? {})).toEqual(['1', '2', '3']);
    expect(meta?.versions[1]?.destroyed).toBe(true);
    expect(meta?.versions[2]).toMatchObject({ destroyed: false, deletionTime: null });
    expect(meta?.versions[3]?.deletionTime).toMatch(/^\d{4}-/);
    expect(Date.parse(meta?.versions[2]?.createdTime ?? '')).toBeGreaterThan(0);
    expect(await client.readMetadata('secret', 'nope')).toBeUndefined();
    // The policy grants nothing on data/: the token cannot read a value.
    const data = await fetch(`${server.addr}/v1/secret/data/apps/a/db`, { headers: { 'x-vault-token': token } });
    expect(data.status).toBe(403);
  });

  it('lists keys and folders, bounded and reported', async () => {
    const client = new VaultMetadataClient({ vaultAddr: server.addr, auth: staticTokenSource(token) });
    expect(await client.listMetadata('secret', '')).toEqual({ keys: ['apps/', 'other'], truncated: false, total: 2 });
    expect(await client.listMetadata('secret', 'apps/b')).toEqual({ keys: ['api', 'db'], truncated: false, total: 2 });
    expect(await client.listMetadata('secret', 'apps/b', { limit: 1 })).toEqual({
      keys: ['api'],
      truncated: true,
      total: 2,
    });
    expect(await client.listMetadata('secret', 'absent')).toEqual({ keys: [], truncated: false, total: 0 });
  });

  it('a token without list gets an error naming the policy line to add', async () => {
    const { token: readOnly } = await server.client.createToken({ policies: ['read-only-metadata'] });
    const client = new VaultMetadataClient({ vaultAddr: server.addr, auth: staticTokenSource(readOnly) });
    expect((await client.readMetadata('secret', 'other'))?.currentVersion).toBe(1);
    const error = await client.listMetadata('secret', 'apps').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VaultPermissionError);
    expect((error as VaultPermissionError).policyLine).toBe(
      'path "secret/metadata/*" { capabilities = ["read", "list"] }',
    );
    expect((error as Error).message).toContain('infra/vault/reconcile-policy.hcl');
    expect((error as Error).message).not.toContain(readOnly);
  });

  it('logs in with AppRole and reads metadata with that token', async () => {
    const { roleId, secretId } = await server.client.createAppRole('reconcile', ['vault-rollout-reconcile']);
    const log = memoryLog();
    const auth = new AppRoleTokenSource({ vaultAddr: server.addr, roleId, secretId, log });
    try {
      const client = new VaultMetadataClient({ vaultAddr: server.addr, auth });
      expect((await client.readMetadata('secret', 'apps/b/db'))?.currentVersion).toBe(1);
      expect(JSON.stringify(log.lines)).not.toContain(secretId);
    } finally {
      auth.stop();
    }
  });
});
