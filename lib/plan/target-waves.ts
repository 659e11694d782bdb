/**
 * Waves that select targets (restart order inside a cluster), the pure half: which wave each planned target falls
 * in. A target is of the first wave whose clusters hold its cluster and whose `targets` selector (if any) selects
 * it; the targets no wave selects go last, as one wave, as clusters in no wave do. The intake, the worker, the gate
 * and `apply` all place targets with these two functions, so they agree on every wave.
 */
import { selectsTarget, type WaveMember, type WaveTargets } from '../routing/wave-targets.ts';

/** A wave as placed here (lib/plan/waves.ts's Wave). */
interface PlacedWave {
  index: number;
  from: number | 'rest';
  clusters: string[];
  targets?: WaveTargets;
}

/**
 * The waves of these planned targets, in order, each with the clusters it restarts something in; empty ones dropped.
 */
export function orderTargetWaves(
  waves: readonly (readonly string[])[],
  selectors: ReadonlyArray<WaveTargets | undefined>,
  members: readonly WaveMember[],
): PlacedWave[] {
  const placed = new Map<number | 'rest', Set<string>>();
  for (const m of members) {
    const i = waves.findIndex((clusters, w) => clusters.includes(m.cluster) && selectsTarget(selectors[w], m));
    const from = i < 0 ? 'rest' : i;
    placed.set(from, (placed.get(from) ?? new Set()).add(m.cluster));
  }
  const order: Array<number | 'rest'> = [...waves.keys(), 'rest'];
  return order
    .filter((from) => placed.has(from))
    .map((from, index) => {
      const selector = from === 'rest' ? undefined : selectors[from];
      return {
        index,
        from,
        clusters: [...(placed.get(from) ?? [])].sort(),
        ...(selector === undefined ? {} : { targets: selector }),
      };
    });
}

/**
 * The index (in `waves`) of the wave a planned target restarts in: the first wave holding its cluster that selects
 * it; -1 when none does (a target of another rotation's changes).
 */
export function targetWave(waves: readonly Pick<PlacedWave, 'clusters' | 'targets'>[], target: WaveMember): number {
  return waves.findIndex((w) => w.clusters.includes(target.cluster) && selectsTarget(w.targets, target));
}
