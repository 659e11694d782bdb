/**
 * The README's first Install command on a fresh clone: `git clone` of this checkout's HEAD, nothing installed, the
 * system's Node (whatever version) first on PATH, then `npm run pack`. The script must install the dependencies and
 * the pinned Node 24 itself (bin/setup) before it runs any TypeScript. npm ci reads the user's npm cache first
 * (prefer-offline), as a second clone on the same machine would. In the integration project because it runs npm.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRepoFile, repoRoot } from '../helpers.ts';

const pkg = JSON.parse(readRepoFile('package.json')) as { name: string; version: string };
const work = mkdtempSync(join(tmpdir(), 'vault-rollout-fresh-clone-test-'));
const clone = join(work, 'clone');
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The checkout's node_modules/.bin kept off PATH: the clone must find its own Node. */
const systemPath = (process.env.PATH ?? '/usr/bin:/bin')
  .split(':')
  .filter((dir) => !dir.startsWith(repoRoot))
  .join(':');
const said = (r: SpawnSyncReturns<string>) =>
  `${r.error?.message ?? `exit ${r.status}`}\n${r.stdout}\n${r.stderr.slice(-4000)}`;

describe('a fresh clone', () => {
  it('npm run pack installs what it needs (bin/setup) and makes the tarball, with the system Node first on PATH', () => {
    const cloned = spawnSync('git', ['clone', '--quiet', '--no-hardlinks', repoRoot, clone], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(cloned.status, said(cloned)).toBe(0);
    expect(existsSync(join(clone, 'node_modules'))).toBe(false);
    const env = {
      ...process.env,
      PATH: systemPath,
      npm_config_prefer_offline: 'true',
      npm_config_update_notifier: 'false',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
    };
    const packed = spawnSync('npm', ['run', '--silent', 'pack', '--', '--pack-destination', join(work, 'out')], {
      cwd: clone,
      env,
      encoding: 'utf8',
      timeout: 900_000,
    });
    expect(packed.status, said(packed)).toBe(0);
    expect(packed.stdout.trim().split('\n').at(-1)).toBe(join(work, 'out', `${pkg.name}-${pkg.version}.tgz`));
    expect(existsSync(join(work, 'out', `${pkg.name}-${pkg.version}.tgz`))).toBe(true);
  }, 1_000_000);
});
