import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateRawSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { readZipEntries, ZipFormatError } from '../../../lib/deploy/zip-entries.ts';

/** A minimal zip writer for the vectors: stored or deflated entries, Unix "made by". */
function makeZip(
  files: Array<{ name: string; data: Buffer; method?: 0 | 8; mode?: number; flags?: number }>,
  comment = '',
): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const f of files) {
    const method = f.method ?? 8;
    const body = method === 8 ? deflateRawSync(f.data) : f.data;
    const name = Buffer.from(f.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(f.flags ?? 0, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(f.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(f.flags ?? 0, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(f.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(((f.mode ?? 0o100644) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  end.writeUInt16LE(Buffer.byteLength(comment), 20);
  return Buffer.concat([...locals, cd, end, Buffer.from(comment)]);
}

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('readZipEntries', () => {
  it.each([
    ['a deflated entry', [{ name: 'functions/http.mjs', data: Buffer.from('export const handler = 1;\n'.repeat(50)) }]],
    ['a stored entry', [{ name: 'infra/routes/dev.yaml', data: Buffer.from('clusters: {}\n'), method: 0 as const }]],
    ['an empty file', [{ name: 'empty', data: Buffer.alloc(0), method: 0 as const }]],
    [
      'several entries, in order',
      [
        { name: 'a.mjs', data: Buffer.from('a') },
        { name: 'b/c.yaml', data: Buffer.from('c'), method: 0 as const },
      ],
    ],
  ])('reads %s', (_name, files) => {
    const entries = readZipEntries(makeZip(files));
    expect(entries.map((e) => [e.name, e.data.toString()])).toEqual(files.map((f) => [f.name, f.data.toString()]));
  });

  it('skips directories, reads Unix modes and finds the directory behind an archive comment', () => {
    const zip = makeZip(
      [
        { name: 'functions/', data: Buffer.alloc(0), method: 0, mode: 0o40755 },
        { name: 'functions/run', data: Buffer.from('#!/bin/sh\n'), mode: 0o100755 },
      ],
      'made by a test',
    );
    expect(readZipEntries(zip)).toEqual([{ name: 'functions/run', mode: 0o755, data: Buffer.from('#!/bin/sh\n') }]);
  });

  it.each([
    ['not a zip', Buffer.from('hello, world, this is not an archive at all'), /no end of central directory/],
    ['an encrypted entry', makeZip([{ name: 'x', data: Buffer.from('x'), flags: 1 }]), /x: encrypted/],
    [
      'an unknown compression method',
      (() => {
        const z = makeZip([{ name: 'x', data: Buffer.from('x'), method: 0 }]);
        z.writeUInt16LE(12, 30 + 1 + 1 + 10);
        return z;
      })(),
      /compression method 12/,
    ],
    [
      'a truncated central directory',
      (() => {
        const z = makeZip([{ name: 'x', data: Buffer.from('x'), method: 0 }]);
        z.writeUInt32LE(0, 30 + 1 + 1);
        return z;
      })(),
      /bad central directory entry 0/,
    ],
  ])('rejects %s', (_name, zip, message) => {
    expect(() => readZipEntries(zip)).toThrow(ZipFormatError);
    expect(() => readZipEntries(zip)).toThrow(message);
  });

  it('reads what the zip command writes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vr-zip-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'functions'));
    writeFileSync(join(dir, 'functions', 'worker.mjs'), 'export const handler = async () => ({});\n'.repeat(100));
    chmodSync(join(dir, 'functions', 'worker.mjs'), 0o644);
    // The zip command is a prerequisite of the unit tests (CONTRIBUTING): without it this fails, it never passes silently.
    execFileSync('zip', ['-q', '-r', 'out.zip', 'functions'], { cwd: dir });
    const entries = readZipEntries(readFileSync(join(dir, 'out.zip')));
    expect(entries.map((e) => [e.name, e.data.length, e.mode])).toEqual([['functions/worker.mjs', 4100, 0o644]]);
  });
});
