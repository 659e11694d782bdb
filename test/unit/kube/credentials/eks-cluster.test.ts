import { DescribeClusterCommand, EKSClient } from '@aws-sdk/client-eks';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { createEksAccessResolver } from '../../../../lib/kube/credentials/eks-cluster.ts';
import type { EksAccessDeps } from '../../../../lib/kube/credentials/eks-cluster.ts';
import type { AwsCredentials, AwsCredentialsProvider } from '../../../../lib/aws/eks-token.ts';
import type { ClusterConfig } from '../../../../lib/routing/schema.ts';
import { awsError, CA_DATA, planted, recordingLogger, rejectionOf } from './fixtures.ts';
import type { RecordingLogger } from './fixtures.ts';
import { decodeEksToken, recomputePresignedSignature } from '../../aws/sigv4-reference.ts';

const eksMock = mockClient(EKSClient);
const stsMock = mockClient(STSClient);

const START = Date.parse('2026-03-01T08:00:00Z');
const ROLE = 'arn:aws:iam::111122223333:role/vault-rollout';
const base: AwsCredentials = { accessKeyId: 'AKIABASE', secretAccessKey: planted.secretAccessKey };
const assumed = {
  AccessKeyId: 'ASIAASSUMED',
  SecretAccessKey: planted.assumedSecretAccessKey,
  SessionToken: planted.sessionToken,
  Expiration: new Date(START + 3600_000),
};
const ENDPOINT = 'https://ABCDEF0123.gr7.eu-west-1.eks.amazonaws.com';

interface Harness {
  deps: EksAccessDeps & { logger: RecordingLogger };
  now: { value: number };
  eksClients: { region: string; credentials: AwsCredentialsProvider }[];
  stsRegions: string[];
  baseLoads: { count: number };
}

function harness(): Harness {
  const now = { value: START };
  const eksClients: Harness['eksClients'] = [];
  const stsRegions: string[] = [];
  const baseLoads = { count: 0 };
  return {
    now,
    eksClients,
    stsRegions,
    baseLoads,
    deps: {
      baseCredentials: async () => {
        baseLoads.count += 1;
        return base;
      },
      createEksClient: (region, credentials) => {
        eksClients.push({ region, credentials });
        return new EKSClient({ region, credentials });
      },
      createStsClient: (region) => {
        stsRegions.push(region);
        return new STSClient({ region });
      },
      clock: () => now.value,
      logger: recordingLogger(),
    },
  };
}

const eksCluster = (eks: NonNullable<ClusterConfig['eks']>, extra: Partial<ClusterConfig> = {}): ClusterConfig => ({
  eks,
  labels: {},
  ...extra,
});

beforeEach(() => {
  eksMock.reset();
  stsMock.reset();
  eksMock.on(DescribeClusterCommand).resolves({
    cluster: { name: 'prod-eu', endpoint: ENDPOINT, certificateAuthority: { data: CA_DATA }, status: 'ACTIVE' },
  });
  stsMock.on(AssumeRoleCommand).resolves({ Credentials: assumed });
});

