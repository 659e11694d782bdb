/**
 * Where the file tail stands, kept in the spool directory so a restart resumes there: the file's path, its inode
 * (to recognise it after a rotation renamed it), a fingerprint of its first bytes (inodes are reused: a deleted
 * file's inode often goes to the next one created) and the offset after the last line that reached the spool.
 * Saved with write + fsync + rename; saves coalesce, so a burst of acknowledgements costs one or two writes.
 */
import { open, readFile, rename } from 'node:fs/promises';

export interface TailPosition {
  path: string;
  inode: number;
  offset: number;
  /** SHA-256 (hex) of the file's first `headBytes` bytes. */
  headSha256?: string;
  headBytes?: number;
}

export class OffsetStore {
  readonly file: string;
  #wanted: TailPosition | undefined;
  #saving: Promise<void> | undefined;

  constructor(file: string) {
    this.file = file;
  }

  async load(): Promise<TailPosition | undefined> {
    try {
      const value = JSON.parse(await readFile(this.file, 'utf8')) as Partial<TailPosition>;
      if (typeof value.path === 'string' && Number.isSafeInteger(value.inode) && Number.isSafeInteger(value.offset)) {
        const head =
          typeof value.headSha256 === 'string' && Number.isSafeInteger(value.headBytes)
            ? { headSha256: value.headSha256, headBytes: value.headBytes as number }
            : {};
        return { path: value.path, inode: value.inode as number, offset: value.offset as number, ...head };
      }
    } catch {
      // none yet, or unreadable: start afresh
    }
    return undefined;
  }

  /** Records a position; the write happens in the background (see flush). */
  save(position: TailPosition): void {
    this.#wanted = position;
    this.#saving ??= this.#drain();
  }

  /** Resolves once the latest position is on disk. */
  async flush(): Promise<void> {
    while (this.#saving) await this.#saving;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#wanted) {
        const position = this.#wanted;
        this.#wanted = undefined;
        const temporary = `${this.file}.tmp`;
        const handle = await open(temporary, 'w', 0o600);
        try {
          await handle.writeFile(JSON.stringify(position));
          await handle.sync();
        } finally {
          await handle.close();
        }
        await rename(temporary, this.file);
      }
    } catch {
      // The next acknowledgement tries again; at worst a restart re-reads a few lines (delivery is at least once).
    } finally {
      this.#saving = undefined;
    }
  }
}
