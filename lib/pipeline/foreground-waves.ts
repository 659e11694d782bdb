/**
 * Waves in the foreground: what `apply --wait` and `reset-version` run instead of restarting every target
 * at once. The same change sets, waves, gate decisions (`decideGate`) and rotation store as the queue's gates, so a
 * person rotating by hand gets the waves and the halt the table asks for, and a halt recorded by either path holds on
 * the other: a change of a halted rotation is refused here too, and a gate passed here releases the wave for the
 * queue's worker as well.
 */
import type { RolloutResult } from '../engine/types.ts';
import { executeRollouts, recordHalt, type ExecutorSettings } from './kube-executor.ts';
import type { Plan, RolloutTarget } from '../plan/planner.ts';
import { targetWave } from '../plan/target-waves.ts';
import { decideGate, type ChangeSet, type GateAction, type WaveTargetState } from '../plan/waves.ts';
import { changeIdentity, queuedChange, type QueuedChange } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { changeSets, secretIdentity } from '../plan/cluster-changes.ts';
import { deferredForWindow, waveWindowClosedUntil } from './foreground-window.ts';
import { haltedReason, haltOf } from './wave-guard.ts';
import { waveTargetState } from './worker.ts';
import { haltBreakerRefusals, restartBreakerOf, type RefusedIn } from './route-refusals.ts';
import {
  foregroundApprovedAt,
  requestInForeground,
  type AwaitingApproval,
  type ForegroundApproval,
} from './foreground-approval.ts';

export interface ForegroundDeps {
  table: RoutingTable;
  rotations: RotationStore;
  /** How to restart; its `follow` (required for a rotation with waves) bounds each wave's following. */
  executor: ExecutorSettings;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  log?: {
    info(message: string, fields?: Record<string, unknown>): void;
    warn(message: string, fields?: Record<string, unknown>): void;
  };
  /** How a rotation with waves follows its rollouts when `executor.follow` is not set (reset-version). */
  followWaves?: NonNullable<ExecutorSettings['follow']>;
  /** Only these targets (reset-version --cluster); the waves still run in order. */
  only?: (target: RolloutTarget) => boolean;
  /**
   * A gate with `approval` waits for `vault-rollout approve`: told once per wave (lib/pipeline/foreground-approval.ts).
   */
  onApprovalRequested?: ForegroundApproval['onApprovalRequested'];
}

export interface ForegroundOutcome {
  results: RolloutResult[];
  /** Rotations a wave's gate halted here. */
  halts: RotationHalt[];
  /** Rotations not started because a halt holds them. */
  refused: Array<{ rotation: string; reason: string }>;
  /** Rotations (from a wave on) deferred because their maintenance window is closed: when it opens. */
  windows?: Array<{ rotation: string; route: string; wave: number; opensAt: number }>;
  /** Rotations stopped at a wave nobody approved within the gate's timeout (not halted). */
  awaitingApproval: AwaitingApproval[];
}

/** Rotations of these changes with more than one wave: `apply --no-wait` refuses them rather than ignore the waves. */
export function wavedRotations(table: RoutingTable, changes: readonly SecretChange[], plan: Plan): ChangeSet[] {
  return changeSets(table, changes, plan).filter((s) => s.waves.length > 1);
}

/** How often a wave still rolling is looked at again (the foreground has no queue to hand it to). */
const RECHECK_MS = 2000;

export async function applyInForeground(
  changes: readonly SecretChange[],
  plan: Plan,
  deps: ForegroundDeps,
): Promise<ForegroundOutcome> {
  const outcome: ForegroundOutcome = { results: [], halts: [], refused: [], awaitingApproval: [] };
  const sets = changeSets(deps.table, changes, plan);
  await Promise.all(sets.map((set) => runRotation(set, changes, plan, deps, outcome)));
  return outcome;
}

/** One rotation being run in the foreground: what every wave of it needs. */
interface RotationRun {
  readonly set: ChangeSet;
  readonly deps: ForegroundDeps;
  readonly outcome: ForegroundOutcome;
  readonly queued: QueuedChange[];
  /** The plan's targets of this rotation's changes (and of `only`). */
  readonly targets: RolloutTarget[];
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  readonly baseFollow: ExecutorSettings['follow'];
  readonly changes: readonly SecretChange[];
  readonly plan: Plan;
}

