/**
 * Reconcile: the safety net behind the change feeds, level-triggered like a Kubernetes controller. Vault's own
 * metadata says which version of every routed path is current; the clusters say what each workload records and
 * when its pods started; what is behind goes through the same plan and queue as a change from the feed, so the
 * worker, its waves and gates restart it. Nothing here restarts anything itself.
 *
 *   routes --(LIST metadata, bounded)--> paths --(GET metadata)--> one SecretChange per path (its current version)
 *     --> planRollouts (the route's `operations` decide whether a deleted or destroyed version counts)
 *     --> per cluster: LIST each kind per namespace, the record of each workload, LIST pods where needed
 *     --> behind: queue the change for that cluster | already running it: record it without a restart
 *
 * "Already running it": every live pod of the workload started after the version was created (or the workload runs
 * no pod now). Such a workload is never restarted: its record gets the version on the object's metadata
 * (recordOnlyPatch), which the worker counts too, so the queued change finds it `unchanged`. The first reconcile
 * of a fleet whose pods started after the current versions therefore restarts nothing.
 *
 * KV v1 keeps no versions and no metadata: reconcile cannot see its changes and says so for each such route.
 */
import { planRollouts, type RolloutTarget } from '../plan/planner.ts';
import { changeIdentity, queuedChange } from '../queue/rollout-message.ts';
import { firstWaveMessages } from './intake.ts';
import { qualify } from '../sources/kv-mounts.ts';

import { DEFAULT_RECONCILE_LIMITS, type ReconcileDeps, type ReconcileReport } from './reconcile-model.ts';
import { readVault } from './reconcile-vault.ts';
import { reconcileCluster } from './reconcile-cluster.ts';

export * from './reconcile-model.ts';
export { currentChange } from './reconcile-vault.ts';
export { selects } from './reconcile-cluster.ts';

export async function reconcile(deps: ReconcileDeps): Promise<ReconcileReport> {
  const limits = { ...DEFAULT_RECONCILE_LIMITS, ...deps.limits };
  const vault = await readVault(deps, limits);
  const plan = planRollouts(deps.table, vault.changes);
  const byCluster = new Map<string, RolloutTarget[]>();
  for (const t of plan.targets) byCluster.set(t.cluster, [...(byCluster.get(t.cluster) ?? []), t]);
  const verdicts = (
    await Promise.all(
      [...byCluster].map(([cluster, targets]) =>
        reconcileCluster(deps, limits, cluster, targets).then((v) => v.map((x) => ({ cluster, ...x }))),
      ),
    )
  ).flat();

  // The changes some workload is behind on, less those of a halted rotation, go through the same wave logic as the
  // intake (firstWaveMessages): per rotation, its first wave's clusters where something is behind, and the gate that
  // releases the next wave once the first is healthy. Later waves are never queued here. The worker plans them again
  // and restarts what is behind; what reconcile recorded it finds unchanged.
  const acceptedAt = new Date(deps.now()).toISOString();
  const behindIn = new Map<string, Set<string>>();
  for (const v of verdicts)
    for (const path of v.behind) behindIn.set(path, (behindIn.get(path) ?? new Set()).add(v.cluster));
  const behindChanges = vault.changes.filter((c) => behindIn.has(qualify(c.namespace, c.path)));
  const halts =
    deps.rotations && behindChanges.length > 0
      ? await deps.rotations.haltsOf(behindChanges.map((c) => changeIdentity(queuedChange(c))))
      : [];
  const haltedIds = new Set(halts.flatMap((h) => h.changes));
  const queued = behindChanges.filter((c) => !haltedIds.has(changeIdentity(queuedChange(c))));
  const messages = firstWaveMessages(
    deps.table,
    queued,
    planRollouts(deps.table, queued),
    acceptedAt,
    (cluster, changes) => changes.some((c) => behindIn.get(qualify(c.namespace, c.path))?.has(cluster) === true),
  );
  const changes = queued.length;
  if (!deps.dryRun && messages.length > 0) await deps.queue.send(messages);
  return {
    routes: vault.routes,
    paths: vault.paths,
    pathErrors: vault.pathErrors,
    plan,
    workloads: verdicts
      .map((v) => v.report)
      .sort((a, b) =>
        `${a.cluster}/${a.namespace}/${a.kind}/${a.name}`.localeCompare(
          `${b.cluster}/${b.namespace}/${b.kind}/${b.name}`,
        ),
      ),
    queued: { messages: deps.dryRun ? 0 : messages.length, changes: deps.dryRun ? 0 : changes },
    halted: halts,
    dryRun: deps.dryRun === true,
  };
}
