/**
 * One ClusterAccess per cluster, kept between invocations: hold one ClusterClients at module scope (a Lambda
 * container's lifetime) and every invocation reuses its kubeconfigs and EKS tokens. Concurrent callers share one
 * resolution, an access is resolved again a minute before its refreshAfter, and a failure is never kept.
 */
import { createHash } from 'node:crypto';
import type { ClusterConfig } from '../routing/schema.ts';
import type { ClusterAccess, ClusterAccessResolver } from './cluster-access.ts';
import { RefreshingCache } from '../kernel/refreshing-cache.ts';
import type { Clock } from '../kernel/refreshing-cache.ts';

export class ClusterClients {
  readonly #resolver: ClusterAccessResolver;
  readonly #cache: RefreshingCache<ClusterAccess>;

  constructor(resolver: ClusterAccessResolver, clock: Clock = Date.now) {
    this.#resolver = resolver;
    this.#cache = new RefreshingCache<ClusterAccess>({ clock, refreshAfterOf: (access) => access.refreshAfter });
  }

  /** The cluster's access; resolved again when its routing-table entry changes. */
  get(name: string, config: ClusterConfig): Promise<ClusterAccess> {
    return this.#cache.get(name, accessConfigFingerprint(config), async () => ({
      ...(await this.#resolver(name, config)),
      cluster: name,
    }));
  }

  /** Forget a cluster's access, e.g. after the API server answered 401: the next get resolves it again. */
  invalidate(name: string): void {
    this.#cache.delete(name);
  }
}

/**
 * A digest of what decides a cluster's access: where its credentials come from, never the credentials themselves
 * (an SSM parameter's new value is picked up by invalidate, not by fingerprinting it). Labels and concurrency are
 * left out because they do not change how the cluster is reached.
 */
export function accessConfigFingerprint(config: ClusterConfig): string {
  const { kubeconfig, context, eks, inCluster, insecureSkipTLSVerify } = config;
  return createHash('sha256')
    .update(
      canonicalJson({ kubeconfig, context, eks, inCluster, insecureSkipTLSVerify: insecureSkipTLSVerify === true }),
    )
    .digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
