/**
 * Bytes in, complete lines out — for the relay's file tail and socket, and for Kubernetes watch streams. Memory is
 * bounded by the line limit: a line that grows past it is dropped as a whole (reported once) and skipped up to its
 * newline. Each line comes with the byte position just after its newline, so a file tail can remember where it stands.
 */
export interface LineSplitterOptions {
  maxLineBytes: number;
  /** A complete, non-blank line (without its newline and a trailing CR) and the position after its newline. */
  onLine: (line: string, endPosition: number) => void;
  onOverlong: () => void;
  /** Position of the first byte pushed (a file offset); default 0. */
  startPosition?: number;
}

const NEWLINE = 0x0a;

export class LineSplitter {
  readonly #options: LineSplitterOptions;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #skipping = false;
  #position: number;

  constructor(options: LineSplitterOptions) {
    this.#options = options;
    this.#position = options.startPosition ?? 0;
  }

  /** Bytes held of a line whose newline has not come yet. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(NEWLINE, start);
      const piece = chunk.subarray(start, newline === -1 ? chunk.length : newline);
      if (!this.#skipping && piece.length > 0) {
        if (this.#pendingBytes + piece.length > this.#options.maxLineBytes) {
          this.#skipping = true;
          this.#pending = [];
          this.#pendingBytes = 0;
          this.#options.onOverlong();
        } else {
          // A copy when the line continues in a later chunk, so the whole chunk is not kept alive by a slice.
          this.#pending.push(newline === -1 ? Buffer.from(piece) : piece);
          this.#pendingBytes += piece.length;
        }
      }
      if (newline === -1) break;
      if (!this.#skipping && this.#pendingBytes > 0) {
        let line = (this.#pending.length === 1 ? (this.#pending[0] as Buffer) : Buffer.concat(this.#pending)).toString(
          'utf8',
        );
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line.trim() !== '') this.#options.onLine(line, this.#position + newline + 1);
      }
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#skipping = false;
      start = newline + 1;
    }
    this.#position += chunk.length;
  }

  /** The stream ended: a last line without its newline still counts (a watch's final event, a file's last line). */
  end(): void {
    if (!this.#skipping && this.#pendingBytes > 0) {
      let line = Buffer.concat(this.#pending).toString('utf8');
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line.trim() !== '') this.#options.onLine(line, this.#position);
    }
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#skipping = false;
  }
}
