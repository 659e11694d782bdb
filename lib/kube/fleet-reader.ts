/**
 * Reads what `status` needs from every cluster: one LIST per kind and namespace (served from the API server's watch
 * cache), clusters in parallel, a bounded number at once and a bounded number of LISTs per cluster. A cluster that
 * cannot be reached is a result, never an exception: the others are still read.
 */
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import { listKey, type ClusterListing, type ListRequest } from '../status/fleet-status.ts';
import type { ClusterAccess } from './cluster-access.ts';
import { kubeApiFor } from './kube-api.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';

export interface FleetReadOptions {
  access(name: string, config: ClusterConfig): Promise<ClusterAccess>;
  /** Clusters read at once (default 32). */
  clusterConcurrency?: number;
  /** LISTs in flight per cluster (default 4). */
  listConcurrency?: number;
  /** Per request (default 10 s). */
  timeoutMs?: number;
}

export interface FleetReadStats {
  lists: number;
  objects: number;
}

export async function readFleet(
  table: RoutingTable,
  requests: ReadonlyMap<string, readonly ListRequest[]>,
  options: FleetReadOptions,
  stats: FleetReadStats = { lists: 0, objects: 0 },
): Promise<ClusterListing[]> {
  const clusters = [...requests.keys()];
  const out: ClusterListing[] = [];
  const limiter = new ConcurrencyLimiter(options.clusterConcurrency ?? 32);
  await Promise.all(
    clusters.map((cluster) =>
      limiter.run(async () => {
        const listing: ClusterListing = { cluster, lists: new Map() };
        out.push(listing);
        const config = table.clusters.get(cluster);
        if (!config) {
          listing.error = 'not in the routing table';
          return;
        }
        let access: ClusterAccess;
        try {
          access = await options.access(cluster, config);
        } catch (e) {
          listing.error = e instanceof Error ? e.message : String(e);
          return;
        }
        const api = kubeApiFor(access, options.timeoutMs ?? 10_000);
        const perCluster = new ConcurrencyLimiter(options.listConcurrency ?? 4);
        await Promise.all(
          (requests.get(cluster) ?? []).map((request) =>
            perCluster.run(async () => {
              let answer: KubeObject[] | { error: string };
              try {
                stats.lists++;
                answer = await api.list(
                  { apiVersion: request.apiVersion, kind: request.kind },
                  request.namespace,
                  request.labelSelector,
                );
                stats.objects += answer.length;
              } catch (e) {
                const failure = classifyKubeError(e);
                answer = {
                  error: `LIST ${request.kind}${request.namespace ? ` in ${request.namespace}` : ' in every namespace'}: ${failure.reason}${failure.detail ? ` (${failure.detail.slice(0, 200)})` : ''}`,
                };
              }
              listing.lists.set(listKey(request), answer);
            }),
          ),
        );
      }),
    ),
  );
  return out.sort((a, b) => (a.cluster < b.cluster ? -1 : 1));
}
