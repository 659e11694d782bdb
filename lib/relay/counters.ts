/** What the relay did with the records (lines) it received, for logs and tests. Counts only, never contents. */

export const DROP_REASONS = {
  /** The spool reached its byte limit: the function has been unreachable for long. */
  spoolFull: 'spool-full',
  /** Batches waiting to be written to disk exceeded the memory bound (the disk is slower than Vault). */
  overload: 'overload',
  /** Writing the spool failed (disk error). */
  spoolWriteFailed: 'spool-write-failed',
  /** The function answered 400 (or another final 4xx): it will never accept this batch. */
  rejected: 'rejected',
  /** A single record the function refuses as too large (413). */
  tooLarge: 'too-large',
  /** A line longer than the line limit. */
  lineTooLong: 'line-too-long',
  /** An incomplete last line of a rotated file or a closed connection. */
  partialLine: 'partial-line',
  /** A WebSocket message that is not JSON. */
  invalidEvent: 'invalid-event',
} as const;
export type DropReason = (typeof DROP_REASONS)[keyof typeof DROP_REASONS];

export interface CountersSnapshot {
  received: number;
  spooled: number;
  delivered: number;
  dropped: Partial<Record<DropReason, number>>;
}

export class RelayCounters {
  received = 0;
  spooled = 0;
  delivered = 0;
  readonly #dropped = new Map<DropReason, number>();

  drop(reason: DropReason, records = 1): void {
    this.#dropped.set(reason, (this.#dropped.get(reason) ?? 0) + records);
  }

  dropped(reason: DropReason): number {
    return this.#dropped.get(reason) ?? 0;
  }

  snapshot(): CountersSnapshot {
    return {
      received: this.received,
      spooled: this.spooled,
      delivered: this.delivered,
      dropped: Object.fromEntries(this.#dropped),
    };
  }
}
