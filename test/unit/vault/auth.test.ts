import type { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { describe, expect, it } from 'vitest';
import { memoryLog } from '../../../lib/kernel/log.ts';
import {
  awsIamLoginRequest,
  IAM_SERVER_ID_HEADER,
  vaultAuthMethod,
  vaultTokenSourceFromEnv,
  type VaultAuthDeps,
} from '../../../lib/vault/auth.ts';

describe('vaultAuthMethod', () => {
  it.each([
    [{ VAULT_TOKEN: 't' }, 'token'],
    [{ VAULT_TOKEN_FILE: '/f' }, 'token'],
    [{ VAULT_TOKEN_SSM: '/p' }, 'token'],
    [{ VAULT_ROLE_ID: 'r', VAULT_SECRET_ID: 's' }, 'approle'],
    [{ VAULT_ROLE_ID_SSM: '/r', VAULT_SECRET_ID_SECRETS_MANAGER: 'id' }, 'approle'],
    [{ VAULT_AWS_ROLE: 'reconcile' }, 'aws'],
    [{ VAULT_TOKEN: 't', VAULT_AWS_ROLE: 'x', VAULT_AUTH_METHOD: 'aws' }, 'aws'],
  ])('%j -> %s', (env, method) => expect(vaultAuthMethod(env)).toBe(method));

  it.each([
    [{}, /no Vault authentication configured/],
    [{ VAULT_TOKEN: 't', VAULT_ROLE_ID: 'r' }, /choose one with VAULT_AUTH_METHOD/],
    [{ VAULT_AUTH_METHOD: 'ldap' }, /use token, approle, aws or kubernetes/],
  ])('%j is refused', (env, error) => expect(() => vaultAuthMethod(env)).toThrow(error));
});

describe('credentials from SSM and Secrets Manager', () => {
  const calls: unknown[] = [];
  const deps: VaultAuthDeps = {
    vaultAddr: 'http://127.0.0.1:1',
    log: memoryLog(),
    readFile: () => Promise.reject(new Error('no file')),
    ssm: () =>
      ({
        send: (command: unknown) => (
          calls.push(command),
          Promise.resolve({
            Parameter: { Value: (command as GetParameterCommand).input.Name === '/vault/token' ? 'tok\n' : 'role' },
          })
        ),
      }) as never,
    secretsManager: () =>
      ({ send: (command: unknown) => (calls.push(command), Promise.resolve({ SecretString: 'sid' })) }) as never,
    awsCredentials: () => () => Promise.resolve({ accessKeyId: 'AKID', secretAccessKey: 'SECRET' }),
    // The given token's lookup-self: a root token, used without renewal.
    fetch: () => Promise.resolve(Response.json({ data: { ttl: 0, renewable: false, expire_time: null } })),
  };

  it('reads a token from an SSM SecureString, decrypted', async () => {
    const { method, source } = await vaultTokenSourceFromEnv({ VAULT_TOKEN_SSM: '/vault/token' }, deps);
    expect(method).toBe('token');
    expect(await source.token()).toBe('tok');
    source.stop();
    const command = calls.at(-1) as GetParameterCommand;
    expect(command).toBeInstanceOf(GetParameterCommand);
    expect(command.input).toEqual({ Name: '/vault/token', WithDecryption: true });
  });

  it('reads the AppRole role ID from SSM and the secret ID from Secrets Manager', async () => {
    const { method, source } = await vaultTokenSourceFromEnv(
      { VAULT_ROLE_ID_SSM: '/vault/role-id', VAULT_SECRET_ID_SECRETS_MANAGER: 'vault/secret-id' },
      deps,
    );
    source.stop();
    expect(method).toBe('approle');
    expect((calls.at(-1) as GetSecretValueCommand).input).toEqual({ SecretId: 'vault/secret-id' });
  });
});

describe('awsIamLoginRequest', () => {
  it('signs GetCallerIdentity with the server ID header, every part base64 as Vault wants it', async () => {
    const login = await awsIamLoginRequest({
      role: 'reconcile',
      credentials: () => Promise.resolve({ accessKeyId: 'AKID', secretAccessKey: 'SECRET', sessionToken: 'SESSION' }),
      serverIdHeaderValue: 'vault.example.com',
      now: () => Date.parse('2026-11-23T12:00:00Z'),
    });
    expect(login.path).toBe('auth/aws/login');
    const body = login.body as Record<string, string>;
    const decode = (s: string | undefined) => Buffer.from(s ?? '', 'base64').toString('utf8');
    expect(body.role).toBe('reconcile');
    expect(decode(body.iam_request_url)).toBe('https://sts.amazonaws.com/');
    expect(decode(body.iam_request_body)).toBe('Action=GetCallerIdentity&Version=2011-06-15');
    const headers = JSON.parse(decode(body.iam_request_headers)) as Record<string, string[]>;
    expect(headers[IAM_SERVER_ID_HEADER]).toEqual(['vault.example.com']);
    expect(headers.authorization?.[0]).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKID\/20261123\/us-east-1\/sts\/aws4_request, SignedHeaders=.*x-vault-aws-iam-server-id/,
    );
    expect(headers['x-amz-security-token']).toEqual(['SESSION']);
    expect(JSON.stringify(login)).not.toContain('SECRET');
  });
});

