import { describe, expect, it } from 'vitest';
import { codeDigest, codeFiles, type ReadFile } from '../../../bench/provenance.ts';
import {
  fillPage,
  readResults,
  renderAll,
  resultsMarkdown,
  staleBenchmarks,
  type Recorded,
  type Results,
} from '../../../bench/quote-figures.ts';

// Every page quotes its benchmark figures from bench/results.json through markers: a page edited by hand, or not
// refilled after the results or the measured code changed, differs from its render.
describe('the pages quote bench/results.json', () => {
  it.each(renderAll().map((p) => [p.page, p] as const))('%s is as bench/results.json fills it', (_page, p) => {
    expect(p.now, `${p.page} differs from bench/results.json: run npm run figures`).toBe(p.want);
  });

  it('every figure records the commit it was measured at and the digest of the code it measured', () => {
    const { figures } = readResults();
    expect(figures.length).toBeGreaterThan(0);
    for (const f of figures) {
      expect(f.commit, f.name).toMatch(/^[0-9a-f]{40}$/);
      expect(f.codeDigest, f.name).toMatch(/^[0-9a-f]{64}$/);
    }
  });
});

const tree =
  (files: Record<string, string>): ReadFile =>
  (path) =>
    files[path];
const figure = (over: Partial<Recorded> = {}): Recorded => ({
  name: 'fanout_ratio_to_raw',
  value: 1.17,
  unit: '× (p50)',
  goal: '<= 1.1',
  met: false,
  benchmark: 'fanout',
  measuredAt: '2026-11-25T10:22:30.130Z',
  commit: '534e778'.padEnd(40, '0'),
  ...over,
});
const results = (...figures: Recorded[]): Results => ({
  date: '2026-11-28T00:00:00.000Z',
  machine: { cpus: 2, cpuModel: 'test', memoryGiB: 1, node: 'v24', platform: 'linux-x64' },
  figures,
});
const marker = (name: string, field: string, text = '') => `<!-- figure: ${name} ${field} -->${text}<!-- /figure -->`;

describe('fillPage', () => {
  it('fills each field from the figure, replacing what was typed', () => {
    const f = figure({ baseline: { name: 'raw', value: 112.3 }, value: 132, unit: 'ms', name: 'fanout_p50_ms' });
    const page = ['value', 'number', 'unit', 'baseline', 'ratio', 'date', 'commit']
      .map((field) => marker('fanout_p50_ms', field, 'typed'))
      .join(' | ');
    expect(fillPage('p.md', page, results(f), new Set())).toBe(
      [
        marker('fanout_p50_ms', 'value', '132 ms'),
        marker('fanout_p50_ms', 'number', '132'),
        marker('fanout_p50_ms', 'unit', 'ms'),
        marker('fanout_p50_ms', 'baseline', '112.3'),
        marker('fanout_p50_ms', 'ratio', '1.18×'),
        marker('fanout_p50_ms', 'date', '2026-11-25'),
        marker('fanout_p50_ms', 'commit', '534e778'),
      ].join(' | '),
    );
  });

  it('says goal and met, and marks a stale figure', () => {
    const page = `${marker('fanout_ratio_to_raw', 'value')} (goal ${marker('fanout_ratio_to_raw', 'goal')}, ${marker('fanout_ratio_to_raw', 'met')})`;
    expect(fillPage('p.md', page, results(figure()), new Set(['fanout']))).toBe(
      `${marker('fanout_ratio_to_raw', 'value', '1.17 × (p50) (stale)')} (goal ${marker('fanout_ratio_to_raw', 'goal', '<= 1.1')}, ${marker('fanout_ratio_to_raw', 'met', 'not met (stale)')})`,
    );
  });

  it('writes thousands with a comma', () => {
    const f = figure({ name: 'intake_entries_per_s', value: 269398, unit: 'entries/s' });
    expect(fillPage('p.md', marker('intake_entries_per_s', 'value'), results(f), new Set())).toBe(
      marker('intake_entries_per_s', 'value', '269,398 entries/s'),
    );
  });

  it.each([
    ['a figure the file lacks', marker('nope_ms', 'value'), /p\.md:2: no figure nope_ms/],
    ['an unknown field', marker('fanout_ratio_to_raw', 'median'), /unknown field median/],
    ['a field the figure lacks', marker('fanout_ratio_to_raw', 'baseline'), /has no baseline/],
    ['a marker left open', '<!-- figure: fanout_ratio_to_raw value -->1.17', /without their <!-- \/figure -->/],
    ['a marker over two lines', marker('fanout_ratio_to_raw', 'value', '1\n2'), /spans lines/],
  ])('refuses %s', (_what, text, message) => {
    expect(() => fillPage('p.md', `line one\n${text}`, results(figure()), new Set())).toThrow(message);
  });

  it('leaves a page without markers as it is', () => {
    expect(fillPage('p.md', 'fan-out is fast: 3 ms', results(figure()), new Set())).toBe('fan-out is fast: 3 ms');
  });
});

describe('staleness', () => {
  const code = {
    'bench/fanout-bench.ts': "import { x } from '../lib/a.ts';\nimport { h } from '../test/clusters/kube-http.ts';",
    'lib/a.ts': "export { y } from './b.ts';",
    'lib/b.ts': 'export const y = 1;',
    'test/clusters/kube-http.ts': "import '../../lib/c.ts';",
    'lib/c.ts': 'export const c = 1;',
    'package-lock.json': '{}',
  };

  it("follows the benchmark's imports, not the test harness's, and counts the lock file", () => {
    expect(codeFiles('fanout', tree(code))).toEqual([
      'bench/fanout-bench.ts',
      'lib/a.ts',
      'lib/b.ts',
      'package-lock.json',
    ]);
  });

  it('a figure is stale once a file of its code changes, and not before', () => {
    const digest = codeDigest('fanout', tree(code));
    const r = results(figure({ codeDigest: digest }));
    expect(staleBenchmarks(r, tree(code))).toEqual(new Set());
    expect(staleBenchmarks(r, tree({ ...code, 'lib/b.ts': 'export const y = 2;' }))).toEqual(new Set(['fanout']));
    expect(staleBenchmarks(r, tree({ ...code, 'lib/c.ts': 'export const c = 2;' }))).toEqual(new Set());
    expect(staleBenchmarks(results(figure()), tree(code))).toEqual(new Set(['fanout']));
  });

  it('RESULTS.md names the commit of each figure and marks the stale ones', () => {
    const md = resultsMarkdown(results(figure({ uncommitted: true })), new Set(['fanout']));
    expect(md).toContain('| 2026-11-25T10:22 at 534e778+ **stale** |');
    expect(md).not.toContain('at the same time');
  });
});
