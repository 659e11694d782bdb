/**
 * What code a benchmark measures, and whether a figure is older than that code.
 *
 * The code of a benchmark is the closure of the relative imports of its entry files (the benchmark's own file, the
 * scripts it runs in other processes, and `lib/cli/main.ts` where it runs serve or the relay), plus
 * `package-lock.json` (the dependencies run too). The test harness (`test/`: the clusters, OpenBao) is not followed:
 * it sets the stage, it is not what is measured. Its digest is a SHA-256 over each file's path and the git blob hash of what it runs
 * (its tokens: comments and layout do not count).
 * `npm run bench` records that digest with each figure, beside the commit it ran at; a figure is stale when the
 * digest of the same code today differs: a file of the closure changed, or the closure gained or lost a file. The
 * comparison is by content, so a figure measured on uncommitted changes is not stale once they are committed as
 * measured.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Entry files per benchmark (paths from the repository's root), beyond `bench/<file>` imported by bench/run.ts. */
export const BENCH_ENTRIES: Record<string, readonly string[]> = {
  plan: ['bench/plan-bench.ts', 'bench/plan-memory-child.ts'],
  fanout: ['bench/fanout-bench.ts'],
  fleet: ['bench/fleet-bench.ts'],
  mass: ['bench/mass-rotation-bench.ts'],
  slots: ['bench/max-unavailable-bench.ts'],
  bundle: [
    'bench/bundle-bench.ts',
    'bench/table-load-child.ts',
    'bench/cold-floor/http.ts',
    'bench/cold-floor/worker.ts',
    'bench/cold-floor/logs.ts',
    'infra/serverless/package.js',
    'functions/http.ts',
    'functions/worker.ts',
    'functions/logs.ts',
  ],
  e2e: ['bench/e2e-bench.ts', 'lib/cli/main.ts'],
  'e2e-patch-only': ['bench/e2e-bench.ts', 'lib/cli/main.ts'],
  behind: ['bench/never-wait-bench.ts', 'lib/cli/main.ts'],
  wake: ['bench/never-wait-bench.ts', 'lib/cli/main.ts'],
  'lambda-cost': ['bench/never-wait-bench.ts'],
  health: ['bench/rollout-health-bench.ts'],
  intake: ['bench/intake-bench.ts', 'lib/cli/main.ts'],
  device: ['bench/intake-bench.ts', 'lib/cli/main.ts'],
  status: ['bench/status-bench.ts'],
  'status-page': ['bench/status-page-bench.ts'],
  reconcile: ['bench/reconcile-bench.ts'],
  eso: ['bench/eso-bench.ts', 'lib/cli/main.ts'],
  'go-regexp': ['bench/go-regexp-bench.ts'],
};

/** Reads a file of the repository by its path from the root; undefined when it does not exist. */
export type ReadFile = (path: string) => string | undefined;

export const readWorkingTree: ReadFile = (path) => {
  const file = join(REPO, path);
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
};

/** The files as they were at `commit` (for figures measured before commits were recorded). */
export const readAtCommit =
  (commit: string): ReadFile =>
  (path) => {
    try {
      return execFileSync('git', ['show', `${commit}:${path}`], {
        cwd: REPO,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        maxBuffer: 64 * 2 ** 20,
      });
    } catch {
      return undefined;
    }
  };

// Relative specifiers of static and dynamic imports, and of `new URL('./x.ts', import.meta.url)` (scripts run as
// child processes).
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*|new URL\(\s*)['"](\.\.?\/[^'"]+)['"]/g;

/** The files of a benchmark's code: the import closure of its entries, outside test/, and the lock file. */
export function codeFiles(benchmark: string, read: ReadFile): string[] {
  const entries = BENCH_ENTRIES[benchmark];
  if (entries === undefined) throw new Error(`no entry files for benchmark ${benchmark} in bench/provenance.ts`);
  const seen = new Set<string>();
  const queue = [...entries];
  const texts = new Map<string, string>();
  while (queue.length > 0) {
    const path = queue.pop() as string;
    if (seen.has(path) || path.startsWith('test/')) continue;
    seen.add(path);
    const text = read(path);
    if (text === undefined) continue;
    texts.set(path, text);
    for (const m of text.matchAll(SPECIFIER)) {
      const target = normalize(join(dirname(path), m[1] as string));
      if (!target.startsWith('..') && /\.(ts|js|mjs|json)$/.test(target)) queue.push(target);
    }
  }
  const files = [...texts.keys()];
  if (read('package-lock.json') !== undefined) files.push('package-lock.json');
  return files.sort();
}

