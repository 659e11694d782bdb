/**
 * No command prints a warning that is not the user's business: run with the project's Node exactly as bin/vault-rollout
 * and bin/start do, but without --disable-warning, so an experimental or deprecated API would show here first. (The
 * `npm warn Unknown user config "nodedir"` line some machines print comes from npm reading ~/.npmrc before anything of
 * this project runs; bin/vault-rollout does not go through npm. docs/how-to/troubleshooting.md.)
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../helpers.ts';

const run = promisify(execFile);
const node = join(repoRoot, 'node_modules/.bin/node');

async function stderrOf(args: string[]): Promise<string> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('VITEST')),
  );
  try {
    return (await run(node, args, { cwd: repoRoot, env, timeout: 50_000 })).stderr;
  } catch (e) {
    return (e as { stderr?: string }).stderr ?? String(e);
  }
}

const WARNING = /Warning|npm warn|experimental/i;

// main.ts imports every command statically, so --help loads every module the CLI has: an experimental API used at
// import time would warn there; validate, schema and plan run the paths that read files and plan.
describe('no warnings', () => {
  it.each([
    [['--help']],
    [['validate', 'infra/routes/example.yaml']],
    [['plan', '--routes', 'infra/routes/example.yaml', '--input', 'test/fixtures/demo/rotation.ndjson']],
    [['import', '--no-such-option']],
  ])('vault-rollout %j', { timeout: 60_000 }, async (args) => {
    expect(await stderrOf(['lib/cli/main.ts', ...args])).not.toMatch(WARNING);
  });
});
