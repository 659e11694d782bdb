/**
 * Runs `node bench/run.ts --tiny` on the named benchmarks into a fresh directory and returns what it wrote: the tests
 * use it to prove the benchmarks still run, so none of them rots between measurements. No figure is judged (the
 * sizes are too small to mean anything, and timing is noisy); only that each benchmark gave finite figures.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Results } from '../../bench/quote-figures.ts';

/** Run by the unit project: no cluster, no OpenBao, no bundle. The integration project runs every other one. */
export const CLUSTER_FREE_BENCHMARKS = ['plan', 'status-page', 'go-regexp'] as const;

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)));

export async function runTiny(benchmarks: readonly string[]): Promise<Results> {
  const out = mkdtempSync(join(tmpdir(), 'vault-rollout-bench-tiny-'));
  try {
    await new Promise<void>((done, fail) => {
      execFile(
        process.execPath,
        ['bench/run.ts', '--tiny', '--out', out, ...benchmarks],
        { cwd: REPO, env: process.env, maxBuffer: 64 * 2 ** 20 },
        (error, _stdout, stderr) => {
          // Its stdout is the report; stderr says which benchmark ran and why one failed.
          if (error) fail(new Error(`bench/run.ts --tiny ${benchmarks.join(' ')} failed:\n${stderr.slice(-4000)}`));
          else done();
        },
      );
    });
    return JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
