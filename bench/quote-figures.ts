/**
 * One source for every benchmark figure the pages quote: `bench/results.json`.
 *
 * A page quotes a figure through a marker the generator fills, never by typing it:
 *
 *   <!-- figure: fanout_ratio_to_raw value -->1.17 × (p50)<!-- /figure -->
 *
 * Fields: `value` (number and unit), `number`, `unit`, `baseline` (the baseline's number), `ratio` (value over
 * baseline), `goal`, `met` (met / not met), `spread` (min–max), `runs`, `date` (the day it was measured) and
 * `commit` (the commit it ran at).
 * A figure whose code changed since it was measured (bench/provenance.ts) reads "(stale)" after its value, number,
 * baseline, ratio and met. bench/RESULTS.md is written whole from the same file.
 *
 *   node bench/quote-figures.ts           names each page that differs from what the file gives (exit 1)
 *   node bench/quote-figures.ts --write   rewrites them (npm run figures)
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Figure } from './figures.ts';
import { codeDigest, readWorkingTree, REPO, type ReadFile } from './provenance.ts';

/** A figure as bench/results.json holds it: which benchmark measured it, when, at which commit, on what code. */
export interface Recorded extends Figure {
  benchmark: string;
  measuredAt: string;
  /** The commit checked out when it was measured. */
  commit?: string;
  /**
   * `run`: recorded by the run itself; `first-commit-with-figure`: recorded afterwards, for figures measured before
   * runs recorded their commit, as the first commit whose results.json held the figure.
   */
  commitSource?: 'run' | 'first-commit-with-figure';
  /** The run measured uncommitted changes to the benchmark's code, on top of `commit`. */
  uncommitted?: boolean;
  /** bench/provenance.ts's digest of the benchmark's code as measured. */
  codeDigest?: string;
}

export interface Results {
  date: string;
  machine: { cpus: number; cpuModel: string; memoryGiB: number; node: string; platform: string };
  figures: Recorded[];
}

export const RESULTS_FILE = 'bench/results.json';
export const RESULTS_PAGE = 'bench/RESULTS.md';

export const readResults = (read: ReadFile = readWorkingTree): Results =>
  JSON.parse(read(RESULTS_FILE) ?? '{"figures":[]}') as Results;

/** The benchmarks whose figures are stale: no digest recorded, or their code's digest today differs. */
export function staleBenchmarks(results: Results, read: ReadFile = readWorkingTree): Set<string> {
  const stale = new Set<string>();
  const today = new Map<string, string>();
  for (const f of results.figures) {
    if (!today.has(f.benchmark)) today.set(f.benchmark, codeDigest(f.benchmark, read));
    if (f.codeDigest === undefined || f.codeDigest !== today.get(f.benchmark)) stale.add(f.benchmark);
  }
  return stale;
}

export const FIELDS = [
  'value',
  'number',
  'unit',
  'baseline',
  'ratio',
  'goal',
  'met',
  'spread',
  'runs',
  'date',
  'commit',
] as const;
export type Field = (typeof FIELDS)[number];

const number = (v: number): string => v.toLocaleString('en-US', { maximumFractionDigits: 6 });

/** The text of one field of one figure, as a page shows it. */
export function fieldText(f: Recorded, field: Field, stale: boolean): string {
  const mark = stale ? ' (stale)' : '';
  const need = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`figure ${f.name} has no ${what} in ${RESULTS_FILE}`);
    return v;
  };
  switch (field) {
    case 'value':
      return `${number(f.value)} ${f.unit}${mark}`;
    case 'number':
      return `${number(f.value)}${mark}`;
    case 'unit':
      return f.unit;
    case 'baseline':
      return `${number(need(f.baseline, 'baseline').value)}${mark}`;
    case 'ratio': {
      const base = need(f.baseline, 'baseline').value;
      if (base === 0) throw new Error(`figure ${f.name}: its baseline is 0, no ratio`);
      return `${number(Number((f.value / base).toFixed(2)))}×${mark}`;
    }
    case 'goal':
      return need(f.goal, 'goal');
    case 'met':
      return `${need(f.met, 'met') ? 'met' : 'not met'}${mark}`;
    case 'spread': {
      const [min, max] = need(f.spread, 'spread');
      return `${number(min)}–${number(max)}`;
    }
    case 'runs':
      return number(need(f.runs, 'runs'));
    case 'date':
      return f.measuredAt.slice(0, 10);
    case 'commit':
      return need(f.commit, 'commit').slice(0, 7);
  }
}

const MARKER = /<!-- figure: (\S+) (\S+) -->([\s\S]*?)<!-- \/figure -->/g;
const OPENING = /<!-- figure:/g;