describe('EKS access', () => {
  it('describes the cluster in its region and builds a token KubeConfig with the endpoint and CA', async () => {
    const h = harness();
    const access = await createEksAccessResolver(h.deps)('prod', eksCluster({ name: 'prod-eu', region: 'eu-west-1' }));

    expect(eksMock.commandCalls(DescribeClusterCommand).map((call) => call.args[0].input)).toEqual([
      { name: 'prod-eu' },
    ]);
    expect(h.eksClients.map((c) => c.region)).toEqual(['eu-west-1']);
    expect(h.stsRegions).toEqual([]);
    expect(stsMock.commandCalls(AssumeRoleCommand)).toHaveLength(0);
    expect(access.server).toBe(ENDPOINT);
    expect(access.insecureSkipTLSVerify).toBe(false);
    const kc = access.kubeConfig;
    expect(kc.getCurrentCluster()).toEqual({ name: 'prod', server: ENDPOINT, caData: CA_DATA, skipTLSVerify: false });
    const token = kc.getCurrentUser()?.token ?? '';
    expect(token.startsWith('k8s-aws-v1.')).toBe(true);
    const url = decodeEksToken(token);
    expect(url.host).toBe('sts.eu-west-1.amazonaws.com');
    expect(url.searchParams.get('X-Amz-Credential')).toBe('AKIABASE/20260301/eu-west-1/sts/aws4_request');
    expect(url.searchParams.get('X-Amz-Security-Token')).toBeNull();
    expect(access.refreshAfter).toBe(START + 14 * 60_000);
  });

  it("signs the token for the EKS cluster name, not the routing table's name", async () => {
    const access = await createEksAccessResolver(harness().deps)(
      'prod',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1' }),
    );
    const url = decodeEksToken(access.kubeConfig.getCurrentUser()?.token ?? '');
    const signature = recomputePresignedSignature(
      url,
      { host: url.host, 'x-k8s-aws-id': 'prod-eu' },
      planted.secretAccessKey,
    ).signature;
    expect(url.searchParams.get('X-Amz-Signature')).toBe(signature);
  });

  it("assumes the cluster's role in its region, and the assumed credentials sign DescribeCluster and the token", async () => {
    const h = harness();
    const access = await createEksAccessResolver(h.deps)(
      'prod',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE }),
    );

    expect(stsMock.commandCalls(AssumeRoleCommand).map((call) => call.args[0].input)).toEqual([
      { RoleArn: ROLE, RoleSessionName: 'vault-rollout' },
    ]);
    expect(h.stsRegions).toEqual(['eu-west-1']);
    const [eksClient] = h.eksClients;
    expect(eksClient?.region).toBe('eu-west-1');
    expect(await eksClient?.credentials()).toMatchObject({
      accessKeyId: 'ASIAASSUMED',
      sessionToken: planted.sessionToken,
    });
    const url = decodeEksToken(access.kubeConfig.getCurrentUser()?.token ?? '');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^ASIAASSUMED\//);
    expect(url.searchParams.get('X-Amz-Security-Token')).toBe(planted.sessionToken);
    const signature = recomputePresignedSignature(
      url,
      { host: url.host, 'x-k8s-aws-id': 'prod-eu' },
      planted.assumedSecretAccessKey,
    ).signature;
    expect(url.searchParams.get('X-Amz-Signature')).toBe(signature);
    expect(stsMock.commandCalls(AssumeRoleCommand)).toHaveLength(1); // the EKS client reused the assumed credentials
  });

  it('reuses clients per (region, role), the token for 13 minutes and the role for as long as it outlives a token', async () => {
    const h = harness();
    const resolve = createEksAccessResolver(h.deps);
    const config = eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE });

    const first = await resolve('prod', config);
    h.now.value += 12 * 60_000;
    const second = await resolve('prod', config);
    expect(second.kubeConfig.getCurrentUser()?.token).toBe(first.kubeConfig.getCurrentUser()?.token);
    h.now.value = START + 13 * 60_000;
    const third = await resolve('prod', config);
    expect(third.kubeConfig.getCurrentUser()?.token).not.toBe(first.kubeConfig.getCurrentUser()?.token);
    expect(third.refreshAfter).toBe(START + 27 * 60_000);
    expect(stsMock.commandCalls(AssumeRoleCommand)).toHaveLength(1);
    h.now.value = START + 45 * 60_000; // the session has 15 minutes left: too short for a token, assume again
    await resolve('prod', config);
    expect(stsMock.commandCalls(AssumeRoleCommand)).toHaveLength(2);
    await resolve('prod-us', eksCluster({ name: 'prod-us', region: 'us-east-1', roleArn: ROLE }));
    expect(h.eksClients.map((c) => c.region)).toEqual(['eu-west-1', 'us-east-1']);
    expect(h.stsRegions).toEqual(['eu-west-1', 'us-east-1']);
  });

  it('honours insecureSkipTLSVerify with one warning naming the cluster', async () => {
    const h = harness();
    const access = await createEksAccessResolver(h.deps)(
      'lab',
      eksCluster({ name: 'lab', region: 'eu-west-1' }, { insecureSkipTLSVerify: true }),
    );
    expect(access.kubeConfig.getCurrentCluster()?.skipTLSVerify).toBe(true);
    expect(h.deps.logger.lines).toEqual([
      JSON.stringify({
        message: 'cluster lab: TLS verification is disabled (insecureSkipTLSVerify: true in the routing table)',
        cluster: 'lab',
      }),
    ]);
  });
});

