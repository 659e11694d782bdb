/**
 * The layers of lib/ (CONTRIBUTING.md "Layout"), with functions/ and tools/ on top: every import points down a rank or
 * stays in its rank, never out to test/ or bench/, and no files import each other in a circle. The ranks are CONTRIBUTING.md's diagram; a new folder gets a rank here before it gets code.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../..');

/** Lower ranks know nothing of higher ones. Ports (interfaces) live low, their implementations (adapters) high. */
export const RANKS: Readonly<Record<string, number>> = {
  kernel: 0, // no domain: limiter, backoff, refreshing cache, env, log and telemetry types, SQLite transactions
  sources: 1, // what changed in Vault: the record parsers, KV mounts, Vault paths
  routing: 2, // the routing table: schema, patterns, templates, router
  workloads: 3, // the Kubernetes kinds: descriptors, health, sync kinds, consumers, selectors, failures, the port
  plan: 4, // what to restart: planner, targets, waves, change sets, the restart record
  status: 5, // what is safe to revoke: the model and its evaluation
  queue: 6, // stores
  slots: 6,
  rotations: 6,
  engine: 7, // applying a plan to one cluster through the port: read, decide, admit, patch, record, follow, sync
  kube: 8, // adapters: the Kubernetes HTTP client and credentials, AWS, Vault, Powertools
  aws: 8,
  vault: 8,
  observability: 8,
  notify: 8, // notifications: events, payloads per sink, signing, delivery with retries
  pipeline: 9, // services: worker, intake, reconcile
  http: 10, // apps
  relay: 10,
  report: 10,
  deploy: 10,
  importer: 10,
  runtime: 11, // composition roots
  cli: 12,
  functions: 12,
  tools: 13, // what builds what ships (image, docs site, npm package, references): may import it, never imported by it
};

export interface Problem {
  readonly kind: 'up' | 'cycle' | 'unranked';
  readonly text: string;
}

/** The folder a repository file belongs to: lib/<folder>/… or functions/…. */
export function folderOf(file: string): string {
  const parts = file.split('/');
  return parts[0] === 'lib' ? parts[1]! : parts[0]!;
}

/** Every relative module specifier of a source text: static imports and re-exports, side-effect and dynamic imports. */
export function importsOf(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"\n]+)['"]/g)) found.push(m[1]!);
  return found;
}

/** The problems of an import graph (file -> the files it imports, repository-relative). */
export function layerProblems(
  graph: ReadonlyMap<string, readonly string[]>,
  ranks: Readonly<Record<string, number>> = RANKS,
): Problem[] {
  const problems: Problem[] = [];
  for (const [file, targets] of graph) {
    const from = ranks[folderOf(file)];
    if (from === undefined) problems.push({ kind: 'unranked', text: `${file}: folder ${folderOf(file)} has no rank` });
    for (const target of targets) {
      const to = ranks[folderOf(target)];
      // Outside the ranked folders (test/, bench/, …): what ships never imports it; a file at the root (package.json)
      // may be read.
      if (to === undefined && target.includes('/'))
        problems.push({ kind: 'up', text: `${file} imports ${target}, outside the ranked folders` });
      if (from !== undefined && to !== undefined && to > from)
        problems.push({
          kind: 'up',
          text: `${file} (${folderOf(file)}, rank ${from}) imports ${target} (${folderOf(target)}, rank ${to})`,
        });
    }
  }
  // Cycles: a depth-first search; a file met again while still on the path closes a circle.
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === 'open')
        problems.push({ kind: 'cycle', text: [...path.slice(path.indexOf(target)), target].join(' -> ') });
      else if (!state.has(target)) visit(target);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return problems;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(REPO, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(REPO, join(e.parentPath, e.name)))
    .sort();
}

function repositoryGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of [...sourceFiles('lib'), ...sourceFiles('functions'), ...sourceFiles('tools')]) {
    const text = readFileSync(join(REPO, file), 'utf8');
    graph.set(
      file,
      importsOf(text).map((s) => relative(REPO, resolve(REPO, dirname(file), s))),
    );
  }
  return graph;
}

describe('layers', () => {
  it('lib/, functions/ and tools/: no import points up a rank or out of them, no files import each other in a circle, every folder is ranked', () => {
    const graph = repositoryGraph();
    expect(graph.size).toBeGreaterThan(100);
    expect(layerProblems(graph).map((p) => `${p.kind}: ${p.text}`)).toEqual([]);
  });

  it.each([
    {
      what: 'down and sideways are fine',
      graph: { 'lib/plan/a.ts': ['lib/routing/b.ts', 'lib/plan/c.ts'], 'lib/routing/b.ts': [], 'lib/plan/c.ts': [] },
      problems: [],
    },
    {
      what: 'up is refused',
      graph: { 'lib/plan/a.ts': ['lib/engine/b.ts'], 'lib/engine/b.ts': [] },
      problems: ['up: lib/plan/a.ts (plan, rank 4) imports lib/engine/b.ts (engine, rank 7)'],
    },
    {
      what: 'a circle in one folder is refused',
      graph: { 'lib/engine/a.ts': ['lib/engine/b.ts'], 'lib/engine/b.ts': ['lib/engine/a.ts'] },
      problems: ['cycle: lib/engine/a.ts -> lib/engine/b.ts -> lib/engine/a.ts'],
    },
    {
      what: 'what ships importing a test helper is refused',
      graph: { 'lib/plan/a.ts': ['test/helpers.ts'] },
      problems: ['up: lib/plan/a.ts imports test/helpers.ts, outside the ranked folders'],
    },
    {
      what: 'an unranked folder is refused',
      graph: { 'lib/misc/a.ts': [] },
      problems: ['unranked: lib/misc/a.ts: folder misc has no rank'],
    },
  ])('the checker: $what', ({ graph, problems }) => {
    expect(layerProblems(new Map(Object.entries(graph))).map((p) => `${p.kind}: ${p.text}`)).toEqual(problems);
  });

  it.each([
    { text: "import { a } from './a.ts';\nimport type { B } from '../b/b.ts';", specifiers: ['./a.ts', '../b/b.ts'] },
    {
      text: "export { c } from './c.ts';\nconst d = await import('../d.ts');\nimport './side.ts';",
      specifiers: ['./c.ts', '../d.ts', './side.ts'],
    },
    { text: 'import { z } from \'zod\';\nimport {\n  e,\n} from "./e.ts";', specifiers: ['./e.ts'] },
  ])('reads the import statements of $specifiers', ({ text, specifiers }) => {
    expect(importsOf(text)).toEqual(specifiers);
  });
});
