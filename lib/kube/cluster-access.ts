/**
 * How vault-rollout reaches one cluster: a KubeConfig for @kubernetes/client-node built from the routing table's
 * credential source (kubeconfig from file/env/inline/SSM/Secrets Manager, or EKS with an in-process token),
 * and when it must be built again (EKS tokens expire).
 */
import type { ClusterConfig } from '../routing/schema.ts';

import type { ClusterAccess } from '../workloads/kube-port.ts';
export type { ClusterAccess } from '../workloads/kube-port.ts';

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
