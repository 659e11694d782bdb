/**
 * Lines in, batches out: one open batch per kind, closed when it reaches `maxRecords` or `maxBytes`, or
 * `maxDelayMs` after its first line. A line larger than `maxBytes` travels alone. Each line may carry an
 * acknowledgement that runs once its batch is in the spool (the file tail saves its offset then).
 */
import type { RecordKind } from './record-kind.ts';

export interface BatchLimits {
  maxBytes: number;
  maxRecords: number;
  maxDelayMs: number;
}

export const DEFAULT_BATCH_LIMITS: BatchLimits = { maxBytes: 1024 * 1024, maxRecords: 500, maxDelayMs: 1000 };

export type Ack = () => void;
export type BatchHandler = (kind: RecordKind, lines: string[], acks: Ack[]) => void;

interface OpenBatch {
  lines: string[];
  acks: Ack[];
  bytes: number;
  timer?: NodeJS.Timeout;
}

export class Batcher {
  readonly #limits: BatchLimits;
  readonly #onBatch: BatchHandler;
  readonly #open = new Map<RecordKind, OpenBatch>();

  constructor(limits: BatchLimits, onBatch: BatchHandler) {
    this.#limits = limits;
    this.#onBatch = onBatch;
  }

  add(kind: RecordKind, line: string, ack?: Ack): void {
    const bytes = Buffer.byteLength(line) + 1;
    let batch = this.#open.get(kind);
    if (batch && batch.bytes + bytes > this.#limits.maxBytes) {
      this.#close(kind);
      batch = undefined;
    }
    if (!batch) {
      batch = { lines: [], acks: [], bytes: 0 };
      const opened = batch;
      opened.timer = setTimeout(() => {
        if (this.#open.get(kind) === opened) this.#close(kind);
      }, this.#limits.maxDelayMs);
      this.#open.set(kind, batch);
    }
    batch.lines.push(line);
    batch.bytes += bytes;
    if (ack) batch.acks.push(ack);
    if (batch.lines.length >= this.#limits.maxRecords || batch.bytes >= this.#limits.maxBytes) this.#close(kind);
  }

  /** Closes every open batch now (shutdown). */
  flush(): void {
    for (const kind of [...this.#open.keys()]) this.#close(kind);
  }

  #close(kind: RecordKind): void {
    const batch = this.#open.get(kind);
    if (!batch) return;
    clearTimeout(batch.timer);
    this.#open.delete(kind);
    this.#onBatch(kind, batch.lines, batch.acks);
  }
}