const blobHash = (text: string): string => {
  const body = Buffer.from(text, 'utf8');
  return createHash('sha1')
    .update(Buffer.concat([Buffer.from(`blob ${body.length}\0`), body]))
    .digest('hex');
};

/**
 * What a source file runs: its tokens, one space apart, without comments or layout, so that wrapping a comment or
 * letting the formatter move a line does not make a figure stale. Other files (the lock file, JSON) count whole.
 */
export function runnableText(path: string, text: string): string {
  if (!/\.(ts|js|mjs)$/.test(path)) return text;
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, true, ts.LanguageVariant.Standard, text);
  const tokens: string[] = [];
  // Open braces and template placeholders: a `}` that closes a placeholder goes on with the template's text.
  const open: ('brace' | 'template')[] = [];
  let previous: ts.SyntaxKind | undefined;
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    // A slash where no value ends begins a regular expression (whose `//` or `}` is no comment, no brace).
    if ((kind === ts.SyntaxKind.SlashToken || kind === ts.SyntaxKind.SlashEqualsToken) && !endsValue(previous))
      kind = scanner.reScanSlashToken();
    if (kind === ts.SyntaxKind.OpenBraceToken) open.push('brace');
    else if (kind === ts.SyntaxKind.TemplateHead) open.push('template');
    else if (kind === ts.SyntaxKind.CloseBraceToken && open.pop() === 'template') {
      kind = scanner.reScanTemplateToken(false);
      if (kind === ts.SyntaxKind.TemplateMiddle) open.push('template');
    }
    tokens.push(scanner.getTokenText());
    previous = kind;
  }
  return tokens.join(' ');
}

/** Whether a token can end a value, so that a slash after it divides. */
const endsValue = (kind: ts.SyntaxKind | undefined): boolean =>
  kind !== undefined &&
  (kind === ts.SyntaxKind.Identifier ||
    kind === ts.SyntaxKind.NumericLiteral ||
    kind === ts.SyntaxKind.BigIntLiteral ||
    kind === ts.SyntaxKind.StringLiteral ||
    kind === ts.SyntaxKind.RegularExpressionLiteral ||
    kind === ts.SyntaxKind.NoSubstitutionTemplateLiteral ||
    kind === ts.SyntaxKind.TemplateTail ||
    kind === ts.SyntaxKind.CloseParenToken ||
    kind === ts.SyntaxKind.CloseBracketToken ||
    kind === ts.SyntaxKind.CloseBraceToken ||
    kind === ts.SyntaxKind.PlusPlusToken ||
    kind === ts.SyntaxKind.MinusMinusToken ||
    kind === ts.SyntaxKind.ThisKeyword ||
    kind === ts.SyntaxKind.TrueKeyword ||
    kind === ts.SyntaxKind.FalseKeyword ||
    kind === ts.SyntaxKind.NullKeyword);

/** SHA-256 over "path blob-hash" of what each file of the benchmark's code runs (`runnableText`). */
export function codeDigest(benchmark: string, read: ReadFile): string {
  const lines = codeFiles(benchmark, read).map((p) => `${p} ${blobHash(runnableText(p, read(p) ?? ''))}`);
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/** The commit checked out, and whether any file of `files` differs from it (measured on uncommitted changes). */
export function checkout(files: readonly string[] = []): { commit: string; uncommitted: boolean } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: REPO, encoding: 'utf8' }).trim();
  const commit = git('rev-parse', 'HEAD');
  const uncommitted = files.length > 0 && git('status', '--porcelain', '--', ...files) !== '';
  return { commit, uncommitted };
}

export const repoPath = (file: string): string => relative(REPO, file);
