/**
 * `npm run bench`: runs every benchmark (or those named: `npm run bench -- fanout mass`) and writes
 * bench/results.json and bench/RESULTS.md. Figures are medians over repetitions, each beside its baseline
 * measured in the same run; nothing here is asserted by the unit tests. A partial run keeps the figures of the
 * benchmarks it did not run, each with the date, the commit and the digest of the code it measured
 * (bench/provenance.ts), so the pages can say which figures are older than their code.
 *
 * `--tiny` runs each benchmark at a size that only proves it still runs (bench/size.ts), and `--out <dir>` writes
 * results.json and RESULTS.md there instead of bench/: the tests run the benchmarks so, and judge no figure.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import type { Figure } from './figures.ts';
import { BENCH_ENTRIES, checkout, codeDigest, codeFiles, readWorkingTree } from './provenance.ts';
import { resultsMarkdown, staleBenchmarks, type Recorded, type Results } from './quote-figures.ts';
import { bundleBench } from './bundle-bench.ts';
import { e2eBench } from './e2e-bench.ts';
import { esoBench } from './eso-bench.ts';
import { fanoutBench } from './fanout-bench.ts';
import { fleetBench } from './fleet-bench.ts';
import { goRegexpBench } from './go-regexp-bench.ts';
import { deviceBench, intakeBench } from './intake-bench.ts';
import { massRotationBench } from './mass-rotation-bench.ts';
import { maxUnavailableBench } from './max-unavailable-bench.ts';
import { behindBench, lambdaCostBench, wakeBench } from './never-wait-bench.ts';
import { planBench } from './plan-bench.ts';
import { TINY } from './size.ts';
import { reconcileBench } from './reconcile-bench.ts';
import { rolloutHealthBench } from './rollout-health-bench.ts';
import { statusBench } from './status-bench.ts';
import { statusPageBench } from './status-page-bench.ts';

const BENCHMARKS: Record<string, () => Promise<Figure[]>> = {
  plan: planBench,
  fanout: fanoutBench,
  fleet: fleetBench,
  mass: massRotationBench,
  slots: maxUnavailableBench,
  bundle: bundleBench,
  e2e: () => e2eBench(),
  'e2e-patch-only': () => e2eBench({ follow: false }),
  behind: behindBench,
  wake: wakeBench,
  'lambda-cost': lambdaCostBench,
  health: rolloutHealthBench,
  intake: intakeBench,
  device: deviceBench,
  status: statusBench,
  'status-page': statusPageBench,
  reconcile: reconcileBench,
  eso: esoBench,
  'go-regexp': goRegexpBench,
};

// Each benchmark's code must be known to say when its figures are stale, and the tests run every benchmark by that list.
const unlisted = Object.keys(BENCHMARKS).filter((n) => !(n in BENCH_ENTRIES));
const gone = Object.keys(BENCH_ENTRIES).filter((n) => !(n in BENCHMARKS));
if (unlisted.length > 0 || gone.length > 0)
  throw new Error(
    `bench/provenance.ts's BENCH_ENTRIES: add ${unlisted.join(', ') || 'nothing'}, remove ${gone.join(', ') || 'nothing'}`,
  );

// `--report`: write RESULTS.md from results.json again, measuring nothing (after merging figures from several runs).
const args = process.argv.slice(2);
const reportOnly = args.includes('--report');
const outAt = args.indexOf('--out');
const outDir = outAt >= 0 ? resolve(args[outAt + 1] ?? '.') : undefined;
if (outAt >= 0 && args[outAt + 1] === undefined) throw new Error('--out needs a directory');
const only = args.filter((a, i) => !a.startsWith('--') && !(outAt >= 0 && i === outAt + 1));
const unknown = only.filter((n) => !(n in BENCHMARKS));
if (unknown.length > 0)
  throw new Error(`unknown benchmark(s) ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}`);

const resultsFile = outDir ? join(outDir, 'results.json') : new URL('./results.json', import.meta.url);
const resultsPage = outDir ? join(outDir, 'RESULTS.md') : new URL('./RESULTS.md', import.meta.url);
if (outDir) mkdirSync(outDir, { recursive: true });
const previous: Recorded[] = existsSync(resultsFile)
  ? ((JSON.parse(readFileSync(resultsFile, 'utf8')) as { figures?: Recorded[] }).figures ?? []).filter(
      (f) => f.benchmark !== undefined,
    )
  : [];
const fresh: Recorded[] = [];
// Written after each benchmark, so a later one that fails keeps the figures measured before it.
write();
for (const [name, run] of Object.entries(BENCHMARKS)) {
  if (reportOnly || (only.length > 0 && !only.includes(name))) continue;
  process.stderr.write(`bench: ${name}...\n`);
  if (!TINY) await quietMachine(name);
  const measuredAt = new Date().toISOString();
  // Read before the run: the code as measured, even if it is edited while the benchmark runs.
  const codeDigestNow = codeDigest(name, readWorkingTree);
  const { commit, uncommitted } = checkout(codeFiles(name, readWorkingTree));
  fresh.push(
    ...(await run()).map((f): Recorded => ({
      ...f,
      benchmark: name,
      measuredAt,
      commit,
      commitSource: 'run',
      uncommitted,
      codeDigest: codeDigestNow,
    })),
  );
  write();
}
process.stdout.write(readFileSync(resultsPage, 'utf8'));

/**
 * Waits (a minute at most) until the CPUs are mostly idle: a benchmark after one that ran clusters would otherwise
 * share the machine with their shutdown, and its ratios would measure that. Says so when it stops waiting.
 */
async function quietMachine(name: string): Promise<void> {
  const busy = (): number[] | undefined => {
    try {
      const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]?.trim().split(/\s+/).slice(1).map(Number) ?? [];
      const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
      return [cpu.reduce((a, b) => a + b, 0), idle];
    } catch {
      return undefined; // not Linux: nothing to wait for
    }
  };
  const until = Date.now() + 60_000;
  for (;;) {
    const a = busy();
    await new Promise((r) => setTimeout(r, 2_000));
    const b = busy();
    if (!a || !b) return;
    const idle = (b[1]! - a[1]!) / Math.max(1, b[0]! - a[0]!);
    if (idle >= 0.85) return;
    if (Date.now() > until) {
      process.stderr.write(`bench: ${name} starts on a busy machine (${Math.round((1 - idle) * 100)} % CPU in use)\n`);
      return;
    }
  }
}

function write(): void {
  const ran = new Set(fresh.map((f) => f.benchmark));
  const order = Object.keys(BENCHMARKS);
  const figures = [...previous.filter((f) => !ran.has(f.benchmark)), ...fresh].sort(
    (a, b) => order.indexOf(a.benchmark) - order.indexOf(b.benchmark),
  );

  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
  };
  const results: Results = { date: new Date().toISOString(), machine, figures };
  writeFileSync(resultsFile, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(resultsPage, resultsMarkdown(results, staleBenchmarks(results)));
}
