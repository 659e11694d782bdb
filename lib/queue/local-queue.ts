/**
 * The queue of `vault-rollout serve`, as its worker loop (lib/runtime/local-worker.ts) uses it: the operations of
 * an SQS FIFO queue with a dead-letter queue. SqliteRolloutQueue implements it, on a file for `serve` and in memory
 * for `reconcile` and the tests.
 */
import { backoffDelayMs } from '../kernel/backoff.ts';
import type { RolloutQueue } from './rollout-message.ts';

export interface ReceivedRolloutMessage {
  messageId: string;
  /** Valid for this receive only: a later receive of the same message gets a new one. */
  receiptHandle: string;
  /** JSON of a RolloutMessage, as on SQS: parse it with parseRolloutMessage. */
  body: string;
  groupId: string;
  /** 1 on the first receive. */
  receiveCount: number;
}

export interface DeadLetter {
  messageId: string;
  body: string;
  groupId: string;
  receiveCount: number;
  deadLetteredAt: number;
  /** Why the worker refused it (set when it was dead-lettered at once, not by running out of receives). */
  reason?: string;
}

export interface ReceiveOptions {
  /** At most this many messages (default 10, as SQS). */
  max?: number;
  /** Long polling: wait up to this long (real time) for a message when none is available (default 0). */
  waitMs?: number;
}

export interface QueueCounts {
  available: number;
  inFlight: number;
  deadLetters: number;
}

/** The defaults of both queues: SQS's. */
export const LOCAL_QUEUE_DEFAULTS = {
  maxReceiveCount: 5,
  visibilityTimeoutMs: 30_000,
  deduplicationWindowMs: 5 * 60_000,
} as const;

export interface LocalQueueOptions {
  /** Receives without a delete before a message goes to the dead letters (SQS redrive policy; default 5). */
  maxReceiveCount?: number;
  /** How long a received message stays invisible unless deleted or released (default 30 s, as SQS). */
  visibilityTimeoutMs?: number;
  /** The deduplication window (default 5 minutes, as SQS). */
  deduplicationWindowMs?: number;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
}

export interface LocalRolloutQueue extends RolloutQueue {
  /**
   * How long a receive keeps a message invisible. A worker that may take longer extends it (extendVisibility) while
   * it works, well before it ends (lib/runtime/local-worker.ts: every third of it), or the message is redelivered.
   */
  readonly visibilityTimeoutMs: number;
  /**
   * The next messages of the groups that have none in flight, oldest group first; several consecutive messages
   * of one group may come in one receive (as on SQS), and they stay in flight together.
   */
  receive(options?: ReceiveOptions): Promise<ReceivedRolloutMessage[]>;
  /**
   * Keeps a received message in flight, under the same receipt handle, for `ms` from now (SQS
   * ChangeMessageVisibility on a message still being worked: the worker's heartbeat). False if the handle is
   * unknown or stale: the queue has taken the message back (visible again, received again, or dead-lettered).
   */
  extendVisibility(receiptHandle: string, ms: number): Promise<boolean>;
  /** Deletes a received message (it was worked). False if the handle is unknown or stale (visibility expired). */
  delete(receiptHandle: string): Promise<boolean>;
  /**
   * Hands a received message back for redelivery (SQS ChangeMessageVisibility): visible again at once, or after
   * `delayMs` (a backoff) during which it still blocks its group, so the group's order holds.
   */
  release(receiptHandle: string, delayMs?: number): Promise<boolean>;
  /**
   * Keeps a received message invisible for `delayMs` more, then redelivers it (a gate or settle window waiting in
   * the queue, h-waves' primitive): release with a delay, under the name the worker uses for it.
   */
  defer(receiptHandle: string, delayMs: number): Promise<boolean>;
  /**
   * Moves a received message to the dead letters at once, with the reason (a message the worker refused: it is
   * kept for an operator, never executed, never redelivered). False if the handle is unknown or stale.
   */
  deadLetter(receiptHandle: string, reason: string): Promise<boolean>;
  /**
   * The messages that were received maxReceiveCount times without being deleted, or refused, oldest first; only those
   * dead-lettered at or after `sinceMs` when given.
   */
  deadLetters(sinceMs?: number): DeadLetter[];
  /** Messages waiting, in flight and dead-lettered (like SQS's approximate counts, but exact). */
  counts(): QueueCounts;
  /** Releases the queue's resources (the database file); the queue is unusable afterwards. */
  close(): void;
}

/** The redelivery backoff after the `receiveCount`-th failed receive: 1 s, 2 s, 4 s … at most 60 s. */
export const redeliveryBackoffMs = (receiveCount: number, baseMs = 1000, maxMs = 60_000): number =>
  backoffDelayMs(receiveCount, baseMs, maxMs, Math.random, 1);

/** Long polling: receivers waiting for a change of the queue, woken by any send, delete or release. */
export class ChangeWaiters {
  readonly #waiters = new Set<() => void>();

  /** Resolves at the next wake, or after `ms`. */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
