/**
 * The ClusterAccessResolver of cluster-access.ts: dispatches each cluster to its credential source, kubeconfig or
 * EKS. Everything it touches (environment, files, AWS clients, clock, logger) comes in through deps, so tests and
 * the CLI pass their own; defaultClusterAccessDeps builds the real ones once at start-up.
 */
import { readFile } from 'node:fs/promises';
import { EKSClient } from '@aws-sdk/client-eks';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { ClusterAccessError } from '../cluster-access.ts';
import type { ClusterAccessResolver } from '../cluster-access.ts';
import { createEksAccessResolver } from './eks-cluster.ts';
import type { EksAccessDeps } from './eks-cluster.ts';
import { resolveInClusterAccess } from './in-cluster.ts';
import { resolveKubeconfigAccess } from './kubeconfig-source.ts';
import type { KubeconfigSourceDeps } from './kubeconfig-source.ts';
import type { WarningLogger } from './tls-policy.ts';

export type ClusterAccessDeps = KubeconfigSourceDeps & EksAccessDeps;

export function createClusterAccessResolver(deps: ClusterAccessDeps): ClusterAccessResolver {
  const resolveEks = createEksAccessResolver(deps);
  return async (name, config) => {
    if (config.eks !== undefined) return resolveEks(name, config);
    if (config.kubeconfig !== undefined) return resolveKubeconfigAccess(name, config, deps);
    if (config.inCluster === true) return resolveInClusterAccess(name, config, deps);
    throw new ClusterAccessError(
      name,
      'has no kubeconfig, eks or inCluster: true; give exactly one in the routing table',
    );
  };
}

export interface DefaultDepsOptions {
  routingTableDir: string;
  env: Readonly<Record<string, string | undefined>>;
  logger: WarningLogger;
  /** Where this process runs: no kubeconfig credential plugin runs in Lambda (default `local`). */
  runtime?: 'lambda' | 'local';
}

/** The real dependencies. AWS clients are created here, once; none of them calls AWS until a cluster needs it. */
export function defaultClusterAccessDeps(options: DefaultDepsOptions): ClusterAccessDeps {
  const region = options.env.AWS_REGION ?? options.env.AWS_DEFAULT_REGION;
  return {
    ...options,
    readFile: (path) => readFile(path, 'utf8'),
    ssm: new SSMClient({ region }),
    secretsManager: new SecretsManagerClient({ region }),
    baseCredentials: fromNodeProviderChain(),
    createEksClient: (clusterRegion, credentials) => new EKSClient({ region: clusterRegion, credentials }),
    createStsClient: (clusterRegion) => new STSClient({ region: clusterRegion }),
    clock: Date.now,
  };
}
