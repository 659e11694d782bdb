/**
 * `npm run bench`: runs every benchmark (or those named: `npm run bench -- fanout mass`) and writes
 * bench/results.json and bench/RESULTS.md. Figures are medians over repetitions, each beside its baseline
 * measured in the same run; nothing here is asserted by the unit tests. A partial run keeps the figures of the
 * benchmarks it did not run, each with the date it was measured.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { Figure } from './figures.ts';
import { bundleBench } from './bundle-bench.ts';
import { e2eBench } from './e2e-bench.ts';
import { esoBench } from './eso-bench.ts';
import { fanoutBench } from './fanout-bench.ts';
import { goRegexpBench } from './go-regexp-bench.ts';
import { deviceBench, intakeBench } from './intake-bench.ts';
import { massRotationBench } from './mass-rotation-bench.ts';
import { maxUnavailableBench } from './max-unavailable-bench.ts';
import { behindBench, lambdaCostBench, wakeBench } from './never-wait-bench.ts';
import { planBench } from './plan-bench.ts';
import { reconcileBench } from './reconcile-bench.ts';
import { rolloutHealthBench } from './rollout-health-bench.ts';
import { statusBench } from './status-bench.ts';
import { statusPageBench } from './status-page-bench.ts';

const BENCHMARKS: Record<string, () => Promise<Figure[]>> = {
  plan: planBench,
  fanout: fanoutBench,
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

type Measured = Figure & { benchmark: string; measuredAt: string };

// `--report`: write RESULTS.md from results.json again, measuring nothing (after merging figures from several runs).
const reportOnly = process.argv.includes('--report');
const only = process.argv.slice(2).filter((a) => a !== '--report');
const unknown = only.filter((n) => !(n in BENCHMARKS));
if (unknown.length > 0)
  throw new Error(`unknown benchmark(s) ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}`);

const resultsFile = new URL('./results.json', import.meta.url);
const previous: Measured[] = existsSync(resultsFile)
  ? ((JSON.parse(readFileSync(resultsFile, 'utf8')) as { figures?: Measured[] }).figures ?? []).filter(
      (f) => f.benchmark !== undefined,
    )
  : [];
const fresh: Measured[] = [];
// Written after each benchmark, so a later one that fails keeps the figures measured before it.
write();
for (const [name, run] of Object.entries(BENCHMARKS)) {
  if (reportOnly || (only.length > 0 && !only.includes(name))) continue;
  process.stderr.write(`bench: ${name}...\n`);
  const measuredAt = new Date().toISOString();
  fresh.push(...(await run()).map((f) => ({ ...f, benchmark: name, measuredAt })));
  write();
}
process.stdout.write(readFileSync(new URL('./RESULTS.md', import.meta.url), 'utf8'));

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
  const date = new Date().toISOString();
  writeFileSync(resultsFile, `${JSON.stringify({ date, machine, figures }, null, 2)}\n`);

  const cell = (f: Figure) => `${f.value} ${f.unit}`;
  const md = [
    '# Benchmark results',
    '',
    `Written ${date} on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node} (${machine.platform}). Reproduce with \`npm run bench\` (one benchmark: \`npm run bench -- fanout\`).`,
    'Each figure is the median of its runs; the spread is min–max; the baseline was measured in the same run, on the same machine, at the same time.',
    'The machine is shared (2 cores also run the three test clusters): expect noise, compare a figure with its baseline.',
    '',
    '| Figure | Value | Goal | Met | Baseline (same run) | Spread | Runs | Measured | Notes |',
    '|---|---|---|---|---|---|---|---|---|',
    ...figures.map(
      (f) =>
        `| \`${f.name}\` | ${cell(f)} | ${f.goal ?? ''} | ${f.met === undefined ? '' : f.met ? 'yes' : '**no**'} | ${f.baseline ? `${f.baseline.value} (${f.baseline.name})` : ''} | ${f.spread ? `${f.spread[0]}–${f.spread[1]}` : ''} | ${f.runs ?? ''} | ${f.measuredAt.slice(0, 16)} | ${f.note ?? ''} |`,
    ),
    '',
  ].join('\n');
  writeFileSync(new URL('./RESULTS.md', import.meta.url), md);
}
