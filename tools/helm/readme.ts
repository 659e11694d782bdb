/**
 * The chart's table of values, written into infra/helm/vault-rollout/README.md between its two markers from
 * values.yaml: each key's description is the comment block right above it (no blank line between) and a comment
 * after its value, its default the value itself. A map whose keys carry no comment (resources, probes, security
 * contexts: Kubernetes' own fields) is one value; any other key without a description is an error, so that no value
 * goes undocumented. `node tools/helm/readme.ts` rewrites the README; test/unit/deploy/helm-readme.test.ts checks
 * that the committed one is current and that values.schema.json knows every key. Pure but for the entry point.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

export const CHART_DIR = join(import.meta.dirname, '../../infra/helm/vault-rollout');
export const BEGIN = '<!-- values: generated from values.yaml by `node tools/helm/readme.ts`; edit values.yaml -->';
export const END = '<!-- end of values -->';

/** One key of values.yaml: its path, what its comments say, and whether it is one value (not a map of keys). */
export interface ValueKey {
  path: string[];
  description: string;
  leaf: boolean;
}

const KEY = /^( *)([A-Za-z][A-Za-z0-9_]*):(?: +(.*))?$/;
const COMMENT = /^ *#(?: (.*))?$/;

/** A comment after a value (` # …`), outside quotes; the values here quote no `#`. */
function trailingComment(rest: string | undefined): string {
  const at = rest?.search(/\s#\s/) ?? -1;
  return rest !== undefined && at >= 0
    ? rest
        .slice(at)
        .replace(/^\s#\s/, '')
        .trim()
    : '';
}

/** Every key of values.yaml, in order, with its description (missing descriptions are reported by `documented`). */
export function valueKeys(text: string): ValueKey[] {
  const keys: Array<ValueKey & { indent: number }> = [];
  const stack: Array<{ indent: number; key: string }> = [];
  let comments: string[] = [];
  for (const line of text.split('\n')) {
    const comment = COMMENT.exec(line);
    if (comment) {
      comments.push(comment[1] ?? '');
      continue;
    }
    const key = KEY.exec(line);
    if (key) {
      const indent = key[1]!.length;
      while (stack.length > 0 && stack.at(-1)!.indent >= indent) stack.pop();
      const path = [...stack.map((s) => s.key), key[2]!];
      const description = [...comments, trailingComment(key[3])].join(' ').replace(/\s+/g, ' ').trim();
      keys.push({ path, description, leaf: true, indent });
      stack.push({ indent, key: key[2]! });
    }
    comments = [];
  }
  // A key with keys below it is a map; one whose keys carry no description is a single value (Kubernetes' fields).
  const under = (parent: ValueKey) =>
    keys.filter(
      (k) => k.path.length === parent.path.length + 1 && k.path.slice(0, -1).join('.') === parent.path.join('.'),
    );
  const dropped = new Set<string>();
  for (const k of keys) {
    const children = under(k);
    if (children.length === 0 || dropped.has(k.path.join('.'))) continue;
    if (children.every((c) => c.description === '')) {
      for (const d of keys)
        if (d.path.length > k.path.length && d.path.slice(0, k.path.length).join('.') === k.path.join('.'))
          dropped.add(d.path.join('.'));
    } else k.leaf = false;
  }
  return keys
    .filter((k) => !dropped.has(k.path.join('.')))
    .map(({ path, description, leaf }) => ({ path, description, leaf }));
}

/** The keys, or an error naming every key of values.yaml that has no description. */
export function documented(text: string): ValueKey[] {
  const keys = valueKeys(text);
  const missing = keys.filter((k) => k.description === '').map((k) => k.path.join('.'));
  if (missing.length > 0)
    throw new Error(`values.yaml: no comment above ${missing.join(', ')}: describe each key (tools/helm/readme.ts)`);
  return keys;
}

const cell = (s: string) => s.replaceAll('|', '\\|');

function defaultOf(values: unknown, path: string[]): string {
  let v: unknown = values;
  for (const p of path) v = (v as Record<string, unknown>)[p];
  return `\`${cell(JSON.stringify(v))}\``;
}

/** The table of values, between the markers. */
export function valuesTable(valuesText: string): string {
  const values = parse(valuesText) as unknown;
  const rows = documented(valuesText).map(
    (k) => `| \`${k.path.join('.')}\` | ${k.leaf ? defaultOf(values, k.path) : ''} | ${cell(k.description)} |`,
  );
  return [BEGIN, '', '| Key | Default | Description |', '|---|---|---|', ...rows, '', END].join('\n');
}

/** README.md with its table of values replaced by the one values.yaml gives. */
export function withValuesTable(readme: string, valuesText: string): string {
  const begin = readme.indexOf(BEGIN);
  const end = readme.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`README.md: the markers ${BEGIN} and ${END} are missing`);
  return `${readme.slice(0, begin)}${valuesTable(valuesText)}${readme.slice(end + END.length)}`;
}

if (import.meta.main) {
  const readmeFile = join(CHART_DIR, 'README.md');
  const next = withValuesTable(readFileSync(readmeFile, 'utf8'), readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8'));
  writeFileSync(readmeFile, next);
}
