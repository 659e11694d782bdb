/**
 * Debian packages as the image's source of glibc, the C++ runtime and the CA bundle: downloaded once into the cache
 * and checked against the SHA-256 that tools/image/debian-packages.json pins, then read (ar, then the data tarball)
 * without dpkg. xz and zstd data are decompressed by the `xz` / `zstd` commands.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { readTar, type TarEntry } from './tar.ts';

export interface PinnedPackage {
  name: string;
  version: string;
  archive: string;
  pool: string;
  sha256: string;
}

export const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** The package's bytes, from the cache or downloaded into it; throws unless they match the pinned SHA-256. */
export async function fetchPackage(pkg: PinnedPackage, cacheDir: string): Promise<Buffer> {
  const file = join(cacheDir, `${pkg.sha256}.deb`);
  if (existsSync(file)) {
    const cached = await readFile(file);
    if (sha256(cached) === pkg.sha256) return cached;
  }
  const url = `${pkg.archive}/${pkg.pool}`;
  const response = await fetch(url);
  if (!response.ok) {
    throw new Error(
      `cannot download ${pkg.name} ${pkg.version} from ${url}: HTTP ${response.status} (a version the mirror no longer carries is on https://snapshot.debian.org; update tools/image/debian-packages.json)`,
    );
  }
  const data = Buffer.from(await response.arrayBuffer());
  const actual = sha256(data);
  if (actual !== pkg.sha256)
    throw new Error(
      `${pkg.name} ${pkg.version} from ${url} has SHA-256 ${actual}, tools/image/debian-packages.json pins ${pkg.sha256}: not using it`,
    );
  await mkdir(cacheDir, { recursive: true });
  await writeFile(`${file}.${process.pid}`, data);
  await rename(`${file}.${process.pid}`, file);
  return data;
}

/** The members of an ar archive (a .deb), by name. */
function arMembers(deb: Buffer): Map<string, Buffer> {
  if (deb.subarray(0, 8).toString('latin1') !== '!<arch>\n') throw new Error('not a Debian package (no ar header)');
  const members = new Map<string, Buffer>();
  let at = 8;
  while (at + 60 <= deb.length) {
    const name = deb
      .subarray(at, at + 16)
      .toString('latin1')
      .trim()
      .replace(/\/$/, '');
    const size = parseInt(
      deb
        .subarray(at + 48, at + 58)
        .toString('latin1')
        .trim(),
      10,
    );
    members.set(name, deb.subarray(at + 60, at + 60 + size));
    at += 60 + size + (size % 2);
  }
  return members;
}

/** The files a package installs (its data tarball), paths relative to /. */
export function packageFiles(deb: Buffer): TarEntry[] {
  const members = arMembers(deb);
  const name = [...members.keys()].find((n) => n.startsWith('data.tar'));
  if (!name) throw new Error('Debian package without data.tar');
  const data = members.get(name)!;
  const tar =
    name === 'data.tar'
      ? data
      : name === 'data.tar.gz'
        ? gunzipSync(data)
        : name === 'data.tar.xz'
          ? execFileSync('xz', ['-dc'], { input: data, maxBuffer: 1 << 30 })
          : name === 'data.tar.zst'
            ? execFileSync('zstd', ['-dc'], { input: data, maxBuffer: 1 << 30 })
            : undefined;
  if (!tar) throw new Error(`Debian package with ${name}: not supported`);
  return readTar(tar);
}
