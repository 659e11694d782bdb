/**
 * `npm run bench`: runs every benchmark and writes bench/results.json and bench/RESULTS.md.
 * Figures are medians over repetitions, each beside its baseline measured in the same run; nothing here is
 * asserted by the unit tests.
 */
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { Figure } from './figures.ts';
import { bundleBench } from './bundle-bench.ts';
import { fanoutBench } from './fanout-bench.ts';
import { planBench } from './plan-bench.ts';

const BENCHMARKS: Record<string, () => Promise<Figure[]>> = { plan: planBench, fanout: fanoutBench, bundle: bundleBench };

const only = process.argv.slice(2);
const figures: Figure[] = [];
for (const [name, run] of Object.entries(BENCHMARKS)) {
  if (only.length > 0 && !only.includes(name)) continue;
  process.stderr.write(`bench: ${name}...\n`);
  figures.push(...(await run()));
}

const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, platform: `${process.platform}-${process.arch}` };
const date = new Date().toISOString();
writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify({ date, machine, figures }, null, 2)}\n`);

const cell = (f: Figure) => `${f.value} ${f.unit}`;
const md = [
  '# Benchmark results',
  '',
  `Measured ${date} on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node} (${machine.platform}). Reproduce with \`npm run bench\`.`,
  'Each figure is the median of its runs; the spread is min–max; the baseline was measured in the same run.',
  '',
  '| Figure | Value | Goal | Met | Baseline | Spread | Runs | Notes |',
  '|---|---|---|---|---|---|---|---|',
  ...figures.map((f) => `| \`${f.name}\` | ${cell(f)} | ${f.goal ?? ''} | ${f.met === undefined ? '' : f.met ? 'yes' : '**no**'} | ${f.baseline ? `${f.baseline.value} (${f.baseline.name})` : ''} | ${f.spread ? `${f.spread[0]}–${f.spread[1]}` : ''} | ${f.runs ?? ''} | ${f.note ?? ''} |`),
  '',
].join('\n');
writeFileSync(new URL('./RESULTS.md', import.meta.url), md);
process.stdout.write(md);
