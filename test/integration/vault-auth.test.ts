// Logging in to real servers the ways reconcile can: a token (environment, file), AppRole (role and secret IDs from
// SSM and Secrets Manager are the same code path after the read, unit-tested) against OpenBao 2.7.2 and Vault
// 1.21.1, and AWS IAM against Vault 1.21.1's `aws` auth method whose STS endpoint is a local moto server: the
// request is signed with temporary credentials of an assumed role, Vault replays it to "STS", and the role's ARN
// is what the Vault role is bound to. Never skipped: a missing server or moto fails beforeAll.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AwsCredentialsProvider } from '../../lib/aws/eks-token.ts';
import { memoryLog } from '../../lib/kernel/log.ts';
import { awsIamLoginRequest, vaultTokenSourceFromEnv, type VaultAuthDeps } from '../../lib/vault/auth.ts';
import { vaultRequest } from '../../lib/vault/vault-request.ts';
import { VaultMetadataClient } from '../../lib/vault/metadata-client.ts';
import { startMotoServer, type MotoServer } from '../aws/moto-server.ts';
import { REPO_ROOT, startDevServer, type DevServer, type ServerKind } from '../vault/server.ts';

const POLICY = readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8');
const ACCOUNT = '123456789012';

function deps(server: DevServer, log = memoryLog(), credentials?: AwsCredentialsProvider): VaultAuthDeps {
  const none = () => {
    throw new Error('not used here');
  };
  return {
    vaultAddr: server.addr,
    log,
    readFile: (p) => readFile(p, 'utf8'),
    ssm: none,
    secretsManager: none,
    awsCredentials: credentials ? () => credentials : none,
  };
}

async function currentVersion(server: DevServer, env: Record<string, string>, d: VaultAuthDeps) {
  const { source } = await vaultTokenSourceFromEnv(env, d);
  try {
    return (await new VaultMetadataClient({ vaultAddr: server.addr, auth: source }).readMetadata('secret', 'app/db'))
      ?.currentVersion;
  } finally {
    source.stop();
  }
}

describe.each<ServerKind>(['openbao', 'vault'])('Vault logins on %s', (kind) => {
  let server: DevServer;
  let dir: string;
  beforeAll(async () => {
    server = await startDevServer({ kind });
    dir = mkdtempSync(join(tmpdir(), 'vault-rollout-auth-'));
    await server.client.writePolicy('vault-rollout-reconcile', POLICY);
    await server.client.kv2Write('secret', 'app/db', { password: 'one' });
    await server.client.kv2Write('secret', 'app/db', { password: 'two' });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a token from the environment and from a file', async () => {
    const { token } = await server.client.createToken({ policies: ['vault-rollout-reconcile'] });
    expect(await currentVersion(server, { VAULT_TOKEN: token }, deps(server))).toBe(2);
    const file = join(dir, 'token');
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    expect(await currentVersion(server, { VAULT_TOKEN_FILE: file }, deps(server))).toBe(2);
  });

  it('a token with a TTL of a few seconds keeps working past it because it is renewed', async () => {
    const created = (await server.client.post('auth/token/create', {
      policies: ['vault-rollout-reconcile'],
      ttl: '4s',
      explicit_max_ttl: '5m',
    })) as { auth: { client_token: string } };
    const token = created.auth.client_token;
    const log = memoryLog();
    const { source } = await vaultTokenSourceFromEnv({ VAULT_TOKEN: token }, deps(server, log));
    try {
      const client = new VaultMetadataClient({ vaultAddr: server.addr, auth: source });
      expect((await client.readMetadata('secret', 'app/db'))?.currentVersion).toBe(2);
      await new Promise((r) => setTimeout(r, 6_000));
      expect((await client.readMetadata('secret', 'app/db'))?.currentVersion).toBe(2);
      expect(log.lines.map((l) => l.message)).toContain('renewed the Vault token');
      expect(JSON.stringify(log.lines)).not.toContain(token);
    } finally {
      source.stop();
    }
  }, 30_000);

  it('a non-renewable token is used without renewal', async () => {
    const created = (await server.client.post('auth/token/create', {
      policies: ['vault-rollout-reconcile'],
      ttl: '1h',
      renewable: false,
    })) as { auth: { client_token: string } };
    const log = memoryLog();
    expect(await currentVersion(server, { VAULT_TOKEN: created.auth.client_token }, deps(server, log))).toBe(2);
    const messages = log.lines.map((l) => l.message);
    expect(messages.filter((m) => m.includes('not renewable'))).toHaveLength(1);
    expect(messages).not.toContain('renewed the Vault token');
  });

  it('a revoked token is refused with a clear error', async () => {
    const { token } = await server.client.createToken({ policies: ['vault-rollout-reconcile'] });
    await server.client.post('auth/token/revoke', { token });
    const { source } = await vaultTokenSourceFromEnv({ VAULT_TOKEN: token }, deps(server));
    await expect(source.token()).rejects.toThrow(/supply a new token/);
    source.stop();
  });

  it('AppRole, and the secret ID never reaches a log line', async () => {
    const { roleId, secretId } = await server.client.createAppRole('reconcile', ['vault-rollout-reconcile']);
    const log = memoryLog();
    expect(await currentVersion(server, { VAULT_ROLE_ID: roleId, VAULT_SECRET_ID: secretId }, deps(server, log))).toBe(
      2,
    );
    expect(log.lines.map((l) => l.message)).toContain('logged in to Vault with AppRole');
    expect(JSON.stringify(log.lines)).not.toContain(secretId);
  });
});

