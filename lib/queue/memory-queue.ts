/**
 * An in-process rollout queue with the semantics of an SQS FIFO queue and its dead-letter queue, for
 * `vault-rollout serve` on a laptop and for tests. Nothing survives the process.
 *
 * - FIFO per message group (the cluster); groups are independent.
 * - A group is blocked while any of its messages is in flight (received, neither deleted nor released), so a
 *   cluster's messages are worked one receive at a time and in order, as SQS does.
 * - A deduplication id seen in the last 5 minutes is accepted and dropped, as SQS does.
 * - An in-flight message becomes visible again when released or when its visibility timeout passes; once it has
 *   been received `maxReceiveCount` times without being deleted it goes to the dead letters instead. (SQS moves
 *   it on the next receive; moving it at once shows it in `deadLetters()` sooner and is otherwise the same.)
 */
import { randomUUID } from 'node:crypto';
import { deduplicationId, messageGroupId, type QueueMessage, type RolloutQueue } from './rollout-message.ts';

export interface MemoryRolloutQueueOptions {
  /** Receives without a delete before a message goes to the dead letters (SQS redrive policy; default 5). */
  maxReceiveCount?: number;
  /** How long a received message stays invisible unless deleted or released (default 30 s, as SQS). */
  visibilityTimeoutMs?: number;
  /** The deduplication window (default 5 minutes, as SQS). */
  deduplicationWindowMs?: number;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
}

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
}

export interface ReceiveOptions {
  /** At most this many messages (default 10, as SQS). */
  max?: number;
  /** Long polling: wait up to this long (real time) for a message when none is available (default 0). */
  waitMs?: number;
}

interface StoredMessage {
  messageId: string;
  body: string;
  groupId: string;
  receiveCount: number;
  /** Set while in flight. */
  receiptHandle?: string;
  visibleAt?: number;
}

export class MemoryRolloutQueue implements RolloutQueue {
  readonly #maxReceiveCount: number;
  readonly #visibilityTimeoutMs: number;
  readonly #deduplicationWindowMs: number;
  readonly #now: () => number;
  /** Per group, its messages in order; a group with no message is removed. Map order is group age. */
  readonly #groups = new Map<string, StoredMessage[]>();
  readonly #inFlight = new Map<string, StoredMessage>();
  readonly #dedupUntil = new Map<string, number>();
  readonly #deadLetters: DeadLetter[] = [];
  readonly #waiters = new Set<() => void>();

  constructor(options: MemoryRolloutQueueOptions = {}) {
    this.#maxReceiveCount = options.maxReceiveCount ?? 5;
    this.#visibilityTimeoutMs = options.visibilityTimeoutMs ?? 30_000;
    this.#deduplicationWindowMs = options.deduplicationWindowMs ?? 5 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  send(messages: readonly QueueMessage[]): Promise<void> {
    const now = this.#now();
    for (const [id, until] of this.#dedupUntil) if (until <= now) this.#dedupUntil.delete(id);
    for (const message of messages) {
      const dedupId = deduplicationId(message);
      if (this.#dedupUntil.has(dedupId)) continue;
      this.#dedupUntil.set(dedupId, now + this.#deduplicationWindowMs);
      const groupId = messageGroupId(message);
      const stored: StoredMessage = { messageId: randomUUID(), body: JSON.stringify(message), groupId, receiveCount: 0 };
      const group = this.#groups.get(groupId);
      if (group) group.push(stored);
      else this.#groups.set(groupId, [stored]);
    }
    this.#wake();
    return Promise.resolve();
  }

  /**
   * The next messages of the groups that have none in flight, oldest group first; several consecutive messages
   * of one group may come in one receive (as on SQS), and they stay in flight together.
   */
  async receive(options: ReceiveOptions = {}): Promise<ReceivedRolloutMessage[]> {
    const max = options.max ?? 10;
    let received = this.#receiveNow(max);
    if (received.length === 0 && (options.waitMs ?? 0) > 0) {
      await this.#waitForChange(options.waitMs ?? 0);
      received = this.#receiveNow(max);
    }
    return received;
  }

  /** Deletes a received message (it was worked). False if the handle is unknown or stale (visibility expired). */
  delete(receiptHandle: string): Promise<boolean> {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return Promise.resolve(false);
    this.#inFlight.delete(receiptHandle);
    const group = this.#groups.get(message.groupId) ?? [];
    group.splice(group.indexOf(message), 1);
    if (group.length === 0) this.#groups.delete(message.groupId);
    this.#wake();
    return Promise.resolve(true);
  }

  /** Makes a received message visible again at once (SQS ChangeMessageVisibility 0): it will be redelivered. */
  release(receiptHandle: string): Promise<boolean> {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return Promise.resolve(false);
    this.#makeVisible(message);
    this.#wake();
    return Promise.resolve(true);
  }

  /**
   * Keeps a received message invisible for `delayMs` more, then redelivers it (SQS ChangeMessageVisibility): how a
   * gate or a settle window waits in the queue instead of in the worker. Its group stays blocked meanwhile.
   */
  defer(receiptHandle: string, delayMs: number): Promise<boolean> {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return Promise.resolve(false);
    message.visibleAt = this.#now() + Math.max(0, delayMs);
    return Promise.resolve(true);
  }

  /** The messages that were received maxReceiveCount times without being deleted, oldest first. */
  deadLetters(): DeadLetter[] {
    this.#expireVisibility();
    return [...this.#deadLetters];
  }

  /** Messages waiting, in flight and dead-lettered (like SQS's approximate counts, but exact). */
  counts(): { available: number; inFlight: number; deadLetters: number } {
    this.#expireVisibility();
    let stored = 0;
    for (const group of this.#groups.values()) stored += group.length;
    return { available: stored - this.#inFlight.size, inFlight: this.#inFlight.size, deadLetters: this.#deadLetters.length };
  }

  #receiveNow(max: number): ReceivedRolloutMessage[] {
    this.#expireVisibility();
    const now = this.#now();
    const received: ReceivedRolloutMessage[] = [];
    for (const group of this.#groups.values()) {
      if (received.length >= max) break;
      if (group.some((m) => m.receiptHandle !== undefined)) continue;
      for (const message of group) {
        if (received.length >= max) break;
        message.receiveCount += 1;
        message.receiptHandle = randomUUID();
        message.visibleAt = now + this.#visibilityTimeoutMs;
        this.#inFlight.set(message.receiptHandle, message);
        const { messageId, receiptHandle, body, groupId, receiveCount } = message;
        received.push({ messageId, receiptHandle, body, groupId, receiveCount });
      }
    }
    return received;
  }

  #expireVisibility(): void {
    const now = this.#now();
    for (const message of this.#inFlight.values()) {
      if ((message.visibleAt ?? Infinity) <= now) this.#makeVisible(message);
    }
  }

  /** Back to the waiting messages, in its place in the group — or to the dead letters when out of receives. */
  #makeVisible(message: StoredMessage): void {
    if (message.receiptHandle !== undefined) this.#inFlight.delete(message.receiptHandle);
    delete message.receiptHandle;
    delete message.visibleAt;
    if (message.receiveCount < this.#maxReceiveCount) return;
    const group = this.#groups.get(message.groupId) ?? [];
    group.splice(group.indexOf(message), 1);
    if (group.length === 0) this.#groups.delete(message.groupId);
    const { messageId, body, groupId, receiveCount } = message;
    this.#deadLetters.push({ messageId, body, groupId, receiveCount, deadLetteredAt: this.#now() });
  }

  #waitForChange(ms: number): Promise<void> {
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

  #wake(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