describe('Kubernetes auth and ~/.vault-token', () => {
  const files: Record<string, string> = {};
  const requests: Array<{ url: string; body: unknown }> = [];
  const deps: VaultAuthDeps = {
    vaultAddr: 'http://127.0.0.1:1',
    log: memoryLog(),
    readFile: (path) =>
      path in files
        ? Promise.resolve(files[path] as string)
        : Promise.reject(Object.assign(new Error('ENOENT'), { code: 'ENOENT' })),
    ssm: () => {
      throw new Error('no SSM');
    },
    secretsManager: () => {
      throw new Error('no Secrets Manager');
    },
    awsCredentials: () => () => Promise.reject(new Error('no AWS')),
    fetch: async (url, init) => {
      requests.push({ url: String(url), body: init?.body === undefined ? undefined : JSON.parse(String(init.body)) });
      if (String(url).endsWith('/login'))
        return Response.json({
          auth: {
            client_token: `vault-token-for-${(JSON.parse(String(init?.body)) as { jwt: string }).jwt}`,
            lease_duration: 0,
            renewable: false,
          },
        });
      return Response.json({ data: { ttl: 0, renewable: false, expire_time: null } });
    },
  };

  /** A JWT-shaped token with these audiences (Vault verifies the signature; vault-rollout only reads `aud`). */
  const jwt = (aud: string | string[] | undefined, n: number) =>
    `eyJhbGciOiJSUzI1NiJ9.${Buffer.from(JSON.stringify({ ...(aud === undefined ? {} : { aud }), sub: 'system:serviceaccount:vault-rollout:vault-rollout', n })).toString('base64url')}.c2ln`;

  it("logs in with the role and the token projected for Vault's audience, read again for each login", async () => {
    files['/var/run/secrets/vault-rollout/vault/token'] = `${jwt('vault', 1)}\n`;
    const { method, source } = await vaultTokenSourceFromEnv({ VAULT_K8S_ROLE: 'vault-rollout' }, deps);
    expect(method).toBe('kubernetes');
    expect(await source.token()).toBe(`vault-token-for-${jwt('vault', 1)}`);
    expect(requests.at(-1)).toEqual({
      url: 'http://127.0.0.1:1/v1/auth/kubernetes/login',
      body: { role: 'vault-rollout', jwt: jwt('vault', 1) },
    });
    files['/var/run/secrets/vault-rollout/vault/token'] = `${jwt(['other', 'vault'], 2)}\n`;
    source.invalidate();
    expect(await source.token()).toBe(`vault-token-for-${jwt(['other', 'vault'], 2)}`);
    source.stop();
  });

  it('takes the mount, the token file and the audience from the environment', async () => {
    files['/tmp/sa/token'] = jwt('vault.example.com', 3);
    const { source } = await vaultTokenSourceFromEnv(
      {
        VAULT_K8S_ROLE: 'r',
        VAULT_K8S_MOUNT: 'k8s-prod',
        VAULT_K8S_TOKEN_FILE: '/tmp/sa/token',
        VAULT_K8S_AUDIENCE: 'vault.example.com',
      },
      deps,
    );
    await source.token();
    source.stop();
    expect(requests.at(-1)?.url).toBe('http://127.0.0.1:1/v1/auth/k8s-prod/login');
  });

  it.each([
    [
      "the API server's audience",
      jwt(['https://kubernetes.default.svc.cluster.local', 'k3s'], 4),
      '"https://kubernetes.default.svc.cluster.local", "k3s"',
    ],
    ['no audience (a legacy Secret token)', jwt(undefined, 5), 'none'],
    ['no JWT at all', 'not-a-jwt', 'none'],
  ])('refuses a token for %s before anything is sent to Vault', async (_label, token, shown) => {
    files['/tmp/api/token'] = token;
    const before = requests.length;
    const error = await vaultTokenSourceFromEnv(
      { VAULT_K8S_ROLE: 'r', VAULT_K8S_TOKEN_FILE: '/tmp/api/token' },
      deps,
    ).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toBe(
      `Kubernetes auth: the token /tmp/api/token is for audience ${shown}, not vault: a token the Kubernetes API accepts is not sent to Vault; project a ServiceAccount token with audience vault (the Helm chart mounts one at /var/run/secrets/vault-rollout/vault/token) and set audience=vault on the Vault role (or VAULT_K8S_AUDIENCE to the role's)`,
    );
    expect(error?.message).not.toContain(token.split('.')[1] ?? token);
    expect(requests.length).toBe(before);
  });

  it('fails at start-up, with the reason, outside a pod', async () => {
    await expect(
      vaultTokenSourceFromEnv({ VAULT_K8S_ROLE: 'r', VAULT_K8S_TOKEN_FILE: '/nowhere' }, deps),
    ).rejects.toThrow(
      'Kubernetes auth: cannot read the ServiceAccount token /nowhere (ENOENT); run in a pod with a token projected for audience vault there, or set VAULT_K8S_TOKEN_FILE',
    );
  });

  it("uses the vault CLI's ~/.vault-token when nothing else is configured, and only then", async () => {
    files['/home/me/.vault-token'] = 'cli-token\n';
    const { method, source } = await vaultTokenSourceFromEnv({ HOME: '/home/me' }, deps);
    expect(method).toBe('token');
    expect(await source.token()).toBe('cli-token');
    source.stop();
    const approle = await vaultTokenSourceFromEnv({ HOME: '/home/me', VAULT_ROLE_ID: 'r', VAULT_SECRET_ID: 's' }, deps);
    expect(approle.method).toBe('approle');
    approle.source.stop();
    await expect(vaultTokenSourceFromEnv({ HOME: '/home/nobody' }, deps)).rejects.toThrow(
      /no Vault authentication configured/,
    );
  });
});
