/**
 * The environment-variable registry (lib/runtime/environment-variables.ts) against the sources: every variable lib/
 * and functions/ read is listed, and every listed one is read somewhere. docs/reference/environment.md is generated
 * from the registry, so a variable read without its entry would be missing from the reference.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENVIRONMENT_VARIABLES } from '../../../lib/runtime/environment-variables.ts';

const REPO = resolve(import.meta.dirname, '../../..');
const REGISTRY = 'lib/runtime/environment-variables.ts';
/** The registry's files: the names in them are its entries, not reads. */
const REGISTRY_FILES = [REGISTRY, 'lib/runtime/vault-environment-variables.ts'];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(REPO, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => relative(REPO, join(e.parentPath, e.name)))
    .filter((f) => !REGISTRY_FILES.includes(f));
}

/** Comments cite variables in prose; only code reads them. A `//` after `:` (a URL) is not a comment. */
const withoutComments = (text: string): string =>
  text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');

/**
 * The variables a source text reads: `env.X`, `env?.X`, `env['X']` (process.env, io.env, deps.env …), names
 * destructured from an env object, and string literals of a variable's name (passed to a lookup such as
 * `required(env, 'VAULT_ROLLOUT_ROUTES', …)` or kept in a constant).
 */
export function environmentReads(source: string): Set<string> {
  const text = withoutComments(source);
  const found = new Set<string>();
  for (const m of text.matchAll(/\benv\??\.([A-Z][A-Z0-9_]*)\b/g)) found.add(m[1]!);
  for (const m of text.matchAll(/\benv\??\.?\[\s*['"`]([A-Z][A-Z0-9_]*)['"`]\s*\]/g)) found.add(m[1]!);
  for (const m of text.matchAll(/\{([^{}]*)\}\s*=\s*(?:[\w.]+\.)?env\b/g)) {
    for (const n of m[1]!.matchAll(/(?:^|,)\s*([A-Z][A-Z0-9_]*)\s*(?=[:,=]|$)/g)) found.add(n[1]!);
  }
  for (const m of text.matchAll(/['"`]((?:VAULT|AWS|XDG|KUBERNETES|POWERTOOLS|LAMBDA)_[A-Z0-9_]+)['"`]/g))
    found.add(m[1]!);
  return found;
}

describe('environment variables', () => {
  const reads = new Map<string, string[]>();
  for (const file of [...sourceFiles('lib'), ...sourceFiles('functions')]) {
    for (const name of environmentReads(readFileSync(join(REPO, file), 'utf8')))
      reads.set(name, [...(reads.get(name) ?? []), file]);
  }
  const listed = new Set(ENVIRONMENT_VARIABLES.map((v) => v.name));

  it('finds the forms the code uses', () => {
    const sample = [
      'const a = process.env.VAULT_ROLLOUT_DLQ_URL;',
      "const b = io.env['AWS_REGION'];",
      'const { VAULT_CACERT: caCert, VAULT_CAPATH } = env;',
      "required(env, 'VAULT_ROLLOUT_ROUTES', 'the table');",
      '// env.NOT_READ in a comment',
      '/** `VAULT_NOT_READ` in prose */',
      "const url = 'https://sts.amazonaws.com'; const c = deps.env.HOME;",
    ].join('\n');
    expect([...environmentReads(sample)].sort()).toEqual([
      'AWS_REGION',
      'HOME',
      'VAULT_CACERT',
      'VAULT_CAPATH',
      'VAULT_ROLLOUT_DLQ_URL',
      'VAULT_ROLLOUT_ROUTES',
    ]);
  });

  it('lists every variable lib/ and functions/ read', () => {
    const missing = [...reads.keys()]
      .filter((n) => !listed.has(n))
      .sort()
      .map((n) => `${n} (read in ${reads.get(n)!.join(', ')})`);
    expect(missing, `add these to ${REGISTRY}, then npm run docs:reference`).toEqual([]);
  });

  it('lists only variables some source reads', () => {
    expect(
      [...listed].filter((n) => !reads.has(n)).sort(),
      `read nowhere in lib/ or functions/: remove them from ${REGISTRY}`,
    ).toEqual([]);
  });

  it('lists each variable once, with a description and a reader', () => {
    expect(ENVIRONMENT_VARIABLES.length).toBe(listed.size);
    for (const v of ENVIRONMENT_VARIABLES) {
      expect(v.description.length, v.name).toBeGreaterThan(5);
      expect(v.readBy.length, v.name).toBeGreaterThan(0);
    }
  });
});
