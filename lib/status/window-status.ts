/**
 * Maintenance windows in `status` and serve's status page: a consumer behind on a path whose restart waits for a
 * closed window (`rollout.window`, its wave's `window`) says so, and when the window opens, before its other detail.
 * It stays behind (not safe to revoke): the wait is the table's, not a restart.
 */
import { changeSets } from '../plan/cluster-changes.ts';
import type { Plan } from '../plan/planner.ts';
import { clusterWindows, waitsForWindow, windowState } from '../plan/restart-window.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { ConsumerStatus } from './model.ts';

export function withWindowWaits(
  consumers: readonly ConsumerStatus[],
  table: RoutingTable,
  changes: readonly SecretChange[],
  plan: Plan,
  now: number,
): ConsumerStatus[] {
  if (!table.routes.some((r) => r.policy.window !== undefined || r.policy.waveWindows !== undefined))
    return [...consumers];
  const sets = changeSets(table, changes, plan);
  const byCluster = new Map<string, string | undefined>();
  const waitOf = (cluster: string): string | undefined => {
    if (!byCluster.has(cluster)) {
      const state = windowState(clusterWindows(sets, cluster), now);
      byCluster.set(cluster, state.open ? undefined : waitsForWindow(state.opensAt));
    }
    return byCluster.get(cluster);
  };
  return consumers.map((c) => {
    const wait = c.routed && c.state === 'behind' ? waitOf(c.cluster) : undefined;
    return wait === undefined ? c : { ...c, detail: `${wait}: ${c.detail}` };
  });
}
