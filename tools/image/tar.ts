/**
 * Kept by hand rather than tar-stream: every caller builds a whole layer in memory to hash it, so a synchronous
 * writer and reader of 140 lines (checked against GNU tar in the tests) beat an asynchronous stream API and a new
 * direct dependency.
 *
 * The tar archives of the image: written byte for byte the same from the same entries (ustar headers, numeric owners
 * with empty user and group names, the order given), and read back from Debian packages (ustar, GNU long names, pax
 * paths). Only what the image needs: regular files, directories, symbolic and hard links.
 */

export type TarEntry =
  | { type: 'file'; path: string; mode: number; uid: number; gid: number; mtime: number; data: Buffer }
  | { type: 'dir'; path: string; mode: number; uid: number; gid: number; mtime: number }
  | {
      type: 'symlink' | 'hardlink';
      path: string;
      target: string;
      mode: number;
      uid: number;
      gid: number;
      mtime: number;
    };

const BLOCK = 512;
const TYPEFLAG = { file: '0', hardlink: '1', symlink: '2', dir: '5' } as const;

function octal(value: number, width: number): string {
  const text = value.toString(8);
  if (text.length > width - 1) throw new Error(`tar: ${value} does not fit a ${width}-byte field`);
  return text.padStart(width - 1, '0') + '\0';
}

/** ustar's name and prefix for a path (relative, no leading slash; directories end in `/`). */
function splitName(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let i = path.length - 1; i > 0; i--) {
    if (path[i] !== '/' || i === path.length - 1) continue;
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name !== '') return { name, prefix };
  }
  throw new Error(`tar: path too long for ustar: ${path}`);
}

function header(entry: TarEntry): Buffer {
  const block = Buffer.alloc(BLOCK);
  const name = entry.type === 'dir' && !entry.path.endsWith('/') ? `${entry.path}/` : entry.path;
  if (name.startsWith('/') || name === '') throw new Error(`tar: paths are relative: ${JSON.stringify(entry.path)}`);
  const { name: short, prefix } = splitName(name);
  const size = entry.type === 'file' ? entry.data.length : 0;
  const link = entry.type === 'symlink' || entry.type === 'hardlink' ? entry.target : '';
  if (Buffer.byteLength(link) > 100) throw new Error(`tar: link target too long for ustar: ${link}`);
  block.write(short, 0, 100, 'utf8');
  block.write(octal(entry.mode & 0o7777, 8), 100, 'ascii');
  block.write(octal(entry.uid, 8), 108, 'ascii');
  block.write(octal(entry.gid, 8), 116, 'ascii');
  block.write(octal(size, 12), 124, 'ascii');
  block.write(octal(entry.mtime, 12), 136, 'ascii');
  block.write('        ', 148, 'ascii');
  block.write(TYPEFLAG[entry.type], 156, 'ascii');
  block.write(link, 157, 100, 'utf8');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  block.write(octal(0, 8), 329, 'ascii');
  block.write(octal(0, 8), 337, 'ascii');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

/** One archive of the entries, in the order given (callers sort), ended by two zero blocks. */
export function writeTar(entries: readonly TarEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    parts.push(header(entry));
    if (entry.type === 'file') {
      parts.push(entry.data);
      const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK;
      if (pad) parts.push(Buffer.alloc(pad));
    }
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(parts);
}

const text = (block: Buffer, start: number, length: number): string => {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
};
const number = (block: Buffer, start: number, length: number): number => {
  // GNU base-256 for large values: the high bit of the first byte set.
  if ((block[start]! & 0x80) !== 0) {
    let value = 0;
    for (let i = start + 1; i < start + length; i++) value = value * 256 + block[i]!;
    return value;
  }
  const digits = text(block, start, length).trim();
  return digits === '' ? 0 : parseInt(digits, 8);
};

function paxRecords(data: Buffer): Record<string, string> {
  const records: Record<string, string> = {};
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space === -1) break;
    const length = parseInt(data.subarray(at, space).toString('ascii'), 10);
    if (!Number.isInteger(length) || length <= 0) throw new Error('tar: malformed pax header');
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    records[record.slice(0, eq)] = record.slice(eq + 1);
    at += length;
  }
  return records;
}

/** The entries of an uncompressed archive; paths lose a leading `./` and `/`, directories their trailing `/`. */
export function readTar(archive: Buffer): TarEntry[] {
  const entries: TarEntry[] = [];
  let at = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax: Record<string, string> = {};
  while (at + BLOCK <= archive.length) {
    const block = archive.subarray(at, at + BLOCK);
    if (block.every((b) => b === 0)) break;
    const typeflag = String.fromCharCode(block[156]!);
    const size = number(block, 124, 12);
    const data = archive.subarray(at + BLOCK, at + BLOCK + size);
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (typeflag === 'L') {
      longName = text(data, 0, data.length);
      continue;
    }
    if (typeflag === 'K') {
      longLink = text(data, 0, data.length);
      continue;
    }
    if (typeflag === 'x') {
      pax = paxRecords(data);
      continue;
    }
    if (typeflag === 'g') continue;
    const prefix = text(block, 345, 155);
    const rawPath = pax.path ?? longName ?? (prefix ? `${prefix}/${text(block, 0, 100)}` : text(block, 0, 100));
    const target = pax.linkpath ?? longLink ?? text(block, 157, 100);
    pax = {};
    longName = longLink = undefined;
    const path = rawPath.replace(/^(\.\/|\/)+/, '').replace(/\/+$/, '');
    const common = {
      path,
      mode: number(block, 100, 8),
      uid: number(block, 108, 8),
      gid: number(block, 116, 8),
      mtime: number(block, 136, 12),
    };
    if (typeflag === '0' || typeflag === '\0' || typeflag === '7')
      entries.push({ type: 'file', ...common, data: Buffer.from(data) });
    else if (typeflag === '5') {
      if (path !== '') entries.push({ type: 'dir', ...common });
    } else if (typeflag === '2') entries.push({ type: 'symlink', ...common, target });
    else if (typeflag === '1') entries.push({ type: 'hardlink', ...common, target: target.replace(/^(\.\/|\/)+/, '') });
    else throw new Error(`tar: entry type ${JSON.stringify(typeflag)} of ${path} is not supported`);
  }
  return entries;
}
