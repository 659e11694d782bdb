/**
 * Every benchmark that needs the test clusters, OpenBao, ESO or the bundle runs at its tiny size (bench/size.ts), one
 * process each, so one that no longer runs fails here rather than at the next `npm run bench`. No figure is judged.
 */
import { describe, expect, it } from 'vitest';
import { BENCH_ENTRIES } from '../../bench/provenance.ts';
import { CLUSTER_FREE_BENCHMARKS, runTiny } from '../bench/run-tiny.ts';

// bench/run.ts refuses to run when its benchmarks and these entries differ, so this is every benchmark.
const names = Object.keys(BENCH_ENTRIES).filter((n) => !(CLUSTER_FREE_BENCHMARKS as readonly string[]).includes(n));

// Side by side (vitest's maxConcurrency, 5): each is its own process with namespaces of its own, and most of their time
// is waiting on rollouts, ESO and OpenBao.
describe('bench/run.ts --tiny on the test clusters', () => {
  it.concurrent.each(names)(
    '%s runs and gives finite figures',
    async (name) => {
      const results = await runTiny([name]);
      const figures = results.figures.filter((f) => f.benchmark === name);
      expect(figures.length).toBeGreaterThan(0);
      for (const f of figures) expect(Number.isFinite(f.value), `${f.name} = ${f.value}`).toBe(true);
    },
    // A bound, not a speed goal: the tiny sizes still wait for real rollouts, ESO's 15 s refresh and OpenBao.
    600_000,
  );
});