async function runRotation(
  set: ChangeSet,
  changes: readonly SecretChange[],
  plan: Plan,
  deps: ForegroundDeps,
  outcome: ForegroundOutcome,
): Promise<void> {
  const queued = set.changes.map(queuedChange);
  const halt = await haltOf(deps.rotations, queued);
  if (halt) {
    outcome.refused.push({ rotation: set.key, reason: haltedReason(halt) });
    return;
  }
  const inSet = new Set(set.changes.map((c) => secretIdentity({ ...c, path: qualify(c.namespace, c.path) })));
  const targets = plan.targets.filter(
    (t) => t.secrets.some((s) => inSet.has(secretIdentity(s))) && (deps.only?.(t) ?? true),
  );
  if (await deferredByWindow(set, 0, targets, deps, outcome)) return;
  if (set.waves.length <= 1) {
    await restartAndRecord(deps, { changes, plan, targets }, deps.executor, outcome);
    return;
  }
  const baseFollow = deps.executor.follow ?? deps.followWaves;
  if (!baseFollow && !deps.executor.dryRun)
    throw new Error('a rotation with waves runs in the foreground only while following its rollouts (--wait)');
  const run: RotationRun = {
    set,
    deps,
    outcome,
    queued,
    targets,
    now: deps.now ?? Date.now,
    sleep: deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms))),
    baseFollow,
    changes,
    plan,
  };
  for (const index of set.waves.keys()) {
    if (index > 0 && (await deferredByWindow(set, index, targets, deps, outcome))) return;
    if (!(await runWave(run, index))) return;
  }
}

/**
 * Restarts these targets through the engine, with the rotation store's breaker, and records the halt of a restart
 * the breaker refused (lib/pipeline/route-refusals.ts) as the worker does. `halted`: the breaker halted the rotation.
 */
async function restartAndRecord(
  deps: ForegroundDeps,
  step: RefusedIn,
  executor: ExecutorSettings,
  outcome: ForegroundOutcome,
): Promise<{ results: RolloutResult[]; halted: boolean }> {
  const breaker = restartBreakerOf(deps.rotations, deps.now ?? Date.now);
  const results = await executeRollouts(deps.table, step.targets, { ...executor, ...(breaker ? { breaker } : {}) });
  outcome.results.push(...results);
  const halts = await haltBreakerRefusals(deps, step, results);
  outcome.halts.push(...halts);
  return { results, halted: halts.length > 0 };
}

/** A closed window from this wave on: its targets and the later waves' reported deferred; true when so. */
async function deferredByWindow(
  set: ChangeSet,
  index: number,
  targets: RolloutTarget[],
  deps: ForegroundDeps,
  outcome: ForegroundOutcome,
): Promise<boolean> {
  if (deps.executor.dryRun) return false;
  const opensAt = waveWindowClosedUntil(set, index, (deps.now ?? Date.now)());
  if (opensAt === undefined) return false;
  const waiting = targets.filter((t) => targetWave(set.waves, t) >= index);
  outcome.results.push(...(await deferredForWindow(deps.table, waiting, deps.executor, opensAt)));
  (outcome.windows ??= []).push({ rotation: set.key, route: set.route, wave: index + 1, opensAt });
  return true;
}

/** Restarts one wave, then waits at its gate; false when the gate halted the rotation. */
async function runWave(run: RotationRun, index: number): Promise<boolean> {
  const { set, deps, baseFollow } = run;
  const waveTargets = run.targets.filter((t) => targetWave(set.waves, t) === index);
  const since = run.now();
  const follow = baseFollow
    ? { ...baseFollow, since, budgetMs: Math.min(baseFollow.budgetMs, set.policy.gate.timeoutMs + 5000) }
    : undefined;
  const step = { changes: run.changes, plan: run.plan, targets: waveTargets };
  const executor = { ...deps.executor, ...(follow ? { follow } : {}) };
  const { results, halted } = await restartAndRecord(deps, step, executor, run.outcome);
  if (halted) return false;
  if (deps.executor.dryRun || index === set.waves.length - 1) return true;
  const failed = await awaitGate(run, index, waveTargets, results, since);
  if (failed !== undefined && 'command' in failed) {
    run.outcome.awaitingApproval.push(failed);
    return false;
  }
  if (failed === undefined) {
    await deps.rotations.releaseWave(set.key, index + 1);
    return true;
  }
  if (failed.onFailure === 'continue') {
    deps.log?.warn('wave gate failed; continuing (onFailure: continue)', {
      rotation: set.key,
      wave: index + 1,
      why: failed.why,
    });
    await deps.rotations.releaseWave(set.key, index + 1);
    return true;
  }
  await haltRotation(run, index, waveTargets, failed);
  return false;
}

