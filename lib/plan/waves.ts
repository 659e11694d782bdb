/**
 * Progressive rotation, the pure half: which clusters a set of changes reaches in which wave, and what a
 * wave's gate does given the states read back from its clusters. No clock, no network: `now` is an argument, so
 * the intake, the worker and `plan` agree, and the rules are table-tested.
 */
import type { RolloutState } from '../workloads/rollout-health.ts';
import { changeSetHash, chunkChanges, queuedChange } from './change-sets.ts';
import type { RolloutPolicy, RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { Plan } from './planner.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';
import type { WaveMember, WaveTargets } from '../routing/wave-targets.ts';
import { orderTargetWaves } from './target-waves.ts';

export interface Wave {
  /** The wave's position among the waves that reach a cluster (0 = first); gates count in these. */
  index: number;
  /** The `rollout.waves` entry it comes from, or `rest` for clusters in no wave. */
  from: number | 'rest';
  clusters: string[];
  /** The entry's `targets` selector: only the targets of its clusters it selects are of this wave (targetWave). */
  targets?: WaveTargets;
}

/** Changes that travel together: one policy (the route that gave it), their waves in order. */
export interface ChangeSet {
  /** The route whose `rollout` block applies. */
  route: string;
  policy: RolloutPolicy;
  changes: SecretChange[];
  /** Non-empty waves, in order. One wave: everything at once (no gate). */
  waves: Wave[];
  /** The gate's group key (a hash of the changes). */
  key: string;
}

/**
 * The rollout block a change follows: that of the first route it matched, in table order, that sets `waves`; else
 * of the first route it matched (for `settle`). A change matching routes with different waves follows one of them.
 */
function policyRoute(
  table: Pick<RoutingTable, 'routes'>,
  matched: readonly string[],
): { name: string; policy: RolloutPolicy } | undefined {
  const routes = table.routes.filter((r) => matched.includes(r.name));
  const chosen = routes.find((r) => r.policy.waves !== undefined) ?? routes[0];
  return chosen && { name: chosen.name, policy: chosen.policy };
}

/**
 * The clusters reached, ordered into waves: each in its first wave; the clusters in none last; empty waves dropped.
 * When a wave selects targets, `members` (the planned targets) are placed instead (lib/plan/target-waves.ts).
 */
export function orderWaves(
  policy: Pick<RolloutPolicy, 'waves' | 'waveTargets'>,
  clusters: readonly string[],
  members?: readonly WaveMember[],
): Wave[] {
  if (policy.waves !== undefined && policy.waveTargets !== undefined && members !== undefined)
    return orderTargetWaves(policy.waves, policy.waveTargets, members);
  const reached = [...new Set(clusters)].sort();
  if (policy.waves === undefined) return reached.length === 0 ? [] : [{ index: 0, from: 'rest', clusters: reached }];
  const placed = new Set<string>();
  const waves: Array<Omit<Wave, 'index'>> = [];
  policy.waves.forEach((names, from) => {
    const inWave = reached.filter((c) => names.includes(c) && !placed.has(c));
    for (const c of inWave) placed.add(c);
    if (inWave.length > 0) waves.push({ from, clusters: inWave });
  });
  const rest = reached.filter((c) => !placed.has(c));
  if (rest.length > 0) waves.push({ from: 'rest', clusters: rest });
  return waves.map((w, index) => ({ index, ...w }));
}

/**
 * The change sets of a batch: changes grouped by the route whose `rollout` block they follow, each cut to what one
 * queue message carries, each with its waves. `clustersOf(change)` says where the plan put it (the intake's
 * changesByCluster). Deterministic: same table and changes, same sets in the same order.
 */
export function planChangeSets(
  table: Pick<RoutingTable, 'routes'>,
  changes: readonly SecretChange[],
  plan: Pick<Plan, 'routed'>,
  clustersOf: (change: SecretChange) => readonly string[],
  membersOf?: (change: SecretChange) => readonly WaveMember[],
): ChangeSet[] {
  const byRoute = new Map<string, { policy: RolloutPolicy; changes: SecretChange[] }>();
  changes.forEach((change, i) => {
    if (clustersOf(change).length === 0) return;
    const chosen = policyRoute(table, plan.routed[i] ?? []);
    if (!chosen) return;
    const set = byRoute.get(chosen.name);
    if (set) set.changes.push(change);
    else byRoute.set(chosen.name, { policy: chosen.policy, changes: [change] });
  });
  const order = table.routes.map((r) => r.name);
  return [...byRoute]
    .sort(([a], [b]) => order.indexOf(a) - order.indexOf(b))
    .flatMap(([route, { policy, changes: routeChanges }]) =>
      chunkChanges(routeChanges).map((chunk) => ({
        route,
        policy,
        changes: chunk,
        waves: orderWaves(
          policy,
          chunk.flatMap((c) => clustersOf(c)),
          membersOf && [...new Set(chunk.flatMap((c) => membersOf(c)))],
        ),
        key: changeSetHash(chunk.map(queuedChange)),
      })),
    );
}

/** A target of a wave as the gate reads it back. */
export interface WaveTargetState extends WorkloadRef {
  /**
   * The rollout state, or: `pending` — not restarted yet (its cluster's message is still queued) or not readable
   * now (the cluster is unreachable: read again later); `done` — nothing to wait for (skipped, superseded by a newer
   * version, a kind without rollout).
   */
  state: Exclude<RolloutState, 'none'> | 'pending' | 'done';
  reason: string;
}

export type GateAction =
  | { action: 'advance' }
  | { action: 'wait'; delayMs: number; completeAt?: number; why: string; approval?: true }
  | { action: 'fail'; onFailure: 'halt' | 'continue'; failing: WaveTargetState; why: string };

export interface GateInput {
  states: readonly WaveTargetState[];
  now: number;
  /**
   * When the wave started, as the rotation store recorded it; undefined when it holds none (nothing of the wave
   * restarted yet, or a gate for a rotation that never started): the gate then neither fails nor times out.
   */
  since: number | undefined;
  /** When the wave was first seen complete, if it was. */
  completeAt?: number;
  /** When someone approved the next wave (`vault-rollout approve`, as the rotation store holds it), if anyone did. */
  approvedAt?: number;
  policy: Pick<RolloutPolicy, 'gate' | 'onFailure'>;
  /** How long to wait before looking again at a wave still rolling. */
  recheckMs: number;
}

const ready = (s: WaveTargetState, healthy: boolean): boolean =>
  s.state === 'complete' || s.state === 'done' || (!healthy && s.state === 'progressing');

/**
 * What a gate does now: fail when a target failed or timed out, or the wave is not complete by `gate.timeout`; wait
 * while it rolls; once every target is complete, wait out `gate.pause`, then (with `gate.approval`) for an approval,
 * then advance. With `healthy: false` a
 * restarted target counts as ready whatever its rollout says (a failed one still fails the gate). A wave with no
 * recorded start never fails: it waits for the start (or for every target to be complete).
 */
export function decideGate(input: GateInput): GateAction {
  const { states, now, since, policy } = input;
  const { gate, onFailure } = policy;
  const waitingCount = states.filter((s) => !ready(s, gate.healthy)).length;
  // Only a wave the store shows started can fail: a message's claim of a start cannot halt a rotation.
  if (since === undefined && waitingCount > 0)
    return {
      action: 'wait',
      delayMs: Math.max(1, input.recheckMs),
      why: `${waitingCount} target(s) not complete; the wave has not started yet`,
    };
  const failing = states.find((s) => s.state === 'failed' || s.state === 'timeout');
  if (failing)
    return {
      action: 'fail',
      onFailure,
      failing,
      why: `${describeState(failing)}: rollout ${failing.state}${failing.reason ? `: ${failing.reason}` : ''}`,
    };
  const waiting = states.find((s) => !ready(s, gate.healthy));
  if (waiting && since !== undefined) {
    const left = since + gate.timeoutMs - now;
    if (left <= 0)
      return {
        action: 'fail',
        onFailure,
        failing: waiting,
        why: `${describeState(waiting)}: not complete ${Math.round(gate.timeoutMs / 1000)} s after the wave started (gate.timeout): ${waiting.state}${waiting.reason ? `: ${waiting.reason}` : ''}`,
      };
    return {
      action: 'wait',
      delayMs: Math.max(1, Math.min(input.recheckMs, left)),
      why: `${waitingCount} target(s) not complete`,
    };
  }
  const completeAt = input.completeAt ?? now;
  const pauseLeft = completeAt + gate.pauseMs - now;
  if (pauseLeft > 0) return { action: 'wait', delayMs: pauseLeft, completeAt, why: 'wave complete; pausing' };
  // Asked only once the rest of the gate passed: a person approves a wave that is complete, never one still rolling.
  // A person may take hours: the looks thin out as the wait grows (a quarter of it so far), to one a minute at most
  // apart, so a wave waiting a day costs a few hundred looks and an approval is picked up within a minute.
  if (gate.approval === true && input.approvedAt === undefined)
    return {
      action: 'wait',
      delayMs: Math.max(1, input.recheckMs, Math.min(APPROVAL_RECHECK_MAX_MS, Math.round((now - completeAt) / 4))),
      completeAt,
      why: 'waits for approval',
      approval: true,
    };
  return { action: 'advance' };
}

/** The longest between two looks at a wave waiting for its approval. */
export const APPROVAL_RECHECK_MAX_MS = 60_000;

export const describeState = (s: Pick<WaveTargetState, 'cluster' | 'namespace' | 'kind' | 'name'>): string =>
  `${s.kind} ${s.namespace}/${s.name} in cluster ${s.cluster}`;

/** How many times settle may push a burst back: a secret that keeps changing still restarts. */
export const SETTLE_MAX_WINDOWS = 4;

/**
 * Settle: hold a cluster's messages until the newest is `settleMs` old, but never past SETTLE_MAX_WINDOWS windows
 * after the oldest. Returns how long to hold, or 0 to work them now (together).
 */
export function settleDelay(acceptedAt: readonly number[], settleMs: number, now: number): number {
  if (settleMs <= 0 || acceptedAt.length === 0) return 0;
  const newest = Math.max(...acceptedAt);
  const oldest = Math.min(...acceptedAt);
  const untilQuiet = newest + settleMs - now;
  const untilBound = oldest + SETTLE_MAX_WINDOWS * settleMs - now;
  return Math.max(0, Math.min(untilQuiet, untilBound));
}
