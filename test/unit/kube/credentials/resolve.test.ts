import { DescribeClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import { mkdtemp, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../../../../lib/kube/credentials/resolve.ts';
import type { ClusterAccessDeps } from '../../../../lib/kube/credentials/resolve.ts';
import { CA_DATA, kubeconfigYaml, recordingLogger, rejectionOf } from './fixtures.ts';

function deps(overrides: Partial<ClusterAccessDeps> = {}): ClusterAccessDeps {
  return {
    routingTableDir: '/routes',
    env: { KC: kubeconfigYaml() },
    readFile: async () => kubeconfigYaml(),
    ssm: new SSMClient({ region: 'eu-west-1' }),
    secretsManager: new SecretsManagerClient({ region: 'eu-west-1' }),
    baseCredentials: async () => ({ accessKeyId: 'AKIA', secretAccessKey: 'secret' }),
    createEksClient: (region, credentials) => new EKSClient({ region, credentials }),
    createStsClient: (region) => new STSClient({ region }),
    clock: () => Date.parse('2026-01-01T00:00:00Z'),
    logger: recordingLogger(),
    ...overrides,
  };
}

describe('createClusterAccessResolver', () => {
  it('sends kubeconfig clusters to their kubeconfig source', async () => {
    const access = await createClusterAccessResolver(deps())('a', { kubeconfig: { env: 'KC' }, labels: {} });
    expect(access.server).toBe('https://api.main.example:6443');
    expect(access.refreshAfter).toBeUndefined();
  });

  it('sends EKS clusters to EKS', async () => {
    const eks = mockClient(EKSClient);
    eks
      .on(DescribeClusterCommand)
      .resolves({ cluster: { endpoint: 'https://eks.example', certificateAuthority: { data: CA_DATA } } });
    try {
      const access = await createClusterAccessResolver(deps())('b', {
        eks: { name: 'b', region: 'eu-west-1' },
        labels: {},
      });
      expect(access.server).toBe('https://eks.example');
      expect(access.refreshAfter).toBeTypeOf('number');
    } finally {
      eks.restore();
    }
  });

  it('refuses a cluster with neither', async () => {
    const error = await rejectionOf(createClusterAccessResolver(deps())('c', { labels: {} }));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toBe(
      'cluster c: has no kubeconfig, eks or inCluster: true; give exactly one in the routing table',
    );
  });
});

describe('defaultClusterAccessDeps', () => {
  it("builds real clients in the environment's region without calling AWS, and reads files from disk", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vault-rollout-'));
    await mkdir(join(dir, 'kubeconfigs'));
    await writeFile(join(dir, 'kubeconfigs', 'a.yaml'), kubeconfigYaml());
    const real = defaultClusterAccessDeps({
      routingTableDir: dir,
      env: { AWS_REGION: 'eu-central-1' },
      logger: recordingLogger(),
    });

    expect(await (real.ssm as SSMClient).config.region()).toBe('eu-central-1');
    expect(await (real.secretsManager as SecretsManagerClient).config.region()).toBe('eu-central-1');
    expect(await (real.createEksClient('us-east-1', real.baseCredentials) as EKSClient).config.region()).toBe(
      'us-east-1',
    );
    expect(await (real.createStsClient('ap-south-1') as STSClient).config.region()).toBe('ap-south-1');
    expect(real.clock()).toBeGreaterThan(0);
    const access = await createClusterAccessResolver(real)('a', {
      kubeconfig: { file: 'kubeconfigs/a.yaml' },
      labels: {},
    });
    expect(access.server).toBe('https://api.main.example:6443');
  });
});
