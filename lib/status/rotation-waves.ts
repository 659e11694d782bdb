/**
 * Where a path's rotation stands in its waves, for the status page: the waves and gate of the route the
 * path follows (the planner's change set, as the intake and the gate worker plan it: lib/plan/waves.ts), and per wave
 * what `status` already read of its consumers. Pure: it re-reads nothing, it only regroups one `PathStatus` by wave
 * and places the rotation store's halts. The gates' own state (how long a wave waited) lives only in queue messages;
 * what the page can say is what the clusters and the store say.
 */
import { planRollouts } from '../plan/planner.ts';
import { planChangeSets } from '../plan/waves.ts';
import { targetWave } from '../plan/target-waves.ts';
import type { RolloutPolicy, RoutingTable } from '../routing/routing-table.ts';
import { probeChange } from './fleet-status.ts';
import type { ConsumerStatus, PathStatus } from './model.ts';

/**
 * What the page needs of a halt in the rotation store (lib/rotations RotationHalt has these fields; this rank may not
 * import it). `secrets` reads `mount/key version N`, as the gate writes them.
 */
export interface HaltView {
  rotation: string;
  secrets: readonly string[];
  /** 1-based. */
  wave: number;
  waves: number;
}

/**
 * A wave, in words: `complete` (every consumer current and rolled out), `rolling` (restarted in part or rolling out),
 * `waiting` (no consumer restarted yet: its gate has not released it), `failed` (a rollout failed or timed out),
 * `halted` (the gate halted here), `held back` (after a halted wave: never restarted for this rotation),
 * `no consumers` (nothing of this path in its clusters).
 */
export const WaveStates = ['complete', 'rolling', 'waiting', 'failed', 'halted', 'held back', 'no consumers'] as const;
export type WaveState = (typeof WaveStates)[number];

export interface WaveProgress {
  /** 1-based, as `halts` and the log lines count. */
  number: number;
  clusters: string[];
  state: WaveState;
  consumers: number;
  ok: number;
}

export interface PathRotation {
  route: string;
  gate: RolloutPolicy['gate'];
  onFailure: RolloutPolicy['onFailure'];
  waves: WaveProgress[];
  state: 'complete' | 'in progress' | 'failed' | 'halted';
  /** The first wave not complete (1-based); waves.length + 1 when all are. */
  at: number;
  /** Halts in the store that name this path (any version). */
  halts: HaltView[];
}

/** The `mount/key` a halt's `secrets` entry names (`secret/app/db version 2`, `secret/app/db (delete)`). */
const haltedPath = (secret: string): string => secret.replace(/ (version \d+|\([a-z-]+\))$/, '');

function waveState(consumers: readonly ConsumerStatus[], haltedHere: boolean, afterHalt: boolean): WaveState {
  if (haltedHere || consumers.some((c) => c.halted !== undefined)) return 'halted';
  if (afterHalt) return 'held back';
  if (consumers.length === 0) return 'no consumers';
  if (consumers.some((c) => c.state === 'current' && (c.rollout === 'failed' || c.rollout === 'timeout')))
    return 'failed';
  if (consumers.every((c) => c.ok)) return 'complete';
  if (consumers.every((c) => c.state === 'behind')) return 'waiting';
  return 'rolling';
}

/**
 * The rotation of one path by wave, or undefined when the route it follows has no waves (everything restarts at
 * once: the consumer table says it all).
 */
export function pathRotation(
  table: RoutingTable,
  path: PathStatus,
  halts: readonly HaltView[],
): PathRotation | undefined {
  const change = probeChange(path, typeof path.current === 'number' ? path.current : null);
  const plan = planRollouts(table, [change]);
  const clusters = [...new Set(plan.targets.map((t) => t.cluster))];
  const set = planChangeSets(
    table,
    [change],
    plan,
    () => clusters,
    () => plan.targets,
  )[0];
  if (!set || set.policy.waves === undefined) return undefined;
  const secret = `${path.mount}/${path.key}`;
  const mine = halts.filter((h) => h.secrets.some((s) => haltedPath(s) === secret));
  const routed = path.consumers.filter((c) => c.routed);
  let halted = 0;
  // A consumer's wave: the first that selects it as a workload, else its cluster's first (a consumer of a Secret).
  const waveOf = (c: ConsumerStatus) => {
    const selected = targetWave(set.waves, c);
    return selected >= 0 ? selected : set.waves.findIndex((w) => w.clusters.includes(c.cluster));
  };
  const waves = set.waves.map((w): WaveProgress => {
    const number = w.index + 1;
    const inWave = routed.filter((c) => waveOf(c) === w.index);
    const state = waveState(
      inWave,
      mine.some((h) => h.wave === number),
      halted > 0,
    );
    if (state === 'halted' && halted === 0) halted = number;
    return { number, clusters: w.clusters, state, consumers: inWave.length, ok: inWave.filter((c) => c.ok).length };
  });
  const done = (w: WaveProgress) => w.state === 'complete' || w.state === 'no consumers';
  const at = waves.find((w) => !done(w))?.number ?? waves.length + 1;
  const state =
    halted > 0
      ? 'halted'
      : waves.some((w) => w.state === 'failed')
        ? 'failed'
        : at > waves.length
          ? 'complete'
          : 'in progress';
  return { route: set.route, gate: set.policy.gate, onFailure: set.policy.onFailure, waves, state, at, halts: mine };
}

/** The rotation by wave of every path whose route has waves, keyed by path. */
export function pathRotations(
  table: RoutingTable,
  paths: readonly PathStatus[],
  halts: readonly HaltView[],
): Map<string, PathRotation> {
  const out = new Map<string, PathRotation>();
  for (const p of paths) {
    const rotation = pathRotation(table, p, halts);
    if (rotation) out.set(p.path, rotation);
  }
  return out;
}
