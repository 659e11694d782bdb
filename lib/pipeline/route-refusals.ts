/**
 * What the worker and `apply` do with the targets the engine refused to patch for a route's sake: a restart the
 * breaker (`rollout.breaker`) refused halts its rotation through the halt machinery every path checks (the rotation
 * store's halt, the `RotationHalt` Event, the `halted` notification), so `halts list` shows it and `halts clear`
 * resets the breaker; a notify-only route's targets go to its sinks as `would-restart` (rotation-notices.ts).
 */
import { BREAKER_REASON, type RolloutResult } from '../engine/types.ts';
import { METRICS } from '../kernel/telemetry.ts';
import { changeSets } from '../plan/cluster-changes.ts';
import type { Plan, RolloutTarget } from '../plan/planner.ts';
import { BREAKER_STATE, breakerKey, type RestartBreakerPort } from '../plan/restart-breaker.ts';
import type { ChangeSet } from '../plan/waves.ts';
import { changeIdentity, queuedChange } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { recordHalt, type ExecutorSettings } from './kube-executor.ts';
import { noticeHalt } from './rotation-notices.ts';
import type { WorkerDeps } from './worker-deps.ts';

/** The engine's breaker, bound to a rotation store that keeps one (every store here does); its clock is `now`. */
export function restartBreakerOf(store: RotationStore, now: () => number): RestartBreakerPort | undefined {
  const admit = store.admitRestart?.bind(store);
  if (!admit) return undefined;
  return (workload, token, limit) => admit(breakerKey(workload), token, now(), limit);
}

export interface RefusalDeps {
  table: RoutingTable;
  rotations: RotationStore;
  executor: ExecutorSettings;
  now?: () => number;
  /** The worker's: the outbox the `halted` notification goes to, and its log. `apply` has neither. */
  telemetry?: WorkerDeps['telemetry'];
  notifications?: WorkerDeps['notifications'];
}

/** The changes, plan and targets of the step whose results these are. */
export interface RefusedIn {
  changes: readonly SecretChange[];
  plan: Plan;
  targets: readonly RolloutTarget[];
}

const secretOf = (c: SecretChange) =>
  c.version === null ? `${c.path} (${c.operation})` : `${c.path} version ${c.version}`;

/**
 * One halt per rotation a breaker refused a restart of: recorded before anything else (from then on every path
 * refuses its changes), then the Event on the workload and the notification. Returns the halts recorded.
 */
export async function haltBreakerRefusals(
  deps: RefusalDeps,
  step: RefusedIn,
  results: readonly RolloutResult[],
): Promise<RotationHalt[]> {
  const refused = results.filter((r) => r.outcome === 'skipped' && r.reason === BREAKER_REASON);
  if (refused.length === 0) return [];
  const sets = changeSets(deps.table, step.changes, step.plan);
  const halts = new Map<string, RotationHalt>();
  for (const r of refused) {
    const set = sets.find((s) => r.routes.includes(s.route)) ?? sets[0];
    if (!set || halts.has(set.key)) continue;
    const halt = breakerHalt(set, r, (deps.now ?? Date.now)());
    await deps.rotations.halt(halt);
    halts.set(set.key, halt);
    deps.telemetry?.error('rotation halted', {
      rotation: set.key,
      route: set.route,
      failing: halt.failing,
      why: halt.why,
      notRestarted: halt.notRestarted,
    });
    // The same metric as a gate's halt: the alarm (serverless.yml HaltedRotationsAlarm) watches it.
    deps.telemetry?.metric(METRICS.haltedRotations, 1, 'Count');
    await noticeHalt(
      { table: deps.table, telemetry: deps.telemetry as WorkerDeps['telemetry'], notifications: deps.notifications },
      set,
      { ...halt, failing: { ...halt.failing, state: 'failed' } },
    );
    const target = step.targets.find((t) => t.restartToken === r.restartToken && t.cluster === r.cluster);
    if (target)
      await recordHalt(
        deps.table,
        target,
        r.name,
        deps.executor,
        `vault-rollout halted the rotation of ${halt.secrets.join(', ')}: ${halt.why}. Clear it with vault-rollout halts clear ${set.key} (this resets the breaker), or wait for the window to pass and write a new version.`,
      );
  }
  return [...halts.values()];
}

/** The halt of a rotation whose restart of `r` the breaker refused, at the wave of its cluster. */
function breakerHalt(set: ChangeSet, r: RolloutResult, now: number): RotationHalt {
  const wave = Math.max(
    0,
    set.waves.findIndex((w) => w.clusters.includes(r.cluster)),
  );
  return {
    rotation: set.key,
    route: set.route,
    changes: set.changes.map((c) => changeIdentity(queuedChange(c))),
    secrets: [...new Set(set.changes.map(secretOf))].sort(),
    wave: wave + 1,
    waves: Math.max(1, set.waves.length),
    failing: { cluster: r.cluster, namespace: r.namespace, kind: r.kind, name: r.name, state: BREAKER_STATE },
    why: `${r.kind} ${r.namespace}/${r.name} in cluster ${r.cluster}: ${r.detail ?? BREAKER_REASON}`,
    notRestarted: set.waves.slice(wave + 1).flatMap((w) => w.clusters),
    haltedAt: new Date(now).toISOString(),
  };
}