describe('EKS errors name the cluster, the step and the fix', () => {
  const cases: [string, ClusterConfig, RegExp, (h: Harness) => void][] = [
    [
      'no base credentials',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1' }),
      /^cluster prod: eks prod-eu \(eu-west-1\): no AWS credentials \(CredentialsProviderError\); give the function AWS credentials/,
      (h) =>
        void (h.deps.baseCredentials = async () =>
          Promise.reject(awsError('CredentialsProviderError', 'Could not load credentials from any providers'))),
    ],
    [
      'AssumeRole denied',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE }),
      new RegExp(
        `^cluster prod: eks prod-eu \\(eu-west-1\\): cannot assume role ${ROLE} \\(AccessDenied\\); allow sts:AssumeRole on ${ROLE}`,
      ),
      () =>
        void stsMock
          .on(AssumeRoleCommand)
          .rejects(
            awsError(
              'AccessDenied',
              `User: arn:aws:sts::1:assumed-role/fn is not authorized to perform: sts:AssumeRole on resource: ${ROLE}`,
            ),
          ),
    ],
    [
      'AssumeRole without credentials',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE }),
      /cannot assume role .* \(Error\)/,
      () => void stsMock.on(AssumeRoleCommand).resolves({}),
    ],
    [
      'cluster not found',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1' }),
      /^cluster prod: eks prod-eu \(eu-west-1\): DescribeCluster failed \(ResourceNotFoundException\); check eks.name and eks.region$/,
      () =>
        void eksMock
          .on(DescribeClusterCommand)
          .rejects(awsError('ResourceNotFoundException', 'No cluster found for name: prod-eu.')),
    ],
    [
      'DescribeCluster denied',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE }),
      new RegExp(
        `DescribeCluster failed \\(AccessDeniedException\\); allow eks:DescribeCluster on the cluster for ${ROLE}$`,
      ),
      () => void eksMock.on(DescribeClusterCommand).rejects(awsError('AccessDeniedException', 'not authorized')),
    ],
    [
      'cluster still creating',
      eksCluster({ name: 'prod-eu', region: 'eu-west-1' }),
      /the cluster has no endpoint or CA yet \(status CREATING\); wait until it is ACTIVE$/,
      () => void eksMock.on(DescribeClusterCommand).resolves({ cluster: { name: 'prod-eu', status: 'CREATING' } }),
    ],
  ];

  it.each(cases)('%s', async (_label, config, message, arrange) => {
    const h = harness();
    arrange(h);
    const error = await rejectionOf(createEksAccessResolver(h.deps)('prod', config));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toMatch(message);
  });

  it('carries the AWS error as the cause', async () => {
    const notFound = awsError('ResourceNotFoundException', 'No cluster found');
    eksMock.on(DescribeClusterCommand).rejects(notFound);
    const error = await rejectionOf(
      createEksAccessResolver(harness().deps)('prod', eksCluster({ name: 'x', region: 'eu-west-1' })),
    );
    expect(error.cause).toBe(notFound);
  });

  it('refuses a routing-table entry without eks', async () => {
    const error = await rejectionOf(createEksAccessResolver(harness().deps)('prod', { labels: {} }));
    expect(error.message).toBe('cluster prod: has no eks settings');
  });

  it('does not keep a failed AssumeRole: the next resolution assumes again', async () => {
    stsMock
      .on(AssumeRoleCommand)
      .rejectsOnce(awsError('Throttling', 'Rate exceeded'))
      .resolves({ Credentials: assumed });
    const resolve = createEksAccessResolver(harness().deps);
    const config = eksCluster({ name: 'prod-eu', region: 'eu-west-1', roleArn: ROLE });
    await rejectionOf(resolve('prod', config));
    await expect(resolve('prod', config)).resolves.toMatchObject({ server: ENDPOINT });
    expect(stsMock.commandCalls(AssumeRoleCommand)).toHaveLength(2);
  });
});
