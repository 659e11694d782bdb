/**
 * Every error path, with secrets planted where that path could see them: neither the error (message, causes,
 * inspection) nor any logged line may contain the token, an AWS secret key, the kubeconfig's client key, token or
 * password, or the SSM / Secrets Manager value.
 */
import { DescribeClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { KubeConfig } from '@kubernetes/client-node';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { createClusterAccessResolver } from '../../../../lib/kube/credentials/resolve.ts';
import type { ClusterAccessDeps } from '../../../../lib/kube/credentials/resolve.ts';
import type { ClusterConfig } from '../../../../lib/routing/schema.ts';
import { awsError, expectNoSecrets, kubeconfigYaml, planted, recordingLogger, rejectionOf } from './fixtures.ts';
import type { RecordingLogger } from './fixtures.ts';

const ssmMock = mockClient(SSMClient);
const secretsManagerMock = mockClient(SecretsManagerClient);
const eksMock = mockClient(EKSClient);
const stsMock = mockClient(STSClient);

const ROLE = 'arn:aws:iam::111122223333:role/vault-rollout';
const secretYamlLine = `  token: ${planted.token}\n password: ${planted.password}\n`; // bad indentation on a secret line
const badYaml = `users:\n- name: admin\n  user:\n  client-key-data: ${planted.clientKeyData}\n${secretYamlLine}`;
const ssmValue = `${kubeconfigYaml()}# planted-ssm-value-marker\n`;
const exec = kubeconfigYaml({
  user: {
    token: planted.token,
    'client-key-data': planted.clientKeyData,
    exec: { command: 'aws', env: [{ name: 'AWS_SECRET_ACCESS_KEY', value: planted.secretAccessKey }] },
  },
});

function deps(logger: RecordingLogger, env: Record<string, string> = {}): ClusterAccessDeps {
  return {
    routingTableDir: '/routes',
    env,
    readFile: async (path) => {
      if (path.endsWith('exec.yaml')) return exec;
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
    },
    ssm: new SSMClient({ region: 'eu-west-1' }),
    secretsManager: new SecretsManagerClient({ region: 'eu-west-1' }),
    baseCredentials: async () => ({ accessKeyId: 'AKIABASE', secretAccessKey: planted.secretAccessKey }),
    createEksClient: (region, credentials) => new EKSClient({ region, credentials }),
    createStsClient: (region) => new STSClient({ region }),
    clock: () => Date.parse('2026-01-01T00:00:00Z'),
    logger,
  };
}

const insecure = { insecureSkipTLSVerify: true, labels: {} } as const;

// Each case: the cluster config, and how the AWS mocks answer. All run with insecureSkipTLSVerify where it reaches
// the logger, so the warning line is checked too.
const cases: [string, ClusterConfig, () => void][] = [
  ['bad YAML inline', { kubeconfig: { inline: badYaml }, ...insecure }, () => {}],
  [
    'bad YAML from SSM',
    { kubeconfig: { ssm: '/k' }, ...insecure },
    () => void ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: badYaml } }),
  ],
  [
    'bad YAML from Secrets Manager',
    { kubeconfig: { secretsManager: 'k' }, ...insecure },
    () => void secretsManagerMock.on(GetSecretValueCommand).resolves({ SecretString: badYaml }),
  ],
  ['exec plugin from a file', { kubeconfig: { file: 'exec.yaml' }, ...insecure }, () => {}],
  ['exec plugin from the environment', { kubeconfig: { env: 'KC_EXEC' }, ...insecure }, () => {}],
  [
    'missing context from SSM',
    { kubeconfig: { ssm: '/k' }, context: 'nope', ...insecure },
    () => void ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: ssmValue } }),
  ],
  ['missing server', { kubeconfig: { inline: kubeconfigYaml({ server: null }) }, ...insecure }, () => {}],
  [
    'credentials in the server URL',
    {
      kubeconfig: { inline: kubeconfigYaml({ server: `https://admin:${planted.password}@api.example` }) },
      ...insecure,
    },
    () => {},
  ],
  ['missing file', { kubeconfig: { file: 'missing.yaml' }, labels: {} }, () => {}],
  ['missing env var', { kubeconfig: { env: 'NOPE' }, labels: {} }, () => {}],
  [
    'SSM denied',
    { kubeconfig: { ssm: '/k' }, labels: {} },
    () =>
      void ssmMock
        .on(GetParameterCommand)
        .rejects(awsError('AccessDeniedException', 'not authorized to perform ssm:GetParameter on /k')),
  ],
  [
    'Secrets Manager empty',
    { kubeconfig: { secretsManager: 'k' }, labels: {} },
    () => void secretsManagerMock.on(GetSecretValueCommand).resolves({ SecretString: '  ' }),
  ],
  [
    'AssumeRole denied',
    { eks: { name: 'e', region: 'eu-west-1', roleArn: ROLE }, ...insecure },
    () => void stsMock.on(AssumeRoleCommand).rejects(awsError('AccessDenied', 'not authorized')),
  ],
  [
    'DescribeCluster denied after AssumeRole',
    { eks: { name: 'e', region: 'eu-west-1', roleArn: ROLE }, ...insecure },
    () => {
      stsMock.on(AssumeRoleCommand).resolves({
        Credentials: {
          AccessKeyId: 'ASIA',
          SecretAccessKey: planted.assumedSecretAccessKey,
          SessionToken: planted.sessionToken,
          Expiration: new Date('2026-01-01T01:00:00Z'),
        },
      });
      eksMock.on(DescribeClusterCommand).rejects(awsError('AccessDeniedException', 'not authorized'));
    },
  ],
  [
    'DescribeCluster without endpoint',
    { eks: { name: 'e', region: 'eu-west-1' }, ...insecure },
    () => void eksMock.on(DescribeClusterCommand).resolves({ cluster: { status: 'FAILED' } }),
  ],
];

beforeEach(() => {
  for (const mock of [ssmMock, secretsManagerMock, eksMock, stsMock]) mock.reset();
});

describe('no secret in any error or log line', () => {
  it("has a meaningful bad-YAML case: the parser's own error does quote the secret", () => {
    let parserMessage = '';
    try {
      new KubeConfig().loadFromString(badYaml);
    } catch (error) {
      parserMessage = String(error);
    }
    expect(parserMessage).toContain(planted.token);
  });

  it.each(cases)('%s', async (_label, config, arrange) => {
    arrange();
    const logger = recordingLogger();
    const error = await rejectionOf(createClusterAccessResolver(deps(logger, { KC_EXEC: exec }))('leaky', config));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toMatch(/^cluster leaky: /);
    expectNoSecrets(error, logger.lines, ['planted-ssm-value-marker']);
  });

  it('a successful EKS resolution logs neither the token nor the keys', async () => {
    eksMock
      .on(DescribeClusterCommand)
      .resolves({ cluster: { endpoint: 'https://e.example', certificateAuthority: { data: 'Q0E=' } } });
    const logger = recordingLogger();
    const access = await createClusterAccessResolver(deps(logger))('ok', {
      eks: { name: 'e', region: 'eu-west-1' },
      ...insecure,
    });
    const token = access.kubeConfig.getCurrentUser()?.token ?? '';
    expect(token).not.toBe('');
    expect(logger.lines).toHaveLength(1);
    expectNoSecrets(undefined, logger.lines, [token, token.slice(11, 60)]);
  });
});