/**
 * Waits until the wave's gate decides: undefined when it advances, the failure when it fails, the request when the
 * next wave waited for an approval past the gate's timeout.
 */
async function awaitGate(
  run: RotationRun,
  index: number,
  waveTargets: RolloutTarget[],
  firstResults: RolloutResult[],
  since: number,
): Promise<Extract<GateAction, { action: 'fail' }> | AwaitingApproval | undefined> {
  const { set, deps } = run;
  let results = firstResults;
  let completeAt: number | undefined;
  const approval = { rotations: deps.rotations, now: run.now, onApprovalRequested: deps.onApprovalRequested };
  const reported = new Set<number>();
  for (;;) {
    const approvedAt = await foregroundApprovedAt(approval, set, index);
    const states: WaveTargetState[] = results.map((r) => ({
      cluster: r.cluster,
      namespace: r.namespace,
      kind: r.kind,
      name: r.name,
      state: waveTargetState(r),
      reason: r.rolloutReason ?? r.detail ?? r.reason,
    }));
    const decision = decideGate({
      states,
      now: run.now(),
      since,
      ...(completeAt === undefined ? {} : { completeAt }),
      ...(approvedAt === undefined ? {} : { approvedAt }),
      policy: set.policy,
      recheckMs: RECHECK_MS,
    });
    if (decision.action === 'advance') return undefined;
    if (decision.action === 'fail') return decision;
    if (decision.approval === true) {
      const stopped = await requestInForeground(approval, set, index, secretsOfSet(set), reported);
      if (stopped) return stopped;
      completeAt = decision.completeAt;
      await run.sleep(decision.delayMs);
    } else if (decision.completeAt !== undefined) {
      completeAt = decision.completeAt;
      await run.sleep(decision.delayMs);
    } else {
      // Still rolling when the follow ended (an apply --timeout shorter than the gate): look again, patching nothing.
      results = await executeRollouts(deps.table, waveTargets, {
        ...deps.executor,
        observeOnly: true,
        follow: { budgetMs: decision.delayMs, since },
      });
    }
  }
}

/** Records the halt of the rotation at this wave, and says so on the failing workload. */
async function haltRotation(
  run: RotationRun,
  index: number,
  waveTargets: RolloutTarget[],
  decision: Extract<GateAction, { action: 'fail' }>,
): Promise<void> {
  const { set, deps } = run;
  const halted: RotationHalt = {
    rotation: set.key,
    route: set.route,
    changes: run.queued.map(changeIdentity),
    secrets: secretsOfSet(set),
    wave: index + 1,
    waves: set.waves.length,
    failing: {
      cluster: decision.failing.cluster,
      namespace: decision.failing.namespace,
      kind: decision.failing.kind,
      name: decision.failing.name,
      state: decision.failing.state,
    },
    why: decision.why,
    notRestarted: [...new Set(set.waves.slice(index + 1).flatMap((w) => w.clusters))],
    haltedAt: new Date(run.now()).toISOString(),
  };
  await deps.rotations.halt(halted);
  run.outcome.halts.push(halted);
  const target = waveTargets.find(
    (t) => t.cluster === decision.failing.cluster && t.namespace === decision.failing.namespace,
  );
  if (target)
    await recordHalt(
      deps.table,
      target,
      decision.failing.name,
      deps.executor,
      `vault-rollout halted the rotation of ${halted.secrets.join(', ')} at wave ${halted.wave} of ${halted.waves}: ${decision.why}. Not restarted: ${halted.notRestarted.join(', ')}. Write a fixed version of the secret (it starts again from wave 1), or fix the cause and run vault-rollout halts clear ${set.key}.`,
    );
}

/** A rotation's changes as people read them: `secret/app/db version 2`. */
const secretsOfSet = (set: ChangeSet): string[] =>
  [
    ...new Set(
      set.changes.map((c) => (c.version === null ? `${c.path} (${c.operation})` : `${c.path} version ${c.version}`)),
    ),
  ].sort();