/** The page with every marker filled from the results; throws on an unknown figure or field, or a marker left open. */
export function fillPage(page: string, text: string, results: Results, stale: ReadonlySet<string>): string {
  const byName = new Map(results.figures.map((f) => [f.name, f]));
  const opened = [...text.matchAll(OPENING)].length;
  let closed = 0;
  const filled = text.replace(MARKER, (_all, name: string, field: string, old: string, offset: number) => {
    closed += 1;
    const at = `${page}:${text.slice(0, offset).split('\n').length}`;
    if (old.includes('\n')) throw new Error(`${at}: a figure marker spans lines`);
    const f = byName.get(name);
    if (f === undefined) throw new Error(`${at}: no figure ${name} in ${RESULTS_FILE}`);
    if (!(FIELDS as readonly string[]).includes(field))
      throw new Error(`${at}: unknown field ${field} of ${name}; fields: ${FIELDS.join(', ')}`);
    let value: string;
    try {
      value = fieldText(f, field as Field, stale.has(f.benchmark));
    } catch (e) {
      throw new Error(`${at}: ${(e as Error).message}`, { cause: e });
    }
    return `<!-- figure: ${name} ${field} -->${value}<!-- /figure -->`;
  });
  if (closed !== opened) throw new Error(`${page}: ${opened - closed} figure marker(s) without their <!-- /figure -->`);
  return filled;
}

/** bench/RESULTS.md, written whole from the results. */
export function resultsMarkdown(results: Results, stale: ReadonlySet<string>): string {
  const { machine } = results;
  const measured = (f: Recorded) =>
    `${f.measuredAt.slice(0, 16)}${f.commit ? ` at ${f.commit.slice(0, 7)}${f.uncommitted ? '+' : ''}` : ''}${stale.has(f.benchmark) ? ' **stale**' : ''}`;
  return [
    '# Benchmark results',
    '',
    `Written ${results.date} on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node} (${machine.platform}). Reproduce with \`npm run bench\` (one benchmark: \`npm run bench -- fanout\`).`,
    'Each figure is the median of its runs; the spread is min–max; each baseline was measured in the same run of its benchmark, beside the figure.',
    'The benchmarks were not all run at once: each row has the date and the commit it was measured at (`+`: with uncommitted changes to its code; a commit found afterwards for figures measured before runs recorded one).',
    "**stale**: the benchmark's code (its import closure and package-lock.json, `bench/provenance.ts`) changed since it was measured.",
    'The machine is shared (2 cores also run the three test clusters): expect noise, compare a figure with its baseline.',
    '',
    '| Figure | Value | Goal | Met | Baseline (same run) | Spread | Runs | Measured | Notes |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.figures.map(
      (f) =>
        `| \`${f.name}\` | ${f.value} ${f.unit} | ${f.goal ?? ''} | ${f.met === undefined ? '' : f.met ? 'yes' : '**no**'} | ${f.baseline ? `${f.baseline.value} (${f.baseline.name})` : ''} | ${f.spread ? `${f.spread[0]}–${f.spread[1]}` : ''} | ${f.runs ?? ''} | ${measured(f)} | ${f.note ?? ''} |`,
    ),
    '',
  ].join('\n');
}

const SKIPPED_DIRS = new Set(['node_modules', '.local', '.git', 'coverage', 'dist', '.serverless', '.esbuild']);

/** The pages that may quote figures: README.md, CONTRIBUTING.md, docs/**, and every README.md under infra/ and tools/. */
export function pages(): string[] {
  const walk = (dir: string, keep: (name: string) => boolean): string[] =>
    readdirSync(join(REPO, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? SKIPPED_DIRS.has(e.name)
          ? []
          : walk(`${dir}/${e.name}`, keep)
        : keep(e.name)
          ? [`${dir}/${e.name}`]
          : [],
    );
  return [
    'README.md',
    'CONTRIBUTING.md',
    ...walk('docs', (n) => n.endsWith('.md')),
    ...walk('infra', (n) => n === 'README.md'),
    ...walk('tools', (n) => n === 'README.md'),
  ].sort();
}

/** Each page as the results give it (RESULTS.md included), beside the page as it is. */
export function renderAll(read: ReadFile = readWorkingTree): { page: string; now: string; want: string }[] {
  const results = readResults(read);
  const stale = staleBenchmarks(results, read);
  const out = pages().map((page) => {
    const now = read(page) ?? '';
    return { page, now, want: fillPage(page, now, results, stale) };
  });
  out.push({ page: RESULTS_PAGE, now: read(RESULTS_PAGE) ?? '', want: resultsMarkdown(results, stale) });
  return out;
}

if (import.meta.main) {
  const write = process.argv.includes('--write');
  const differing = renderAll().filter((p) => p.now !== p.want);
  for (const p of differing) {
    if (write) writeFileSync(join(REPO, p.page), p.want);
    process.stderr.write(`${write ? 'wrote' : 'differs from bench/results.json'}: ${p.page}\n`);
  }
  if (!write && differing.length > 0) {
    process.stderr.write('run npm run figures to fill them\n');
    process.exitCode = 1;
  }
}
