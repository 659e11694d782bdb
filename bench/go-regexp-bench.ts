/**
 * The importer's Go regexps (lib/importer/go-regexp.ts, re2js): Reloader names anchored `^name$` against Secret names
 * and ESO namespace regexes searched in namespaces, beside JavaScript's RegExp on the same benign inputs (a JIT-compiled
 * backtracker: far faster on these, and never safe on tenant patterns, so a reference, not a goal); and the work on crafted patterns at twice the text, which
 * a linear matcher keeps at about twice the time where a backtracking one explodes.
 */
import { compileGoRegexp, type GoRegexp } from '../lib/importer/go-regexp.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';

const RUNS = size(15, 2);
const NAMES = Array.from({ length: 500 }, (_, i) => `app-${i}-db-credentials`);
const NAMESPACES = Array.from({ length: 500 }, (_, i) => `team-${i % 20}-prod-${i}`);
const RELOADER = ['app-1-db-credentials', 'app-.*-db-credentials', '(app|svc)-[0-9]+-db-credentials', 'db-creds', '.*'];
const ESO = ['^team-[0-9]+-prod', 'prod', '^(team|org)-\\d+-(prod|staging)-\\d+$', 'staging$'];
const CRAFTED = ['^(a|a)*b$', '^(a*)*b$', `${'.*'.repeat(50)}x`];

const go = (source: string): GoRegexp => {
  const re = compileGoRegexp(source);
  if ('error' in re) throw new Error(`${source}: ${re.error}`);
  return re;
};

function timed(fn: () => number): number {
  const times: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  return median(times);
}

function importerInputs(compile: (source: string) => { test(text: string): boolean }): number {
  let matched = 0;
  for (const p of RELOADER) {
    const re = compile(`^${p}$`);
    for (const name of NAMES) matched += re.test(name) ? 1 : 0;
  }
  for (const p of ESO) {
    const re = compile(p);
    for (const ns of NAMESPACES) matched += re.test(ns) ? 1 : 0;
  }
  return matched;
}

export function goRegexpBench(): Promise<Figure[]> {
  const ours = timed(() => importerInputs(go));
  const js = timed(() => importerInputs((s) => new RegExp(s)));
  const crafted = CRAFTED.map((p) => {
    const re = go(p);
    const at = (n: number) => timed(() => (re.test('a'.repeat(n)) ? 1 : 0));
    return at(8000) / at(4000);
  });
  const worst = Math.max(...crafted);
  return Promise.resolve([
    {
      name: 'go_regexp_importer_inputs_ms',
      value: round(ours, 3),
      unit: 'ms',
      baseline: { name: "JavaScript's RegExp on the same benign inputs", value: round(js, 3) },
      runs: RUNS,
      note: `${RELOADER.length} Reloader names x ${NAMES.length} Secret names and ${ESO.length} ESO namespace regexes x ${NAMESPACES.length} namespaces, compile and match`,
    },
    {
      name: 'go_regexp_crafted_doubling_ratio',
      value: round(worst, 2),
      unit: 'x',
      goal: '<= 2.5',
      met: worst <= 2.5,
      runs: RUNS,
      note: `time on 8000 characters / time on 4000, worst of ${CRAFTED.join(', ')}: linear work doubles, a backtracking matcher's explodes`,
    },
  ]);
}
