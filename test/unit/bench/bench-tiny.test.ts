import { describe, expect, it } from 'vitest';
import { CLUSTER_FREE_BENCHMARKS, runTiny } from '../../bench/run-tiny.ts';

// The benchmarks that need no cluster, no OpenBao and no bundle run here at their tiny size, so a change that breaks
// one fails at once instead of at the next measurement. The others run in test/integration/bench-tiny.test.ts.

describe('bench/run.ts --tiny', () => {
  it(
    `runs ${CLUSTER_FREE_BENCHMARKS.join(', ')} and each gives finite figures`,
    async () => {
      const results = await runTiny(CLUSTER_FREE_BENCHMARKS);
      for (const name of CLUSTER_FREE_BENCHMARKS) {
        const figures = results.figures.filter((f) => f.benchmark === name);
        expect(figures.length, name).toBeGreaterThan(0);
        for (const f of figures) {
          expect(Number.isFinite(f.value), `${f.name} = ${f.value}`).toBe(true);
          expect(f.commit, f.name).toMatch(/^[0-9a-f]{40}$/);
        }
      }
    },
    // A bound for a loaded machine, not a speed goal: about 12 s on 2 shared cores.
    180_000,
  );
});