describe('AWS IAM login on Vault 1.21.1, STS emulated by moto', () => {
  let server: DevServer;
  let moto: MotoServer;
  let credentials: AwsCredentialsProvider;
  const headerValue = 'vault.example.test';

  beforeAll(async () => {
    [server, moto] = await Promise.all([startDevServer({ kind: 'vault' }), startMotoServer()]);
    await server.client.writePolicy('vault-rollout-reconcile', POLICY);
    await server.client.kv2Write('secret', 'app/db', { password: 'one' });
    await server.client.post('sys/auth/aws', { type: 'aws' });
    await server.client.post('auth/aws/config/client', {
      sts_endpoint: moto.url,
      sts_region: 'us-east-1',
      iam_server_id_header_value: headerValue,
    });
    await server.client.post('auth/aws/role/reconcile', {
      auth_type: 'iam',
      bound_iam_principal_arn: [`arn:aws:iam::${ACCOUNT}:role/vault-rollout-reconcile`],
      resolve_aws_unique_ids: false,
      token_policies: ['vault-rollout-reconcile'],
      token_ttl: '1h',
    });
    // The Lambda's situation: temporary credentials of its execution role.
    const sts = new STSClient({
      region: 'us-east-1',
      endpoint: moto.url,
      credentials: { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'test-secret' },
    });
    const assumed = await sts.send(
      new AssumeRoleCommand({
        RoleArn: `arn:aws:iam::${ACCOUNT}:role/vault-rollout-reconcile`,
        RoleSessionName: 'reconcile',
      }),
    );
    const c = assumed.Credentials;
    if (!c?.AccessKeyId || !c.SecretAccessKey) throw new Error('moto AssumeRole gave no credentials');
    credentials = () =>
      Promise.resolve({
        accessKeyId: c.AccessKeyId as string,
        secretAccessKey: c.SecretAccessKey as string,
        ...(c.SessionToken ? { sessionToken: c.SessionToken } : {}),
      });
  }, 600_000);
  afterAll(async () => {
    await Promise.all([server?.stop(), moto?.stop()]);
  });

  const env = (extra: Record<string, string> = {}) => ({
    VAULT_AWS_ROLE: 'reconcile',
    VAULT_AWS_STS_ENDPOINT: `${moto.url}/`,
    VAULT_AWS_HEADER_VALUE: headerValue,
    ...extra,
  });

  it('logs in with the signed sts:GetCallerIdentity and reads metadata', async () => {
    const log = memoryLog();
    expect(await currentVersion(server, env(), deps(server, log, credentials))).toBe(1);
    expect(log.lines.map((l) => l.message)).toContain('logged in to Vault with AWS IAM');
    const secret = (await credentials()).secretAccessKey;
    expect(JSON.stringify(log.lines)).not.toContain(secret);
  });

  it('a request signed for another Vault (another iam_server_id_header_value) is refused', async () => {
    const login = await awsIamLoginRequest({
      role: 'reconcile',
      credentials,
      stsEndpoint: `${moto.url}/`,
      serverIdHeaderValue: 'another.vault',
    });
    const answer = await vaultRequest({ vaultAddr: server.addr, method: 'POST', path: login.path, body: login.body });
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('X-Vault-AWS-IAM-Server-ID');
  });
});
