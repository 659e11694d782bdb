import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import fs, { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { resolveKubeconfigAccess } from '../../../../lib/kube/credentials/kubeconfig-source.ts';
import type { KubeconfigSourceDeps } from '../../../../lib/kube/credentials/kubeconfig-source.ts';
import type { ClusterConfig } from '../../../../lib/routing/schema.ts';
import { awsError, kubeconfigYaml, planted, recordingLogger, rejectionOf } from './fixtures.ts';
import type { RecordingLogger } from './fixtures.ts';

const ssmMock = mockClient(SSMClient);
const secretsManagerMock = mockClient(SecretsManagerClient);

interface TestDeps extends KubeconfigSourceDeps {
  logger: RecordingLogger;
  reads: string[];
}

function testDeps(files: Record<string, string> = {}, env: Record<string, string> = {}): TestDeps {
  const reads: string[] = [];
  return {
    routingTableDir: '/etc/vault-rollout',
    env,
    reads,
    readFile: async (path) => {
      reads.push(path);
      const text = files[path];
      if (text === undefined)
        throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
      return text;
    },
    ssm: new SSMClient({ region: 'eu-west-1' }),
    secretsManager: new SecretsManagerClient({ region: 'eu-west-1' }),
    logger: recordingLogger(),
  };
}

const cluster = (kubeconfig: ClusterConfig['kubeconfig'], extra: Partial<ClusterConfig> = {}): ClusterConfig => ({
  kubeconfig,
  labels: {},
  ...extra,
});

beforeEach(() => {
  ssmMock.reset();
  secretsManagerMock.reset();
});

describe('kubeconfig sources', () => {
  it("reads a file relative to the routing table's directory, and its relative certificate paths relative to the file", async () => {
    const text = kubeconfigYaml({ user: { 'client-certificate': 'certs/admin.crt', 'client-key': 'certs/admin.key' } });
    const deps = testDeps({ '/etc/vault-rollout/kubeconfigs/prod-eu.yaml': text });

    const access = await resolveKubeconfigAccess('prod-eu', cluster({ file: 'kubeconfigs/prod-eu.yaml' }), deps);

    expect(deps.reads).toEqual(['/etc/vault-rollout/kubeconfigs/prod-eu.yaml']);
    expect(access.server).toBe('https://api.main.example:6443');
    expect(access.refreshAfter).toBeUndefined();
    expect(access.kubeConfig.getCurrentUser()?.certFile).toBe('/etc/vault-rollout/kubeconfigs/certs/admin.crt');
  });

  it('reads an absolute file path as is', async () => {
    const deps = testDeps({ '/secrets/kc.yaml': kubeconfigYaml() });
    await resolveKubeconfigAccess('c', cluster({ file: '/secrets/kc.yaml' }), deps);
    expect(deps.reads).toEqual(['/secrets/kc.yaml']);
  });

  it('reads an environment variable from the env object passed in', async () => {
    const access = await resolveKubeconfigAccess(
      'c',
      cluster({ env: 'KUBECONFIG_PROD' }),
      testDeps({}, { KUBECONFIG_PROD: kubeconfigYaml() }),
    );
    expect(access.kubeConfig.getCurrentUser()?.token).toBe(planted.token);
  });

  it('takes an inline kubeconfig', async () => {
    const access = await resolveKubeconfigAccess('c', cluster({ inline: kubeconfigYaml() }), testDeps());
    expect(access.kubeConfig.getCurrentCluster()?.name).toBe('main');
  });

  it('reads an SSM SecureString with decryption', async () => {
    ssmMock
      .on(GetParameterCommand)
      .resolves({ Parameter: { Name: '/k8s/prod', Type: 'SecureString', Value: kubeconfigYaml() } });

    const access = await resolveKubeconfigAccess('c', cluster({ ssm: '/k8s/prod' }), testDeps());

    expect(ssmMock.commandCalls(GetParameterCommand).map((call) => call.args[0].input)).toEqual([
      { Name: '/k8s/prod', WithDecryption: true },
    ]);
    expect(access.server).toBe('https://api.main.example:6443');
  });

  it('reads a Secrets Manager SecretString', async () => {
    secretsManagerMock.on(GetSecretValueCommand).resolves({ SecretString: kubeconfigYaml() });

    const access = await resolveKubeconfigAccess('c', cluster({ secretsManager: 'prod/kubeconfig' }), testDeps());

    expect(secretsManagerMock.commandCalls(GetSecretValueCommand).map((call) => call.args[0].input)).toEqual([
      { SecretId: 'prod/kubeconfig' },
    ]);
    expect(access.kubeConfig.getCurrentContext()).toBe('main');
  });
});

describe('context selection', () => {
  it('uses current-context when the routing table names none, keeping only that context', async () => {
    const access = await resolveKubeconfigAccess('c', cluster({ inline: kubeconfigYaml() }), testDeps());
    const kc = access.kubeConfig;
    expect(kc.getCurrentContext()).toBe('main');
    expect(kc.getContextObject('main')?.namespace).toBe('payments');
    expect(kc.getContexts().map((c) => c.name)).toEqual(['main']);
    expect(kc.getClusters().map((c) => c.name)).toEqual(['main']);
    expect(kc.getUsers().map((u) => u.name)).toEqual(['admin']);
  });

  it("uses the routing table's context over current-context", async () => {
    const access = await resolveKubeconfigAccess(
      'c',
      cluster({ inline: kubeconfigYaml() }, { context: 'other' }),
      testDeps(),
    );
    expect(access.server).toBe('https://api.other.example:6443');
    expect(access.kubeConfig.getCurrentUser()?.username).toBe('bob');
  });

  it('refuses a context without a user: that would be an anonymous connection', async () => {
    const text = kubeconfigYaml({ extraContexts: '  - name: anon\n    context: { cluster: main }' });
    const error = await rejectionOf(
      resolveKubeconfigAccess('c', cluster({ inline: text }, { context: 'anon' }), testDeps()),
    );
    expect(error.message).toBe(
      'cluster c: inline kubeconfig: context anon names no user, so the cluster would be called anonymously; name a user with a token, client certificate or exec plugin',
    );
  });
});

describe('TLS', () => {
  it('verifies TLS even when the kubeconfig says insecure-skip-tls-verify, and logs nothing', async () => {
    const deps = testDeps();
    const access = await resolveKubeconfigAccess('c', cluster({ inline: kubeconfigYaml({ insecure: true }) }), deps);
    expect(access.insecureSkipTLSVerify).toBe(false);
    expect(access.kubeConfig.getCurrentCluster()?.skipTLSVerify).toBe(false);
    expect(deps.logger.lines).toEqual([]);
  });

  it('skips verification only when the routing table says so, with one warning naming the cluster only', async () => {
    const deps = testDeps();
    const access = await resolveKubeconfigAccess(
      'lab',
      cluster({ inline: kubeconfigYaml() }, { insecureSkipTLSVerify: true }),
      deps,
    );
    expect(access.insecureSkipTLSVerify).toBe(true);
    expect(access.kubeConfig.getCurrentCluster()?.skipTLSVerify).toBe(true);
    expect(deps.logger.lines).toHaveLength(1);
    expect(JSON.parse(deps.logger.lines[0] ?? '{}')).toEqual({
      message: 'cluster lab: TLS verification is disabled (insecureSkipTLSVerify: true in the routing table)',
      cluster: 'lab',
    });
  });

  it('does not warn about a kubeconfig it refuses', async () => {
    const deps = testDeps();
    await rejectionOf(
      resolveKubeconfigAccess(
        'lab',
        cluster({ inline: kubeconfigYaml() }, { context: 'nope', insecureSkipTLSVerify: true }),
        deps,
      ),
    );
    expect(deps.logger.lines).toEqual([]);
  });

  it('accepts an http server only when TLS verification is off', async () => {
    const text = kubeconfigYaml({ server: 'http://127.0.0.1:8080' });
    const access = await resolveKubeconfigAccess(
      'c',
      cluster({ inline: text }, { insecureSkipTLSVerify: true }),
      testDeps(),
    );
    expect(access.server).toBe('http://127.0.0.1:8080');
  });
});

describe('errors name the cluster, the source and the fix', () => {
  const cases: [string, ClusterConfig, RegExp, (deps: TestDeps) => void][] = [
    [
      'missing env var',
      cluster({ env: 'KUBECONFIG_PROD' }),
      /^cluster c: kubeconfig from environment variable KUBECONFIG_PROD: the variable is not set or empty; set KUBECONFIG_PROD/,
      () => {},
    ],
    [
      'missing file',
      cluster({ file: 'kc/missing.yaml' }),
      /^cluster c: kubeconfig file kc\/missing.yaml: cannot read \/etc\/vault-rollout\/kc\/missing.yaml \(ENOENT\); paths are relative to the routing table/,
      () => {},
    ],
    [
      'bad YAML',
      cluster({ inline: `clusters:\n  - name: x\n   token: ${planted.token}\n` }),
      /^cluster c: inline kubeconfig: is not valid YAML \(line 3, column 1\); fix the YAML$/,
      () => {},
    ],
    [
      'YAML that is no mapping',
      cluster({ inline: '- just\n- a list' }),
      /^cluster c: inline kubeconfig: is not a valid kubeconfig; expected a YAML mapping/,
      () => {},
    ],
    [
      'empty document',
      cluster({ inline: '# nothing\n' }),
      /^cluster c: inline kubeconfig: is not a valid kubeconfig; expected a YAML mapping/,
      () => {},
    ],
    [
      'exec plugin',
      cluster({
        inline: kubeconfigYaml({
          user: { token: planted.token, exec: { command: 'aws', args: ['eks', 'get-token'] } },
        }),
      }),
      /^cluster c: inline kubeconfig: user admin: exec \(the credential plugin aws\) runs only when the operator allows it for this cluster: set VAULT_ROLLOUT_ALLOW_EXEC=c/,
      () => {},
    ],
    [
      'auth-provider plugin',
      cluster({
        inline: kubeconfigYaml({
          user: { 'auth-provider': { name: 'gcp', config: { 'access-token': planted.token } } },
        }),
      }),
      /^cluster c: inline kubeconfig: user admin: auth-provider \(gcp\) is refused: kubectl removed these plugins; use the provider's exec plugin instead \(gke-gcloud-auth-plugin, kubelogin, aws eks get-token\), allowed with VAULT_ROLLOUT_ALLOW_EXEC/,
      () => {},
    ],
    [
      'missing context',
      cluster({ inline: kubeconfigYaml() }, { context: 'nope' }),
      /^cluster c: inline kubeconfig: the routing table's context nope is not in the kubeconfig \(its contexts: main, other\)$/,
      () => {},
    ],
    [
      'dangling current-context',
      cluster({ inline: kubeconfigYaml({ currentContext: 'gone' }) }),
      /current-context gone is not in the kubeconfig/,
      () => {},
    ],
    [
      'no context at all',
      cluster({ inline: kubeconfigYaml({ currentContext: null }) }),
      /names no context; set `context` for the cluster in the routing table or current-context in the kubeconfig/,
      () => {},
    ],
    [
      'no cluster server',
      cluster({ inline: kubeconfigYaml({ server: null }) }),
      /^cluster c: inline kubeconfig: is not a valid kubeconfig: clusters\[0\]\.cluster\.server is missing$/,
      () => {},
    ],
    [
      'server not a URL',
      cluster({ inline: kubeconfigYaml({ server: 'not a url' }) }),
      /the cluster server is not a URL/,
      () => {},
    ],
    [
      'credentials in the server URL',
      cluster({ inline: kubeconfigYaml({ server: `https://admin:${planted.password}@api.example` }) }),
      /the cluster server URL carries credentials/,
      () => {},
    ],
    [
      'http without insecureSkipTLSVerify',
      cluster({ inline: kubeconfigYaml({ server: 'http://api.example' }) }),
      /the cluster server must be an https URL \(got http:\)/,
      () => {},
    ],
    [
      'context names an undefined cluster',
      cluster(
        { inline: kubeconfigYaml({ extraContexts: '  - name: lost\n    context: { cluster: nowhere, user: admin }' }) },
        { context: 'lost' },
      ),
      /context lost names cluster nowhere, which the kubeconfig does not define/,
      () => {},
    ],
    [
      'context names an undefined user',
      cluster(
        { inline: kubeconfigYaml({ extraContexts: '  - name: lost\n    context: { cluster: main, user: nobody }' }) },
        { context: 'lost' },
      ),
      /context lost names user nobody, which the kubeconfig does not define/,
      () => {},
    ],
    [
      'SSM access denied',
      cluster({ ssm: '/k8s/prod' }),
      /^cluster c: kubeconfig from SSM parameter \/k8s\/prod: cannot be read \(AccessDeniedException\); check that it exists and grant ssm:GetParameter \(and kms:Decrypt on its key\)$/,
      () =>
        void ssmMock
          .on(GetParameterCommand)
          .rejects(
            awsError(
              'AccessDeniedException',
              'User: arn:aws:sts::111122223333:assumed-role/x is not authorized to perform: ssm:GetParameter',
            ),
          ),
    ],
    [
      'SSM parameter without a value',
      cluster({ ssm: '/k8s/prod' }),
      /SSM parameter \/k8s\/prod: has no value; store the kubeconfig YAML as a SecureString parameter/,
      () => void ssmMock.on(GetParameterCommand).resolves({ Parameter: { Name: '/k8s/prod' } }),
    ],
    [
      'SSM value that is bad YAML',
      cluster({ ssm: '/k8s/prod' }),
      /SSM parameter \/k8s\/prod: is not valid YAML \(line \d+, column \d+\); fix the YAML$/,
      () =>
        void ssmMock
          .on(GetParameterCommand)
          .resolves({ Parameter: { Value: `password: ${planted.password}\nusers: [{ token: ${planted.token}\n` } }),
    ],
    [
      'Secrets Manager secret not found',
      cluster({ secretsManager: 'prod/kc' }),
      /^cluster c: kubeconfig from Secrets Manager secret prod\/kc: cannot be read \(ResourceNotFoundException\); check that it exists and grant secretsmanager:GetSecretValue/,
      () =>
        void secretsManagerMock
          .on(GetSecretValueCommand)
          .rejects(awsError('ResourceNotFoundException', "Secrets Manager can't find the specified secret.")),
    ],
    [
      'binary Secrets Manager secret',
      cluster({ secretsManager: 'prod/kc' }),
      /Secrets Manager secret prod\/kc: has no value; store the kubeconfig YAML as the secret string \(binary secrets are not read\)/,
      () => void secretsManagerMock.on(GetSecretValueCommand).resolves({ SecretBinary: Buffer.from(kubeconfigYaml()) }),
    ],
  ];

  it.each(cases)('%s', async (_label, config, message, arrange) => {
    const deps = testDeps();
    arrange(deps);
    const error = await rejectionOf(resolveKubeconfigAccess('c', config, deps));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect((error as ClusterAccessError).cluster).toBe('c');
    expect(error.message).toMatch(message);
  });

  it("keeps the AWS error as the cause, but never the parser's (it quotes the input)", async () => {
    const denied = awsError('AccessDeniedException', 'not authorized');
    ssmMock.on(GetParameterCommand).rejects(denied);
    expect((await rejectionOf(resolveKubeconfigAccess('c', cluster({ ssm: '/p' }), testDeps()))).cause).toBe(denied);
    expect(
      (await rejectionOf(resolveKubeconfigAccess('c', cluster({ inline: 'a: [' }), testDeps()))).cause,
    ).toBeUndefined();
  });

  it('refuses a routing-table entry without a kubeconfig', async () => {
    const error = await rejectionOf(resolveKubeconfigAccess('c', { labels: {} }, testDeps()));
    expect(error.message).toBe('cluster c: has no kubeconfig source');
  });
});

describe('token files', () => {
  // client-node reads every user's token-file while loading a kubeconfig: from a kubeconfig stored in SSM, that would
  // send any file of the worker (its environment, a mounted secret) as a bearer token to a server the kubeconfig names.
  const tokenFilePath = join(tmpdir(), `vault-rollout-token-file-${process.pid}`);
  const readsOf = (spy: { mock: { calls: unknown[][] } }) =>
    spy.mock.calls.filter(([path]) => String(path) === tokenFilePath);
  const withTokenFile = (user: string, field = 'token-file') =>
    kubeconfigYaml({ user: { 'client-key-data': planted.clientKeyData } }).replace(
      /users:\n/,
      `users:\n  - name: ${user}\n    user: { ${field}: ${JSON.stringify(tokenFilePath)} }\n`,
    );
  const sources: [string, ClusterConfig['kubeconfig'], (deps: TestDeps, text: string) => void][] = [
    ['a file', { file: 'kc.yaml' }, () => {}],
    ['the environment', { env: 'KC' }, () => {}],
    ['the routing table', { inline: '(set below)' }, () => {}],
    [
      'SSM',
      { ssm: '/k8s/prod' },
      (_deps, text) => void ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: text } }),
    ],
    [
      'Secrets Manager',
      { secretsManager: 'prod/kc' },
      (_deps, text) => void secretsManagerMock.on(GetSecretValueCommand).resolves({ SecretString: text }),
    ],
  ];

  beforeEach(() => writeFileSync(tokenFilePath, 'a-local-file-that-is-no-token'));
  afterEach(() => {
    vi.restoreAllMocks();
    rmSync(tokenFilePath, { force: true });
  });

  it.each(sources)(
    "is refused without the operator's opt-in, before the file is opened, in a kubeconfig from %s (both spellings)",
    async (label, source, arrange) => {
      const remote = label === 'SSM' || label === 'Secrets Manager';
      for (const field of ['token-file', 'tokenFile']) {
        const text = withTokenFile('admin', field).replace(
          / {2}- name: admin\n {4}user:\n/,
          '  - name: unused\n    user:\n',
        );
        // From SSM or Secrets Manager even the operator's opt-in does not allow it; elsewhere the table's does not.
        const deps = testDeps(
          { '/etc/vault-rollout/kc.yaml': text },
          { KC: text, ...(remote ? { VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'c' } : {}) },
        );
        arrange(deps, text);
        const config = cluster(
          source && 'inline' in source
            ? { inline: text, allowTokenFile: true }
            : ({ ...source, ...(remote ? {} : { allowTokenFile: true }) } as ClusterConfig['kubeconfig']),
        );
        const readFileSync = vi.spyOn(fs, 'readFileSync');
        const openSync = vi.spyOn(fs, 'openSync');
        const error = await rejectionOf(resolveKubeconfigAccess('c', config, deps));
        expect(readsOf(readFileSync)).toEqual([]);
        expect(readsOf(openSync)).toEqual([]);
        expect(error).toBeInstanceOf(ClusterAccessError);
        if (remote) {
          expect(error.message).toContain(
            `: user admin: ${field} ${tokenFilePath} is refused for a kubeconfig from SSM or Secrets Manager: whoever can write it would choose which file`,
          );
        } else {
          expect(error.message).toContain(
            `: user admin: ${field} ${tokenFilePath} is refused: it would send a file of this machine as the bearer token;`,
          );
          expect(error.message).toContain("set VAULT_ROLLOUT_ALLOW_TOKEN_FILE=c in vault-rollout's environment");
        }
        expect(error.message).not.toContain('a-local-file-that-is-no-token');
        vi.restoreAllMocks();
      }
    },
  );

  it('is never read for a user the selected context does not name', async () => {
    const text = kubeconfigYaml().replace(
      /users:\n/,
      `users:\n  - name: elsewhere\n    user: { token-file: ${JSON.stringify(tokenFilePath)} }\n`,
    );
    const readFileSync = vi.spyOn(fs, 'readFileSync');
    const access = await resolveKubeconfigAccess('c', cluster({ inline: text }, { context: 'main' }), testDeps());
    expect(readsOf(readFileSync)).toEqual([]);
    expect(access.kubeConfig.getUsers().map((u) => u.name)).toEqual(['admin']);
  });

  it('is refused behind a YAML merge key too', async () => {
    const text = kubeconfigYaml()
      .replace(
        /^users:\n/m,
        `x-base: &base { token-file: ${JSON.stringify(tokenFilePath)} }\nusers:\n  - name: merged\n    user: { <<: *base }\n`,
      )
      .replace(
        'context: { cluster: main, user: admin, namespace: payments }',
        'context: { cluster: main, user: merged }',
      );
    const readFileSync = vi.spyOn(fs, 'readFileSync');
    const error = await rejectionOf(resolveKubeconfigAccess('c', cluster({ inline: text }), testDeps()));
    expect(readsOf(readFileSync)).toEqual([]);
    expect(error.message).toMatch(/user merged: token-file .* is refused/);
  });

  it("with the operator's VAULT_ROLLOUT_ALLOW_TOKEN_FILE naming the cluster, is the bearer token, read again when the file changes", async () => {
    writeFileSync(tokenFilePath, 'first-token\n');
    const text = withTokenFile('admin', 'tokenFile').replace(
      / {2}- name: admin\n {4}user:\n/,
      '  - name: unused\n    user:\n',
    );
    const access = await resolveKubeconfigAccess(
      'c',
      cluster({ inline: text }),
      testDeps({}, { VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'b, c' }),
    );
    expect(await access.bearerToken?.()).toBe('first-token');
    writeFileSync(tokenFilePath, 'second-token-longer\n');
    expect(await access.bearerToken?.()).toBe('second-token-longer');
  });
});

