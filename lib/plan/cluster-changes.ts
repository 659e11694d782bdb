/**
 * Which changes reach which cluster, and the change sets (with their waves) they form: what the intake queues, the
 * worker and the gate plan again, and reconcile and `plan` show. Pure.
 */
import type { RoutingTable } from '../routing/routing-table.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { Plan, RolloutTarget, SecretRef } from './planner.ts';
import { planChangeSets, type ChangeSet } from './waves.ts';

/** The change sets of a batch and their waves (lib/plan/waves.ts), from the clusters the plan puts each change in. */
export function changeSets(
  table: RoutingTable,
  changes: readonly SecretChange[],
  plan: Plan,
  byCluster = changesByCluster(changes, plan),
): ChangeSet[] {
  const clustersOf = new Map<SecretChange, string[]>();
  for (const [cluster, cs] of byCluster) for (const c of cs) clustersOf.set(c, [...(clustersOf.get(c) ?? []), cluster]);
  const membersOf = table.routes.some((r) => r.policy.waveTargets !== undefined) ? targetsByChange(plan) : undefined;
  return planChangeSets(
    table,
    changes,
    plan,
    (c) => clustersOf.get(c) ?? [],
    membersOf && ((c) => membersOf.get(secretIdentity({ ...c, path: qualify(c.namespace, c.path) })) ?? []),
  );
}

/** The plan's targets per change (by secretIdentity): what waves that select targets place. */
function targetsByChange(plan: Pick<Plan, 'targets'>): Map<string, RolloutTarget[]> {
  const byChange = new Map<string, RolloutTarget[]>();
  for (const target of plan.targets)
    for (const secret of target.secrets) {
      const key = secretIdentity(secret);
      const list = byChange.get(key);
      if (list) list.push(target);
      else byChange.set(key, [target]);
    }
  return byChange;
}

/**
 * One change as a target's secrets name it (its path qualified by its Vault namespace): what ties targets to changes.
 */
export const secretIdentity = (s: Pick<SecretRef, 'path' | 'operation' | 'version' | 'id' | 'time'>): string =>
  `${s.path}\u0000${s.operation}\u0000${s.version}\u0000${s.id}\u0000${s.time}`;

/**
 * Per cluster, in input order, the changes that plan a target there: exactly what the worker, planning them
 * again with the same table, restarts in that cluster. A change whose route renders nothing valid (a problem of
 * the plan) is not queued: the worker would refuse it.
 */
export function changesByCluster(
  changes: readonly SecretChange[],
  plan: Pick<Plan, 'targets'>,
): Map<string, SecretChange[]> {
  const identity = secretIdentity;
  const clustersOf = new Map<string, Set<string>>();
  for (const target of plan.targets) {
    for (const secret of target.secrets) {
      const key = identity(secret);
      const clusters = clustersOf.get(key);
      if (clusters) clusters.add(target.cluster);
      else clustersOf.set(key, new Set([target.cluster]));
    }
  }
  const byCluster = new Map<string, SecretChange[]>();
  for (const change of changes) {
    const clusters = clustersOf.get(identity({ ...change, path: qualify(change.namespace, change.path) })) ?? [];
    for (const cluster of [...clusters].sort()) {
      const list = byCluster.get(cluster);
      if (list) list.push(change);
      else byCluster.set(cluster, [change]);
    }
  }
  return byCluster;
}
