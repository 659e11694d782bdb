/**
 * Follows a `file` audit device's log. Filesystem notifications (inotify through `fs.watch` on the file's
 * directory, so a rename or a new file at the path is seen as well as a write) wake a poll as soon as Vault writes;
 * a slow sweep (`sweepMs`) still runs beside them, because notifications can be lost (queue overflow) and a rotated
 * file moved out of the directory sends none. Where the filesystem has no notifications (fs.watch throws or fails:
 * some network and FUSE filesystems), the tail polls every `pollMs` instead and says so in its log.
 *
 * Each poll: stat the path; when its inode changed, the file was rotated by rename — the old file is
 * drained (Vault may write to it until it reopens on SIGHUP) and closed once it stays quiet — and the new file is
 * read from its start; when the size fell below our offset, it was copy-truncated — read again from 0. Only
 * complete lines are emitted.
 *
 * The position saved is the one after the last line whose batch reached the spool (the acknowledgement), so a
 * restart neither skips nor loses lines. If the file was rotated while the relay was down, the old file is looked
 * for by its inode among its siblings (`audit.log.1`, `audit.log-2024…`) and finished first.
 */
import { watch, type FSWatcher } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Ack } from './batcher.ts';
import { LineSplitter } from '../kernel/line-splitter.ts';
import type { OffsetStore, TailPosition } from './offset-store.ts';
import type { RelayLog } from '../kernel/log.ts';
import { errnoWords } from '../kernel/file-errors.ts';
import {
  findByInode,
  findCopy,
  FINGERPRINT_BYTES,
  sameFile,
  sha256,
  startsWith,
  statOrUndefined,
  type TailedFile,
} from './tailed-file.ts';

export interface FileTailOptions {
  path: string;
  store: OffsetStore;
  onLine: (line: string, ack: Ack) => void;
  /** A line was dropped: longer than maxLineBytes, or the unfinished end of a rotated file. */
  onDropped: (reason: 'line-too-long' | 'partial-line') => void;
  log: RelayLog;
  /** Where to start when no position was saved: the end (default: do not replay history) or the start. */
  startAt?: 'end' | 'start';
  /** The poll interval when the filesystem gives no notifications (default 250 ms). */
  pollMs?: number;
  /** Follow by filesystem notifications (default true); false polls every `pollMs`. */
  watch?: boolean;
  /** With notifications, the interval of the sweep that catches what they miss (default 1000 ms). */
  sweepMs?: number;
  maxLineBytes?: number;
  /** Timer ticks (sweeps or polls) without growth after which a rotated file is closed. */
  rotatedQuietPolls?: number;
  readChunkBytes?: number;
}

const TRUNCATED = Symbol('truncated');

export class FileTail {
  readonly #options: FileTailOptions;
  readonly #pollMs: number;
  readonly #sweepMs: number;
  readonly #maxLineBytes: number;
  readonly #quietPolls: number;
  readonly #buffer: Buffer;
  #current: TailedFile | undefined;
  #rotated: TailedFile[] = [];
  #timer: NodeJS.Timeout | undefined;
  #watcher: FSWatcher | undefined;
  #polling: Promise<void> | undefined;
  /** A poll was asked for while one ran: run another after it (its reads may have ended before the write). */
  #again = false;
  /** Whether the poll asked for again counts as a timer tick (for closing quiet rotated files). */
  #againTicks = false;
  #stopped = false;

  constructor(options: FileTailOptions) {
    this.#options = options;
    this.#pollMs = options.pollMs ?? 250;
    this.#sweepMs = options.sweepMs ?? 1000;
    this.#maxLineBytes = options.maxLineBytes ?? 4 * 1024 * 1024;
    this.#quietPolls = options.rotatedQuietPolls ?? 8;
    this.#buffer = Buffer.allocUnsafe(options.readChunkBytes ?? 1024 * 1024);
  }

