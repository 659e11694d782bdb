/**
 * Reads the files of a zip archive (a Lambda deployment package) into memory: enough of the format for the
 * archives osls and serverless-esbuild write — stored or deflated entries, no encryption, no zip64, no multi-disk —
 * so the packaging test and the bundle benchmark need no `unzip` binary or extra package.
 */
import { inflateRawSync } from 'node:zlib';

export class ZipFormatError extends Error {
  override readonly name = 'ZipFormatError';
}

const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const CENTRAL_FILE_HEADER = 0x02014b50;
const LOCAL_FILE_HEADER = 0x04034b50;
const STORED = 0;
const DEFLATED = 8;

export interface ZipEntry {
  name: string;
  /** Unix permission bits when the archive was made on Unix, else undefined. */
  mode?: number;
  data: Buffer;
}

function findEndOfCentralDirectory(zip: Buffer): number {
  // The record is 22 bytes plus a comment of at most 65535 bytes, at the very end.
  const lowest = Math.max(0, zip.length - 22 - 0xffff);
  for (let at = zip.length - 22; at >= lowest; at--) if (zip.readUInt32LE(at) === END_OF_CENTRAL_DIRECTORY) return at;
  throw new ZipFormatError('not a zip archive: no end of central directory record');
}

/** Every file entry (directories skipped), in archive order. */
export function readZipEntries(zip: Buffer): ZipEntry[] {
  const end = findEndOfCentralDirectory(zip);
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const entries: ZipEntry[] = [];
  for (let i = 0; i < count; i++) {
    if (at + 46 > zip.length || zip.readUInt32LE(at) !== CENTRAL_FILE_HEADER)
      throw new ZipFormatError(`bad central directory entry ${i}`);
    const flags = zip.readUInt16LE(at + 8);
    const method = zip.readUInt16LE(at + 10);
    const compressedSize = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const madeBy = zip.readUInt16LE(at + 4) >> 8;
    const externalAttributes = zip.readUInt32LE(at + 38);
    const localOffset = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    at += 46 + nameLength + extraLength + commentLength;

    if (name.endsWith('/')) continue;
    if (flags & 0x1) throw new ZipFormatError(`${name}: encrypted entries are not supported`);
    if (compressedSize === 0xffffffff || localOffset === 0xffffffff)
      throw new ZipFormatError(`${name}: zip64 entries are not supported`);
    if (zip.readUInt32LE(localOffset) !== LOCAL_FILE_HEADER) throw new ZipFormatError(`${name}: bad local file header`);
    const dataStart = localOffset + 30 + zip.readUInt16LE(localOffset + 26) + zip.readUInt16LE(localOffset + 28);
    const raw = zip.subarray(dataStart, dataStart + compressedSize);
    let data: Buffer;
    if (method === STORED) data = Buffer.from(raw);
    else if (method === DEFLATED) data = inflateRawSync(raw);
    else throw new ZipFormatError(`${name}: compression method ${method} is not supported`);
    if (data.length !== size) throw new ZipFormatError(`${name}: expected ${size} bytes, got ${data.length}`);
    const unixMode = externalAttributes >>> 16;
    entries.push({ name, data, ...(madeBy === 3 && unixMode !== 0 ? { mode: unixMode & 0o7777 } : {}) });
  }
  return entries;
}