describe("the pod's own ServiceAccount token", () => {
  // It can patch every workload of the cluster vault-rollout runs in: whoever writes another cluster's kubeconfig
  // must not be able to have it sent to their server.
  const saDir = join(tmpdir(), `vault-rollout-sa-${process.pid}`);
  const podCa: Buffer = Buffer.from('-----BEGIN CERTIFICATE-----\npod ca\n-----END CERTIFICATE-----\n');
  const podEnv = {
    KUBERNETES_SERVICE_HOST: '10.96.0.1',
    KUBERNETES_SERVICE_PORT: '443',
    VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR: saDir,
  };
  const kubeconfig = (tokenFile: string, server: string, ca: Buffer = podCa) =>
    kubeconfigYaml({ server, user: { tokenFile } }).replace(
      /certificate-authority-data: \S+/,
      `certificate-authority-data: ${ca.toString('base64')}`,
    );
  const deps = (env: Record<string, string> = {}) => ({
    ...testDeps({ [join(saDir, 'ca.crt')]: podCa.toString() }, { ...podEnv, ...env }),
    tokenFile: { stat: async () => ({ ino: 1, mtimeMs: 1, size: 8 }), readFile: async () => 'sa-token' },
  });
  beforeEach(() => {
    fs.mkdirSync(saDir, { recursive: true });
    writeFileSync(join(saDir, 'token'), 'sa-token');
  });
  afterEach(() => rmSync(saDir, { recursive: true, force: true }));

  const elsewhere: [string, string, string, Buffer?][] = [
    [
      'the default path, to another server',
      '/var/run/secrets/kubernetes.io/serviceaccount/token',
      'https://attacker.example:6443',
    ],
    [
      'the /run spelling, to another server',
      '/run/secrets/kubernetes.io/serviceaccount/token',
      'https://attacker.example:6443',
    ],
    ['the projected folder, to another server', join(saDir, 'token'), 'https://attacker.example:6443'],
    [
      'the in-cluster address with another CA',
      join(saDir, 'token'),
      'https://10.96.0.1:443',
      Buffer.from('another ca'),
    ],
  ];
  it.each(elsewhere)("is refused by %s, even with the operator's opt-in", async (_label, path, server, ca) => {
    const error = await rejectionOf(
      resolveKubeconfigAccess(
        'remote',
        cluster({ inline: kubeconfig(path, server, ca) }),
        deps({ VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'remote' }),
      ),
    );
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toContain(
      `user admin: tokenFile ${path} is refused: it is the pod's own ServiceAccount token, which goes only to the in-cluster API server`,
    );
    expect(error.message).toContain('use inCluster: true');
  });

  it('is refused behind a symbolic link elsewhere', async () => {
    const link = join(tmpdir(), `vault-rollout-sa-link-${process.pid}`);
    rmSync(link, { force: true });
    fs.symlinkSync(join(saDir, 'token'), link);
    try {
      const error = await rejectionOf(
        resolveKubeconfigAccess(
          'remote',
          cluster({ inline: kubeconfig(link, 'https://attacker.example') }),
          deps({ VAULT_ROLLOUT_ALLOW_TOKEN_FILE: 'remote' }),
        ),
      );
      expect(error.message).toContain("it is the pod's own ServiceAccount token");
    } finally {
      rmSync(link, { force: true });
    }
  });

  it('is refused from SSM, even to the in-cluster API', async () => {
    ssmMock
      .on(GetParameterCommand)
      .resolves({ Parameter: { Value: kubeconfig(join(saDir, 'token'), 'https://10.96.0.1:443') } });
    const error = await rejectionOf(resolveKubeconfigAccess('home', cluster({ ssm: '/kc' }), deps()));
    expect(error.message).toContain('is refused for a kubeconfig from SSM or Secrets Manager');
  });

  it("is sent, without opt-in, to the in-cluster API server with the pod's CA", async () => {
    const access = await resolveKubeconfigAccess(
      'home',
      cluster({ inline: kubeconfig(join(saDir, 'token'), 'https://10.96.0.1') }),
      deps(),
    );
    expect(await access.bearerToken?.()).toBe('sa-token');
  });
});

describe('a user that yields no credential', () => {
  // kubectl spells it tokenFile; client-node reads only token-file, so the user used to reach the server with no
  // credential at all, as system:anonymous.
  it("is an error naming the cluster, the field and the way out, never an anonymous connection (kubectl's tokenFile)", async () => {
    const text = kubeconfigYaml({ user: { tokenFile: '/home/me/.kube/token' } });
    const error = await rejectionOf(resolveKubeconfigAccess('prod', cluster({ inline: text }), testDeps()));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toMatch(
      /^cluster prod: inline kubeconfig: user admin: tokenFile \/home\/me\/\.kube\/token is refused/,
    );
    expect(error.message).toMatch(/set VAULT_ROLLOUT_ALLOW_TOKEN_FILE=prod/);
  });
});