  async start(): Promise<void> {
    const { path, store, log } = this.#options;
    const saved = await store.load();
    const now = await statOrUndefined(path);
    if (saved && saved.path === path) {
      const same = now && now.ino === saved.inode ? await this.#open(path, saved.offset) : undefined;
      if (same && (await sameFile(same, saved))) {
        this.#current = same;
      } else if (same && now && now.size < saved.offset) {
        log.warn(
          'the audit file is shorter than the saved offset (truncated while stopped): reading it from the start',
          { path },
        );
        this.#current = this.#restart(same);
      } else {
        await same?.handle.close();
        const old = await findByInode(path, saved);
        if (old) {
          log.info('the audit file was rotated while stopped: finishing the old file first', { path, rotatedTo: old });
          const rotated = await this.#open(old, saved.offset);
          if (rotated) this.#rotated.push(rotated);
          if (now?.ino === saved.inode)
            log.warn(
              'the audit file now at this path is another file (its inode was reused): reading it from the start',
              { path },
            );
        } else {
          log.warn(
            'the audit file was rotated while stopped and the old file is gone: lines written to it after the saved offset are lost',
            { path },
          );
        }
        if (now) this.#current = await this.#open(path, 0);
      }
    } else if (now) {
      const startAt = this.#options.startAt ?? 'end';
      this.#current = await this.#open(path, startAt === 'end' ? now.size : 0);
      log.info(`following the audit file from its ${startAt}`, { path });
    } else {
      log.warn('the audit file does not exist yet: waiting for it', { path });
    }
    if (this.#current) store.save(this.#position(this.#current, this.#current.offset));
    // Watch before the first read, so a write between the two wakes a poll rather than waiting for the sweep.
    if (this.#options.watch ?? true) this.#watch();
    else log.info('following the audit file by polling (notifications turned off)', { path, pollMs: this.#pollMs });
    await this.pollOnce();
    this.#schedule();
  }

  /** Whether the tail follows by notifications (true) or polls (false: off, or the filesystem has none). */
  get watching(): boolean {
    return this.#watcher !== undefined;
  }

  #watch(): void {
    const { path, log } = this.#options;
    const name = basename(path);
    const fallBack = (error: unknown) => {
      this.#watcher?.close();
      this.#watcher = undefined;
      log.warn('no filesystem notifications for the audit file: polling it instead', {
        path,
        pollMs: this.#pollMs,
        error: errnoWords((error as NodeJS.ErrnoException).code) ?? String(error),
      });
    };
    try {
      // The directory, not the file: the file's own watch would follow its inode away on a rename.
      this.#watcher = watch(dirname(path), { persistent: false }, (_event, changed) => {
        // The file or a rotated sibling (audit.log.1) changed; no name means the platform could not say which.
        if (changed === null || changed.startsWith(name)) void this.#wake(false);
      });
      this.#watcher.on('error', fallBack);
      log.info('following the audit file by filesystem notifications', { path, sweepMs: this.#sweepMs });
    } catch (error) {
      fallBack(error);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
    await this.#polling;
    for (const file of [...this.#rotated, ...(this.#current ? [this.#current] : [])])
      await file.handle.close().catch(() => undefined);
    this.#rotated = [];
    this.#current = undefined;
    // Lines still on their way to the spool save their position later; the relay flushes again after them.
    await this.#options.store.flush();
  }

  /**
   * One poll, counted as a timer tick (exposed so tests need not wait for the timer). Resolves once a poll that
   * started after this call has finished, so everything written before the call has been read.
   */
  pollOnce(): Promise<void> {
    return this.#wake(true);
  }

  #wake(tick: boolean): Promise<void> {
    if (this.#polling) {
      this.#again = true;
      this.#againTicks ||= tick;
      return this.#polling;
    }
    this.#polling = (async () => {
      let ticks = tick;
      try {
        for (;;) {
          await this.#poll(ticks);
          if (!this.#again || this.#stopped) return;
          ticks = this.#againTicks;
          this.#again = false;
          this.#againTicks = false;
        }
      } finally {
        this.#polling = undefined;
      }
    })();
    this.#polling.catch((error: unknown) =>
      this.#options.log.error('cannot read the audit file', {
        path: this.#options.path,
        error: errnoWords((error as NodeJS.ErrnoException).code) ?? String(error),
      }),
    );
    return this.#polling;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(
      () => {
        this.pollOnce()
          .catch(() => undefined) // logged by #wake
          .finally(() => this.#schedule());
      },
      this.#watcher ? this.#sweepMs : this.#pollMs,
    );
  }

  /** `tick`: a timer tick (or a test's pollOnce), which counts towards closing a quiet rotated file. */
  async #poll(tick: boolean): Promise<void> {
    const { path, log } = this.#options;
    for (const file of [...this.#rotated]) {
      if ((await this.#readAvailable(file)) !== 0) file.quietPolls = 0;
      else if (tick && ++file.quietPolls >= this.#quietPolls) await this.#closeRotated(file);
    }
    const now = await statOrUndefined(path);
    if (this.#current && (!now || now.ino !== this.#current.inode)) {
      log.info('the audit file was rotated (renamed): draining the old file, reading the new one from its start', {
        path,
      });
      this.#current.quietPolls = 0;
      this.#rotated.push(this.#current);
      this.#current = undefined;
      // Lines Vault writes to the old file before it reopens come first.
      await this.#readAvailable(this.#rotated.at(-1) as TailedFile);
    }
    if (!this.#current && now) this.#current = await this.#open(path, 0);
    const current = this.#current;
    if (!current) return;
    const size = (await current.handle.stat()).size;
    // Truncated: shorter than what was read, or (written again past that length before this poll) other first bytes.
    if (size < current.offset || !(await startsWith(current.handle, current.head)))
      await this.#readAgainFromStart(current);
    // A truncation can also land during the reads: the chunk it spoiled is not used, and the file is read again.
    while ((await this.#readAvailable(current, true)) === TRUNCATED) await this.#readAgainFromStart(current);
  }

  /** The current file was copy-truncated: finish what was not read yet from the copy, then read it from 0. */
  async #readAgainFromStart(current: TailedFile): Promise<void> {
    const { path, log } = this.#options;
    // Lines written between our last read and the truncation are only in the copy: finish them from there.
    const resumeAt = current.offset - current.splitter.pendingBytes;
    const copy = await findCopy(path, current, resumeAt);
    const drained = copy ? await this.#open(copy, resumeAt) : undefined;
    log.info('the audit file was truncated (copy-truncate): reading it again from the start', {
      path,
      ...(drained ? { finishedFrom: copy } : {}),
    });
    if (drained) {
      await this.#readAvailable(drained);
      await this.#closeRotated(drained);
    } else if (current.splitter.pendingBytes > 0) this.#options.onDropped('partial-line');
    this.#restart(current);
  }

  /**
   * Reads to the end of the file; returns the bytes read. With `checkHead` (the file at the path, which a
   * copy-truncate may empty at any moment), each chunk is used only if the file still begins with the bytes read
   * from its start once the chunk is in: a chunk read after a truncation holds new lines at an old offset, which
   * would be spliced onto the old unfinished line. Then it returns TRUNCATED, having used nothing of that chunk.
   */
  async #readAvailable(file: TailedFile, checkHead = false): Promise<number | typeof TRUNCATED> {
    let total = 0;
    for (;;) {
      const { bytesRead } = await file.handle.read(this.#buffer, 0, this.#buffer.length, file.offset);
      if (bytesRead === 0) return total;
      if (checkHead && !(await startsWith(file.handle, file.head))) return TRUNCATED;
      if (file.head.length < FINGERPRINT_BYTES && file.offset < FINGERPRINT_BYTES)
        file.head = Buffer.concat([
          file.head.subarray(0, file.offset),
          this.#buffer.subarray(0, Math.min(bytesRead, FINGERPRINT_BYTES - file.offset)),
        ]);
      file.offset += bytesRead;
      total += bytesRead;
      file.splitter.push(this.#buffer.subarray(0, bytesRead));
    }
  }

  async #closeRotated(file: TailedFile): Promise<void> {
    this.#rotated.splice(this.#rotated.indexOf(file), 1);
    await file.handle.close().catch(() => undefined);
    if (file.splitter.pendingBytes > 0) {
      this.#options.log.warn('the rotated audit file ends in an incomplete line: dropped', {
        path: this.#options.path,
      });
      this.#options.onDropped('partial-line');
    }
  }

  async #open(path: string, offset: number): Promise<TailedFile | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    // The inode of what was opened, not of what the path named a moment before.
    const inode = (await handle.stat()).ino;
    const head = Buffer.alloc(Math.min(offset, FINGERPRINT_BYTES));
    const { bytesRead } = head.length > 0 ? await handle.read(head, 0, head.length, 0) : { bytesRead: 0 };
    const file: TailedFile = {
      handle,
      inode,
      offset,
      quietPolls: 0,
      head: head.subarray(0, bytesRead),
      splitter: undefined as unknown as LineSplitter,
    };
    file.splitter = this.#splitter(file, offset);
    return file;
  }

  /** The same file from its start (it was truncated). */
  #restart(file: TailedFile): TailedFile {
    file.offset = 0;
    file.head = Buffer.alloc(0);
    file.splitter = this.#splitter(file, 0);
    return file;
  }

  #position(file: TailedFile, offset: number): TailPosition {
    const headBytes = Math.min(offset, file.head.length);
    return {
      path: this.#options.path,
      inode: file.inode,
      offset,
      headBytes,
      headSha256: sha256(file.head.subarray(0, headBytes)),
    };
  }

  #splitter(file: TailedFile, offset: number): LineSplitter {
    const { store, onLine, onDropped } = this.#options;
    return new LineSplitter({
      maxLineBytes: this.#maxLineBytes,
      startPosition: offset,
      onLine: (line, end) => onLine(line, () => store.save(this.#position(file, end))),
      onOverlong: () => onDropped('line-too-long'),
    });
  }
}
