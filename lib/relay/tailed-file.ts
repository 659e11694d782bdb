/**
 * Which file is which for the audit file tail: a followed file is its inode and its first bytes (a fingerprint,
 * as inodes are reused), so a truncated file, the copy a copy-truncate rotation left, and the file a saved position
 * names after a rename can be told apart and found again.
 */
import { createHash } from 'node:crypto';
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { LineSplitter } from '../kernel/line-splitter.ts';
import type { TailPosition } from './offset-store.ts';

export interface TailedFile {
  handle: FileHandle;
  inode: number;
  offset: number;
  splitter: LineSplitter;
  quietPolls: number;
  /** The file's first bytes (up to FINGERPRINT_BYTES), to tell it from a later file with the same inode. */
  head: Buffer;
}

/** The first bytes of a file that identify it beside its inode. */
export const FINGERPRINT_BYTES = 256;

export const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

export async function statOrUndefined(path: string): Promise<{ ino: number; size: number } | undefined> {
  try {
    return await stat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Whether the file still begins with the bytes read from its start (not truncated and written again). */
export async function startsWith(handle: FileHandle, head: Buffer): Promise<boolean> {
  if (head.length === 0) return true;
  const now = Buffer.allocUnsafe(head.length);
  const { bytesRead } = await handle.read(now, 0, head.length, 0);
  return bytesRead === head.length && now.equals(head);
}

/** Whether an opened file is the one a saved position describes: long enough, and the same first bytes. */
export async function sameFile(file: TailedFile, saved: TailPosition): Promise<boolean> {
  const size = (await file.handle.stat()).size;
  if (size < saved.offset) return false;
  if (saved.headSha256 === undefined || saved.headBytes === undefined) return true;
  return file.head.length >= saved.headBytes && sha256(file.head.subarray(0, saved.headBytes)) === saved.headSha256;
}

/**
 * The copy a copy-truncate rotation left beside `path`: a sibling (name starting with its name, another inode) at
 * least `resumeAt` bytes long whose first bytes are the truncated file's.
 */
export async function findCopy(path: string, truncated: TailedFile, resumeAt: number): Promise<string | undefined> {
  const dir = dirname(path);
  const name = basename(path);
  const headSha = sha256(truncated.head);
  const siblings: Array<{ candidate: string; mtimeMs: number }> = [];
  for (const candidate of await readdir(dir)) {
    if (candidate === name || !candidate.startsWith(name)) continue;
    const found = await stat(join(dir, candidate)).catch(() => undefined);
    if (found && found.ino !== truncated.inode && found.size >= resumeAt)
      siblings.push({ candidate, mtimeMs: found.mtimeMs });
  }
  // The newest first: an older copy with the same first bytes holds older lines.
  for (const { candidate } of siblings.sort((a, b) => b.mtimeMs - a.mtimeMs)) {
    const handle = await open(join(dir, candidate), 'r');
    try {
      const head = Buffer.alloc(truncated.head.length);
      const { bytesRead } = head.length > 0 ? await handle.read(head, 0, head.length, 0) : { bytesRead: 0 };
      if (bytesRead === head.length && sha256(head) === headSha) return join(dir, candidate);
    } finally {
      await handle.close();
    }
  }
  return undefined;
}

/** A rotated sibling of `path` (same directory, name starting with its name) that is the saved file. */
export async function findByInode(path: string, saved: TailPosition): Promise<string | undefined> {
  const dir = dirname(path);
  const name = basename(path);
  for (const candidate of await readdir(dir)) {
    if (candidate === name || !candidate.startsWith(name)) continue;
    const found = await statOrUndefined(join(dir, candidate));
    if (found?.ino !== saved.inode) continue;
    const handle = await open(join(dir, candidate), 'r');
    try {
      const head = Buffer.alloc(saved.headBytes ?? 0);
      const { bytesRead } = head.length > 0 ? await handle.read(head, 0, head.length, 0) : { bytesRead: 0 };
      if (saved.headSha256 === undefined || (bytesRead === head.length && sha256(head) === saved.headSha256))
        return join(dir, candidate);
    } finally {
      await handle.close();
    }
  }
  return undefined;
}
