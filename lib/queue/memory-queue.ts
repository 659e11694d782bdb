/**
 * An in-process rollout queue with the semantics of an SQS FIFO queue and its dead-letter queue, for tests (the
 * shared table in test/unit/queue/local-queues.test.ts holds it to SqliteRolloutQueue's semantics). Nothing survives
 * the process: `serve` uses SqliteRolloutQueue.
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
import { ChangeWaiters, LOCAL_QUEUE_DEFAULTS, type DeadLetter, type LocalQueueOptions, type LocalRolloutQueue, type QueueCounts, type ReceivedRolloutMessage, type ReceiveOptions } from './local-queue.ts';
import { deduplicationId, messageGroupId, type QueueMessage } from './rollout-message.ts';

export type MemoryRolloutQueueOptions = LocalQueueOptions;
export type { DeadLetter, ReceivedRolloutMessage, ReceiveOptions } from './local-queue.ts';

interface StoredMessage {
  messageId: string;
  body: string;
  groupId: string;
  receiveCount: number;
  /** Set while in flight. */
  receiptHandle?: string;
  visibleAt?: number;
}

export class MemoryRolloutQueue implements LocalRolloutQueue {
  readonly #maxReceiveCount: number;
  readonly visibilityTimeoutMs: number;
  readonly #deduplicationWindowMs: number;
  readonly #now: () => number;
  /** Per group, its messages in order; a group with no message is removed. Map order is group age. */
  readonly #groups = new Map<string, StoredMessage[]>();
  readonly #inFlight = new Map<string, StoredMessage>();
  readonly #dedupUntil = new Map<string, number>();
  readonly #deadLetters: DeadLetter[] = [];
  readonly #waiters = new ChangeWaiters();

  constructor(options: MemoryRolloutQueueOptions = {}) {
    this.#maxReceiveCount = options.maxReceiveCount ?? LOCAL_QUEUE_DEFAULTS.maxReceiveCount;
    this.visibilityTimeoutMs = options.visibilityTimeoutMs ?? LOCAL_QUEUE_DEFAULTS.visibilityTimeoutMs;
    this.#deduplicationWindowMs = options.deduplicationWindowMs ?? LOCAL_QUEUE_DEFAULTS.deduplicationWindowMs;
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
    this.#waiters.wake();
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
      await this.#waiters.wait(options.waitMs ?? 0);
      received = this.#receiveNow(max);
    }
    return received;
  }

  /** Keeps a received message in flight for `ms` from now (the worker's heartbeat). False if the handle is stale. */
  extendVisibility(receiptHandle: string, ms: number): Promise<boolean> {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return Promise.resolve(false);
    message.visibleAt = this.#now() + Math.max(1, ms);
    return Promise.resolve(true);
  }

  /** Deletes a received message (it was worked). False if the handle is unknown or stale (visibility expired). */
  delete(receiptHandle: string): Promise<boolean> {
    return Promise.resolve(this.#take(receiptHandle) !== undefined);
  }

  /** Makes a received message visible again at once, or after `delayMs` (SQS ChangeMessageVisibility). */
  release(receiptHandle: string, delayMs = 0): Promise<boolean> {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return Promise.resolve(false);
    if (delayMs > 0) message.visibleAt = this.#now() + delayMs;
    else this.#makeVisible(message);
    this.#waiters.wake();
    return Promise.resolve(true);
  }

  /** Keeps a received message invisible for `delayMs` more, then redelivers it; its group stays blocked. */
  defer(receiptHandle: string, delayMs: number): Promise<boolean> {
    // Never 0: that would make it visible at once, which is a release, not a wait.
    return this.release(receiptHandle, Math.max(1, delayMs));
  }

  deadLetter(receiptHandle: string, reason: string): Promise<boolean> {
    const message = this.#take(receiptHandle);
    if (message) this.#deadLetters.push({ messageId: message.messageId, body: message.body, groupId: message.groupId, receiveCount: message.receiveCount, deadLetteredAt: this.#now(), reason: reason.slice(0, 1000) });
    return Promise.resolve(message !== undefined);
  }

  /** Takes a received message out of the queue (its group moves on); undefined if the handle is unknown or stale. */
  #take(receiptHandle: string): StoredMessage | undefined {
    this.#expireVisibility();
    const message = this.#inFlight.get(receiptHandle);
    if (!message) return undefined;
    this.#inFlight.delete(receiptHandle);
    const group = this.#groups.get(message.groupId) ?? [];
    group.splice(group.indexOf(message), 1);
    if (group.length === 0) this.#groups.delete(message.groupId);
    this.#waiters.wake();
    return message;
  }

  /** The messages that were received maxReceiveCount times without being deleted, oldest first. */
  deadLetters(sinceMs = 0): DeadLetter[] {
    this.#expireVisibility();
    return this.#deadLetters.filter((d) => d.deadLetteredAt >= sinceMs);
  }

  /** Messages waiting, in flight and dead-lettered (like SQS's approximate counts, but exact). */
  counts(): QueueCounts {
    this.#expireVisibility();
    let stored = 0;
    for (const group of this.#groups.values()) stored += group.length;
    return { available: stored - this.#inFlight.size, inFlight: this.#inFlight.size, deadLetters: this.#deadLetters.length };
  }

  close(): void {
    this.#waiters.wake();
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
        message.visibleAt = now + this.visibilityTimeoutMs;
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
}
