/**
 * How vault-rollout reaches one cluster: a KubeConfig for @kubernetes/client-node built from the routing table's
 * credential source (kubeconfig from file/env/inline/SSM/Secrets Manager, or EKS with an in-process token),
 * and when it must be built again (EKS tokens expire).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { ClusterConfig } from '../routing/schema.ts';

export interface ClusterAccess {
  /** A KubeConfig whose current context is the cluster to use; never logged or serialized. */
  kubeConfig: KubeConfig;
  /** API server URL (safe to log). */
  server: string;
  /** Epoch ms after which the credentials must be resolved again; undefined = they do not expire. */
  refreshAfter?: number;
  /** True when the cluster said insecureSkipTLSVerify: true. */
  insecureSkipTLSVerify: boolean;
}

/** Resolves one cluster's access. Errors name the cluster and the source, never its content. */
export type ClusterAccessResolver = (name: string, config: ClusterConfig) => Promise<ClusterAccess>;

export class ClusterAccessError extends Error {
  override readonly name = 'ClusterAccessError';
  readonly cluster: string;
  constructor(cluster: string, message: string, options?: { cause?: unknown }) {
    super(`cluster ${cluster}: ${message}`, options);
    this.cluster = cluster;
  }
}
