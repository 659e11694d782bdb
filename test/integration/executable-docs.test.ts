/**
 * The documentation works as written, on a fresh clone: the shell blocks of README.md and of the tutorials, then every
 * how-to block marked `<!-- run -->`, run in order in a clone of HEAD in a temporary directory, each as pasted into
 * `sh -e` at the clone's root, the way a newcomer who has Node.js 24 (and nothing else of the project) would. A block
 * followed by an `<!-- output -->` text block must print each of its lines, in order. Blocks marked `<!-- not-run:
 * <reason> -->` are not run, but their `vault-rollout` commands still parse with the real CLI specs (as in
 * test/unit/docs/commands-in-docs.test.ts, here on the clone). The convention: CONTRIBUTING, "Executable
 * documentation"; the parsing: test/docs/blocks.ts.
 *
 * `npm install -g` goes into a temporary prefix (npm_config_prefix), whose bin/ is on PATH; npm uses its usual cache
 * and prefers it (npm_config_prefer_offline), so warm caches make the clone's `npm ci` a copy, not a download.
 * VAULT_ROLLOUT_DOCS_REF=<commit> runs the docs of another commit (its blocks, its scripts) with this file's rules.
 * In the integration project because it clones, installs and packs; it starts no cluster.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvocation, codeBlocks, invocations, isShell, missingLines, readingOrder } from '../docs/blocks.ts';
import { steps } from '../docs/blocks.ts';
import type { Step } from '../docs/blocks.ts';
import { repoRoot } from '../helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-executable-docs-'));
const clone = join(work, 'clone');
const prefix = join(work, 'prefix');
/** `node` alone: the project's Node 24, as a user who installed Node.js 24 has it; nothing else of the checkout. */
const nodeOnly = join(work, 'node');
const BLOCK_TIMEOUT_MS = 300_000;
/** What a failed block's message shows of its output: the end, where the error is. */
const TAIL = 6000;

function git(args: string[], cwd: string): string {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.error?.message ?? `exit ${r.status}`}\n${r.stderr}`);
  return r.stdout.trim();
}

/** The run's own settings a block must not inherit: npm's and vitest's, Node's loader options and coverage. */
const NOT_INHERITED = /^(npm_|VITEST|NODE_OPTIONS$|NODE_V8_COVERAGE$|INIT_CWD$)/i;

/** The environment of every block: the run's, less NOT_INHERITED (the CA bundle and the npm cache stay). */
function blockEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!NOT_INHERITED.test(k)) env[k] = v;
  return {
    ...env,
    PATH: `${nodeOnly}:${join(prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin`,
    npm_config_prefix: prefix,
    npm_config_cache: process.env.npm_config_cache ?? join(homedir(), '.npm'),
    npm_config_prefer_offline: 'true',
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  };
}

function stepName(file: string, { block, expected }: Step): string {
  if (block.marker?.kind === 'file') return `${file}:${block.line} writes ${block.marker.path}`;
  return `${file}:${block.line} runs as written${expected ? ' and prints what the page shows' : ''}`;
}

/** Runs one step in the clone; throws (an expect) when it fails or does not print what the page shows. */
function runStep(file: string, { block, expected }: Step): void {
  if (block.marker?.kind === 'file') {
    mkdirSync(dirname(join(clone, block.marker.path)), { recursive: true });
    writeFileSync(join(clone, block.marker.path), `${block.text}\n`);
    return;
  }
  const r = spawnSync('sh', ['-e', '-c', `exec 2>&1\n${block.text}`], {
    cwd: clone,
    env: blockEnv(),
    encoding: 'utf8',
    timeout: BLOCK_TIMEOUT_MS,
    maxBuffer: 64 * 1024 * 1024,
  });
  ran++;
  const printed = r.stdout ?? '';
  const where = `${file}:${block.line} (${r.error?.message ?? `exit ${r.status}`}) printed:\n${printed.slice(-TAIL)}`;
  expect(r.status, where).toBe(0);
  if (expected) expect(missingLines(expected.text, printed), where).toEqual([]);
}

// The tests are collected before the clone exists, so the pages are read from the commit being cloned, through git.
const ref = git(['rev-parse', process.env.VAULT_ROLLOUT_DOCS_REF ?? 'HEAD'], repoRoot);
const listed = git(['ls-tree', '-r', '--name-only', ref, '--', 'README.md', 'docs/tutorials', 'docs/how-to'], repoRoot);
const pages = readingOrder(listed.split('\n'));
let ran = 0;
const started = Date.now();
/** The step that failed: the later ones fail too, unrun, since each may need what the earlier ones did. */
let failedAt: string | undefined;

beforeAll(() => {
  git(['clone', '--quiet', '--no-checkout', repoRoot, clone], work);
  git(['checkout', '--quiet', '--detach', ref], clone);
  mkdirSync(nodeOnly);
  symlinkSync(realpathSync(join(repoRoot, 'node_modules/.bin/node')), join(nodeOnly, 'node'));
}, 120_000);
afterAll(() => {
  console.log(`executable docs: ${ran} blocks run in ${Math.round((Date.now() - started) / 1000)} s`);
  rmSync(work, { recursive: true, force: true });
});

describe('the documentation on a fresh clone', () => {
  it("every vault-rollout command of the clone's docs parses, run or not; every not-run block says why", () => {
    const wrong: string[] = [];
    for (const file of pages) {
      for (const block of codeBlocks(file, readFileSync(join(clone, file), 'utf8')).filter(isShell)) {
        const marker = block.marker;
        const unexplained = marker?.kind === 'not-run' && marker.reason.length < 8;
        if (unexplained) wrong.push(`${file}:${block.line}: say why it is not run`);
        for (const call of invocations(block)) {
          const error = checkInvocation(call.argv);
          if (error) wrong.push(`${call.file}:${call.line}: vault-rollout ${call.argv.join(' ')}: ${error}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('README.md runs its Install block: npm run pack, npm install -g, the installed vault-rollout', () => {
    const readme = steps('README.md', readFileSync(join(clone, 'README.md'), 'utf8')).map((s) => s.block.text);
    const install = readme.find((t) => t.includes('npm run pack'));
    expect(install).toMatch(/npm install -g /);
    expect(install).toMatch(/^vault-rollout --version$/m);
    expect(install).toMatch(/^vault-rollout plan /m);
  });

  for (const file of pages) {
    for (const step of steps(file, git(['show', `${ref}:${file}`], repoRoot))) {
      it(
        stepName(file, step),
        () => {
          expect(failedAt, `not run: ${failedAt} failed before it`).toBeUndefined();
          failedAt = `${file}:${step.block.line}`;
          runStep(file, step);
          failedAt = undefined;
        },
        BLOCK_TIMEOUT_MS + 10_000,
      );
    }
  }
});
