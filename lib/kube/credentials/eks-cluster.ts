/**
 * A cluster's access from EKS: DescribeCluster gives the endpoint and CA, an in-process token authenticates, and an
 * optional per-cluster role (sts:AssumeRole, session `vault-rollout`) reaches clusters in other accounts. The assumed
 * credentials sign both DescribeCluster and the token, so the cluster's access entry names that role.
 */
import { AssumeRoleCommand } from '@aws-sdk/client-sts';
import type { STSClient } from '@aws-sdk/client-sts';
import { DescribeClusterCommand } from '@aws-sdk/client-eks';
import type { EKSClient } from '@aws-sdk/client-eks';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterConfig } from '../../routing/schema.ts';
import { ClusterAccessError } from '../cluster-access.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { awsErrorName } from '../../aws/aws-error-name.ts';
import { EksTokenCache, TOKEN_LIFETIME_MS } from '../../aws/eks-token.ts';
import type { AwsCredentials, AwsCredentialsProvider } from '../../aws/credentials.ts';
import { RefreshingCache } from '../../kernel/refreshing-cache.ts';
import type { Clock } from '../../kernel/refreshing-cache.ts';
import { skipTLSVerifyFor } from './tls-policy.ts';
import type { WarningLogger } from './tls-policy.ts';

export const ROLE_SESSION_NAME = 'vault-rollout';
const TOKEN_USER = 'vault-rollout';

type EksConfig = NonNullable<ClusterConfig['eks']>;

export interface EksAccessDeps {
  /** The function's own credentials (the default provider chain in Lambda). */
  baseCredentials: AwsCredentialsProvider;
  /** An EKS client for a region signing with the given credentials; called once per (region, role). */
  createEksClient: (region: string, credentials: AwsCredentialsProvider) => Pick<EKSClient, 'send'>;
  /** An STS client for a region with the base credentials; called once per region. */
  createStsClient: (region: string) => Pick<STSClient, 'send'>;
  clock: Clock;
  logger: WarningLogger;
}

interface ClusterEndpoint {
  server: string;
  caData: string;
}

/** Returns the resolver for clusters whose routing-table entry has `eks`; its clients and caches live with it. */
export function createEksAccessResolver(
  deps: EksAccessDeps,
): (name: string, config: ClusterConfig) => Promise<ClusterAccess> {
  const credentialsFor = createCredentialsSource(deps);
  const eksClients = new Map<string, Pick<EKSClient, 'send'>>();
  const eksClientFor = (eks: EksConfig): Pick<EKSClient, 'send'> =>
    reuse(eksClients, clientKey(eks), () => deps.createEksClient(eks.region, credentialsFor(eks)));
  const tokens = new EksTokenCache(deps.clock);

  return async (name, config) => {
    const eks = config.eks;
    if (eks === undefined) throw new ClusterAccessError(name, 'has no eks settings');
    const credentials = await loadCredentials(name, eks, credentialsFor(eks));
    const endpoint = await describeCluster(name, eks, eksClientFor(eks));
    const token = await tokens.get(
      { clusterName: eks.name, region: eks.region, roleArn: eks.roleArn },
      async () => credentials,
    );
    const skipTLSVerify = skipTLSVerifyFor(name, config, deps.logger);
    return {
      kubeConfig: tokenKubeConfig(name, endpoint, token.token, skipTLSVerify),
      server: endpoint.server,
      refreshAfter: token.refreshAfter,
      insecureSkipTLSVerify: skipTLSVerify,
    };
  };
}

/** The credentials per (region, role): the base ones, or assumed ones reused while they outlive a token. */
function createCredentialsSource(deps: EksAccessDeps): (eks: EksConfig) => AwsCredentialsProvider {
  const stsClients = new Map<string, Pick<STSClient, 'send'>>();
  const assumed = new RefreshingCache<AwsCredentials>({
    clock: deps.clock,
    refreshAfterOf: (credentials) => credentials.expiration?.getTime(),
    // Assume again while the session can still outlive a whole token, so no token dies with its session.
    marginMs: TOKEN_LIFETIME_MS,
  });
  return (eks) => {
    const roleArn = eks.roleArn;
    if (roleArn === undefined) return deps.baseCredentials;
    const sts = (): Pick<STSClient, 'send'> => reuse(stsClients, eks.region, () => deps.createStsClient(eks.region));
    return () => assumed.get(clientKey(eks), '', () => assumeRole(sts(), roleArn));
  };
}

async function assumeRole(sts: Pick<STSClient, 'send'>, roleArn: string): Promise<AwsCredentials> {
  const response = await sts.send(new AssumeRoleCommand({ RoleArn: roleArn, RoleSessionName: ROLE_SESSION_NAME }));
  const c = response.Credentials;
  if (c?.AccessKeyId === undefined || c.SecretAccessKey === undefined || c.SessionToken === undefined) {
    throw new Error('AssumeRole returned no credentials');
  }
  return {
    accessKeyId: c.AccessKeyId,
    secretAccessKey: c.SecretAccessKey,
    sessionToken: c.SessionToken,
    expiration: c.Expiration,
  };
}

async function loadCredentials(
  name: string,
  eks: EksConfig,
  provider: AwsCredentialsProvider,
): Promise<AwsCredentials> {
  try {
    return await provider();
  } catch (error) {
    const fix =
      eks.roleArn === undefined
        ? 'give the function AWS credentials (an execution role, or AWS_* variables locally)'
        : `allow sts:AssumeRole on ${eks.roleArn} for the function's role, and trust it in the role's trust policy`;
    const what = eks.roleArn === undefined ? 'no AWS credentials' : `cannot assume role ${eks.roleArn}`;
    throw new ClusterAccessError(name, `eks ${eks.name} (${eks.region}): ${what} (${awsErrorName(error)}); ${fix}`, {
      cause: error,
    });
  }
}

async function describeCluster(
  name: string,
  eks: EksConfig,
  client: Pick<EKSClient, 'send'>,
): Promise<ClusterEndpoint> {
  const where = `eks ${eks.name} (${eks.region})`;
  let response;
  try {
    response = await client.send(new DescribeClusterCommand({ name: eks.name }));
  } catch (error) {
    const fix =
      awsErrorName(error) === 'ResourceNotFoundException'
        ? 'check eks.name and eks.region'
        : `allow eks:DescribeCluster on the cluster for ${eks.roleArn ?? "the function's role"}`;
    throw new ClusterAccessError(name, `${where}: DescribeCluster failed (${awsErrorName(error)}); ${fix}`, {
      cause: error,
    });
  }
  const server = response.cluster?.endpoint;
  const caData = response.cluster?.certificateAuthority?.data;
  if (server === undefined || caData === undefined) {
    const status = response.cluster?.status ?? 'unknown';
    throw new ClusterAccessError(
      name,
      `${where}: the cluster has no endpoint or CA yet (status ${status}); wait until it is ACTIVE`,
    );
  }
  return { server, caData };
}

function tokenKubeConfig(name: string, endpoint: ClusterEndpoint, token: string, skipTLSVerify: boolean): KubeConfig {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name, server: endpoint.server, caData: endpoint.caData, skipTLSVerify }],
    users: [{ name: TOKEN_USER, token }],
    contexts: [{ name, cluster: name, user: TOKEN_USER }],
    currentContext: name,
  });
  return kubeConfig;
}

function clientKey(eks: EksConfig): string {
  return JSON.stringify([eks.region, eks.roleArn ?? null]);
}

function reuse<T>(map: Map<string, T>, key: string, create: () => T): T {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}
