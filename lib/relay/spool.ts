/**
 * The on-disk spool: every batch is a file, written (write, fsync, rename, fsync of the directory) before its first
 * delivery attempt and deleted after the function took it, so neither a function outage nor a relay crash loses
 * what was received. Files are named by a sequence number, so a restart replays them in the order they arrived.
 *
 * Layout: `<seq:16 digits>.<audit|events>.ndjson`, each holding the batch's lines, newline-terminated — exactly
 * the body that is POSTed. `*.tmp` files are half-written batches of a crash and are removed at start.
 *
 * Bounds: `maxBytes` on disk (new batches beyond it are refused: the caller drops them with `spool-full`), and
 * `maxPendingBytes` in memory for batches waiting for the disk (beyond it: `overload`), so a slow disk never makes
 * memory grow without limit and never slows the sources down.
 */
import { mkdir, open, readdir, readFile, rename, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordKind } from './record-kind.ts';
import type { RelayLog } from '../kernel/log.ts';
import { errnoWords } from '../kernel/file-errors.ts';

export interface SpoolEntry {
  seq: number;
  kind: RecordKind;
  file: string;
  bytes: number;
}

export type AppendResult = 'spooled' | 'full' | 'overloaded' | 'failed';

export interface SpoolOptions {
  maxBytes: number;
  maxPendingBytes?: number;
  log: RelayLog;
}

const ENTRY_NAME = /^(\d{16})\.(audit|events)\.ndjson$/;
export const DEFAULT_MAX_PENDING_BYTES = 16 * 1024 * 1024;

export const spoolFileName = (seq: number, kind: RecordKind): string =>
  `${String(seq).padStart(16, '0')}.${kind}.ndjson`;

/** The batch body: its lines, each ending in a newline. */
export const batchBody = (lines: readonly string[]): string => `${lines.join('\n')}\n`;

export class Spool {
  readonly dir: string;
  readonly #maxBytes: number;
  readonly #maxPendingBytes: number;
  readonly #log: RelayLog;
  /** On disk, oldest first. */
  readonly #entries: SpoolEntry[] = [];
  #diskBytes = 0;
  #pendingBytes = 0;
  #nextSeq: number;
  /** Appends are written one after another, so files appear in sequence order. */
  #writeChain: Promise<void> = Promise.resolve();
  #waiters = new Set<() => void>();

  private constructor(dir: string, options: SpoolOptions, entries: SpoolEntry[]) {
    this.dir = dir;
    this.#maxBytes = options.maxBytes;
    this.#maxPendingBytes = options.maxPendingBytes ?? DEFAULT_MAX_PENDING_BYTES;
    this.#log = options.log;
    this.#entries.push(...entries);
    this.#diskBytes = entries.reduce((sum, e) => sum + e.bytes, 0);
    this.#nextSeq = (entries.at(-1)?.seq ?? 0) + 1;
  }

  /** Opens (creating) the spool directory and finds the batches a previous run left, in order. */
  static async open(dir: string, options: SpoolOptions): Promise<Spool> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const entries: SpoolEntry[] = [];
    for (const name of await readdir(dir)) {
      if (name.endsWith('.tmp')) {
        await rm(join(dir, name), { force: true });
        continue;
      }
      const match = ENTRY_NAME.exec(name);
      if (!match) continue;
      const file = join(dir, name);
      entries.push({ seq: Number(match[1]), kind: match[2] as RecordKind, file, bytes: (await stat(file)).size });
    }
    entries.sort((a, b) => a.seq - b.seq);
    return new Spool(dir, options, entries);
  }

  /** Batches on disk, oldest first. */
  entries(): readonly SpoolEntry[] {
    return this.#entries;
  }

  /** Bytes on disk plus bytes on their way to it. */
  get usedBytes(): number {
    return this.#diskBytes + this.#pendingBytes;
  }

  /**
   * Writes one batch; resolves once it is durable (or refused). The decision to refuse is taken at once, and the
   * sequence number too, so batches keep the order in which they were appended.
   */
  append(kind: RecordKind, lines: readonly string[]): Promise<AppendResult> {
    const body = batchBody(lines);
    const bytes = Buffer.byteLength(body);
    if (this.#diskBytes + this.#pendingBytes + bytes > this.#maxBytes) return Promise.resolve('full');
    if (this.#pendingBytes + bytes > this.#maxPendingBytes) return Promise.resolve('overloaded');
    this.#pendingBytes += bytes;
    const seq = this.#nextSeq++;
    const result = this.#writeChain.then(() => this.#write(seq, kind, body, bytes));
    this.#writeChain = result.then(() => undefined);
    return result;
  }

  /** Resolves when every append so far is on disk (or failed). */
  whenWritten(): Promise<void> {
    return this.#writeChain;
  }

  /** The oldest batch, waiting for one when the spool is empty; undefined once the signal aborts. */
  async next(signal: AbortSignal): Promise<SpoolEntry | undefined> {
    while (!signal.aborted) {
      const head = this.#entries[0];
      if (head) return head;
      await this.#changed(signal);
    }
    return undefined;
  }

  /** Resolves once nothing is spooled nor being written, or when the signal aborts. */
  async drained(signal: AbortSignal): Promise<void> {
    while (!signal.aborted && (this.#entries.length > 0 || this.#pendingBytes > 0)) await this.#changed(signal);
  }

  read(entry: SpoolEntry): Promise<string> {
    return readFile(entry.file, 'utf8');
  }

  /** Deletes a delivered (or dropped) batch. Only the oldest is ever removed: delivery is in order. */
  async remove(entry: SpoolEntry): Promise<void> {
    await unlink(entry.file).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
    const index = this.#entries.indexOf(entry);
    if (index >= 0) this.#entries.splice(index, 1);
    this.#diskBytes -= entry.bytes;
    this.#wake();
  }

  async #write(seq: number, kind: RecordKind, body: string, bytes: number): Promise<AppendResult> {
    const file = join(this.dir, spoolFileName(seq, kind));
    const temporary = `${file}.tmp`;
    try {
      const handle = await open(temporary, 'w', 0o600);
      try {
        await handle.writeFile(body);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temporary, file);
      await this.#syncDirectory();
      this.#entries.push({ seq, kind, file, bytes });
      this.#diskBytes += bytes;
      return 'spooled';
    } catch (error) {
      this.#log.error('cannot write to the spool', {
        dir: this.dir,
        error: errnoWords((error as NodeJS.ErrnoException).code) ?? String(error),
      });
      await rm(temporary, { force: true }).catch(() => undefined);
      return 'failed';
    } finally {
      this.#pendingBytes -= bytes;
      this.#wake();
    }
  }

  /** The rename is durable only once the directory is synced; some file systems cannot, which is no reason to fail. */
  async #syncDirectory(): Promise<void> {
    try {
      const handle = await open(this.dir, 'r');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch {
      // best effort
    }
  }

  #changed(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.#waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.#waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
