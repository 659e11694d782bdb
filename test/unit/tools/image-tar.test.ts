// The image's tar layers (tools/image/tar.ts, layerTar in build.ts): read back by our reader and by GNU tar with the
// owners, modes, times, links and order written; the same entries give the same bytes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { layerTar } from '../../../tools/image/build.ts';
import { readTar, writeTar, type TarEntry } from '../../../tools/image/tar.ts';

const long = `usr/share/${'d'.repeat(90)}/${'f'.repeat(60)}`;
const entries: TarEntry[] = [
  { type: 'dir', path: 'etc', mode: 0o755, uid: 0, gid: 0, mtime: 0 },
  {
    type: 'file',
    path: 'etc/passwd',
    mode: 0o644,
    uid: 0,
    gid: 0,
    mtime: 1_700_000_000,
    data: Buffer.from('root:x:0:0::/:/sbin/nologin\n'),
  },
  { type: 'dir', path: 'var/lib/state', mode: 0o700, uid: 65532, gid: 65532, mtime: 0 },
  {
    type: 'symlink',
    path: 'lib64/ld.so',
    target: '/lib/x86_64-linux-gnu/ld.so',
    mode: 0o777,
    uid: 0,
    gid: 0,
    mtime: 0,
  },
  { type: 'file', path: long, mode: 0o755, uid: 0, gid: 0, mtime: 0, data: Buffer.alloc(1025, 7) },
];

/** GNU tar's verbose listing of an archive: mode, owner, size and name per line. */
function gnuList(archive: Buffer): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'vr-tar-'));
  try {
    writeFileSync(join(dir, 'a.tar'), archive);
    return execFileSync('tar', ['--numeric-owner', '--full-time', '-tvf', join(dir, 'a.tar')], {
      encoding: 'utf8',
      env: { TZ: 'UTC', PATH: process.env.PATH },
    })
      .trim()
      .split('\n')
      .map((l) =>
        l
          .split(/\s+/)
          .filter((_, i) => i !== 3 && i !== 4)
          .join(' '),
      );
  } finally {
    rmSync(dir, { recursive: true });
  }
}

describe('writeTar', () => {
  it('is read back by readTar as written', () => {
    expect(readTar(writeTar(entries))).toEqual(entries);
  });

  it('is read by GNU tar with numeric owners, modes, sizes, link targets and long names (ustar prefix)', () => {
    expect(gnuList(writeTar(entries))).toEqual([
      'drwxr-xr-x 0/0 0 etc/',
      '-rw-r--r-- 0/0 28 etc/passwd',
      'drwx------ 65532/65532 0 var/lib/state/',
      'lrwxrwxrwx 0/0 0 lib64/ld.so -> /lib/x86_64-linux-gnu/ld.so',
      `-rwxr-xr-x 0/0 1025 ${long}`,
    ]);
  });

  it('gives the same bytes for the same entries', () => {
    expect(writeTar(entries).equals(writeTar(entries.map((e) => ({ ...e }))))).toBe(true);
  });

  it.each([
    [
      { type: 'file', path: '/abs', mode: 0o644, uid: 0, gid: 0, mtime: 0, data: Buffer.alloc(0) },
      'paths are relative',
    ],
    [
      { type: 'file', path: 'x'.repeat(101), mode: 0o644, uid: 0, gid: 0, mtime: 0, data: Buffer.alloc(0) },
      'path too long',
    ],
    [
      { type: 'symlink', path: 'l', target: 't'.repeat(101), mode: 0o777, uid: 0, gid: 0, mtime: 0 },
      'link target too long',
    ],
  ] as Array<[TarEntry, string]>)('refuses %#: %s', (entry, message) => {
    expect(() => writeTar([entry])).toThrow(message);
  });
});

describe('layerTar', () => {
  it('adds every parent directory (root, 0755), sorts by path, and gives owners and times as said', () => {
    const tar = layerTar(
      [
        { path: '/var/lib/vault-rollout', mode: 0o700, uid: 65532, gid: 65532, dir: true },
        { path: '/app/vault-rollout.mjs', mode: 0o644, data: Buffer.from('x') },
        { path: '/lib64/ld-linux-x86-64.so.2', mode: 0o777, target: '/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2' },
      ],
      42,
    );
    expect(readTar(tar).map((e) => [e.type, e.path, e.mode.toString(8), `${e.uid}:${e.gid}`, e.mtime])).toEqual([
      ['dir', 'app', '755', '0:0', 42],
      ['file', 'app/vault-rollout.mjs', '644', '0:0', 42],
      ['dir', 'lib64', '755', '0:0', 42],
      ['symlink', 'lib64/ld-linux-x86-64.so.2', '777', '0:0', 42],
      ['dir', 'var', '755', '0:0', 42],
      ['dir', 'var/lib', '755', '0:0', 42],
      ['dir', 'var/lib/vault-rollout', '700', '65532:65532', 42],
    ]);
  });
});
