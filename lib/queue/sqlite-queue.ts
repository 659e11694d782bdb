/**
 * The durable queue of `vault-rollout serve`: an SQS FIFO queue and its dead-letter queue in one SQLite file, through
 * Node's built-in node:sqlite (no server, no npm dependency). On ':memory:' (memoryRolloutQueue) it is the throwaway
 * queue of `reconcile` and of tests: one implementation of these semantics, not two
 * (test/unit/queue/local-queues.test.ts):
 *
 * - FIFO per message group (the cluster); groups are independent, oldest group first.
 * - A group is blocked while any of its messages is in flight (received, neither deleted nor visible again).
 * - A deduplication id seen within the window (5 minutes) is accepted and dropped.
 * - Visibility timeout and release (with an optional backoff delay) redeliver; the maxReceiveCount-th receive
 *   without a delete moves the message to the dead_letters table.
 *
 * Durability: WAL with synchronous=FULL, and every operation is one transaction, so `send` resolves only once the
 * messages are on disk: `serve` answers 202 after that. After a crash (kill -9) the file holds every accepted
 * message; a message that was in flight when the process died is redelivered when the queue is opened again (its
 * worker is gone), and the restart record makes the redelivery write nothing twice.
 *
 * One process owns the file (locking_mode=EXCLUSIVE): a second `serve` on the same file fails at open instead of
 * taking the first one's in-flight messages. The OS drops the lock when the owner dies, even by SIGKILL.
 *
 * `visible_at` is the one time column: while a message is in flight, when it becomes visible again; on a waiting
 * message, not before when it may be received (nothing sets it yet: it is where a `defer(message, delayMs)`
 * primitive for gates and settle windows hooks in).
 */
import { randomUUID } from 'node:crypto';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { openQueueDatabase, prepareStatements } from './sqlite-queue-database.ts';
import {
  ChangeWaiters,
  LOCAL_QUEUE_DEFAULTS,
  type DeadLetter,
  type LocalQueueOptions,
  type LocalRolloutQueue,
  type QueueCounts,
  type ReceivedRolloutMessage,
  type ReceiveOptions,
} from './local-queue.ts';
import { deduplicationId, messageGroupId, QueueUnavailableError, type QueueMessage } from './rollout-message.ts';
import { MAX_SEEN_KEYS, SCHEMA_VERSION } from './sqlite-queue-schema.ts';

export interface SqliteRolloutQueueOptions extends LocalQueueOptions {
  /** The database file (created with mode 0600, its directory with 0700); ':memory:' for a throwaway queue. */
  file: string;
}

interface Row {
  seq: number;
  message_id: string;
  group_id: string;
  body: string;
  receive_count: number;
}

export class SqliteRolloutQueue implements LocalRolloutQueue {
  readonly #db: DatabaseSync;
  readonly #maxReceiveCount: number;
  readonly visibilityTimeoutMs: number;
  readonly #deduplicationWindowMs: number;
  readonly #now: () => number;
  readonly #waiters = new ChangeWaiters();
  readonly #sql: Record<string, StatementSync>;
  #closed = false;

  constructor(options: SqliteRolloutQueueOptions) {
    this.#maxReceiveCount = options.maxReceiveCount ?? LOCAL_QUEUE_DEFAULTS.maxReceiveCount;
    this.visibilityTimeoutMs = options.visibilityTimeoutMs ?? LOCAL_QUEUE_DEFAULTS.visibilityTimeoutMs;
    this.#deduplicationWindowMs = options.deduplicationWindowMs ?? LOCAL_QUEUE_DEFAULTS.deduplicationWindowMs;
    this.#now = options.now ?? Date.now;
    this.#db = openQueueDatabase(options.file);
    this.#sql = prepareStatements(this.#db);
  }

  send(messages: readonly QueueMessage[]): Promise<void> {
    try {
      this.#transaction(() => {
        const now = this.#now();
        this.#sql.dedupPurge!.run(now);
        for (const message of messages) {
          const inserted = this.#sql.dedupInsert!.run(deduplicationId(message), now + this.#deduplicationWindowMs);
          if (Number(inserted.changes) === 0) continue;
          this.#sql.insert!.run(randomUUID(), messageGroupId(message), JSON.stringify(message));
        }
      });
    } catch (e) {
      // Nothing was committed: the caller answers 503, and the sender retries.
      return Promise.reject(
        e instanceof QueueUnavailableError
          ? e
          : new QueueUnavailableError(`the queue could not store the messages: ${(e as Error).message}`, { cause: e }),
      );
    }
    this.#waiters.wake();
    return Promise.resolve();
  }

  async receive(options: ReceiveOptions = {}): Promise<ReceivedRolloutMessage[]> {
    const max = options.max ?? 10;
    let received = this.#receiveNow(max);
    if (received.length === 0 && (options.waitMs ?? 0) > 0 && !this.#closed) {
      await this.#waiters.wait(options.waitMs ?? 0);
      if (!this.#closed) received = this.#receiveNow(max);
    }
    return received;
  }

  extendVisibility(receiptHandle: string, ms: number): Promise<boolean> {
    return Promise.resolve(
      this.#transaction(() => {
        this.#expireVisibility();
        const row = this.#sql.byHandle!.get(receiptHandle) as Row | undefined;
        if (!row) return false;
        this.#sql.delayVisible!.run(this.#now() + Math.max(1, ms), row.seq);
        return true;
      }),
    );
  }

  delete(receiptHandle: string): Promise<boolean> {
    const deleted = this.#transaction(() => {
      this.#expireVisibility();
      const row = this.#sql.byHandle!.get(receiptHandle) as Row | undefined;
      if (!row) return false;
      this.#sql.deleteSeq!.run(row.seq);
      return true;
    });
    if (deleted) this.#waiters.wake();
    return Promise.resolve(deleted);
  }

  release(receiptHandle: string, delayMs = 0): Promise<boolean> {
    const released = this.#transaction(() => {
      this.#expireVisibility();
      const row = this.#sql.byHandle!.get(receiptHandle) as Row | undefined;
      if (!row) return false;
      if (delayMs > 0) this.#sql.delayVisible!.run(this.#now() + delayMs, row.seq);
      else this.#makeVisible(row);
      return true;
    });
    if (released) this.#waiters.wake();
    return Promise.resolve(released);
  }

  defer(receiptHandle: string, delayMs: number): Promise<boolean> {
    // Never 0: that would make it visible at once, which is a release, not a wait.
    return this.release(receiptHandle, Math.max(1, delayMs));
  }

  deadLetter(receiptHandle: string, reason: string): Promise<boolean> {
    const moved = this.#transaction(() => {
      this.#expireVisibility();
      const row = this.#sql.byHandle!.get(receiptHandle) as Row | undefined;
      if (!row) return false;
      this.#sql.deadLetter!.run(
        row.message_id,
        row.group_id,
        row.body,
        row.receive_count,
        this.#now(),
        reason.slice(0, 1000),
      );
      this.#sql.deleteSeq!.run(row.seq);
      return true;
    });
    if (moved) this.#waiters.wake();
    return Promise.resolve(moved);
  }

  /**
   * The replay window of `serve` (lib/http/webhook-auth.ts SeenKeys): keys remembered in this file until their time,
   * so a signature accepted before a restart is still refused after it. One transaction, on disk when it returns.
   */
  firstSeen(key: string, nowSeconds: number, untilSeconds: number): boolean {
    return this.#transaction(() => {
      this.#sql.seenPurge!.run(nowSeconds);
      const { n } = this.#sql.seenCount!.get() as { n: number };
      if (n >= MAX_SEEN_KEYS) this.#sql.seenTrim!.run(n - MAX_SEEN_KEYS + 1);
      return Number(this.#sql.seenInsert!.run(key, untilSeconds).changes) === 1;
    });
  }

  deadLetters(sinceMs = 0): DeadLetter[] {
    this.#transaction(() => this.#expireVisibility());
    return (
      this.#sql.deadLetters!.all(sinceMs) as Array<{
        message_id: string;
        group_id: string;
        body: string;
        receive_count: number;
        dead_lettered_at: number;
        reason: string | null;
      }>
    ).map((r) => ({
      messageId: r.message_id,
      body: r.body,
      groupId: r.group_id,
      receiveCount: r.receive_count,
      deadLetteredAt: r.dead_lettered_at,
      ...(r.reason === null ? {} : { reason: r.reason }),
    }));
  }

  /** The newest `limit` dead letters, newest last, without their bodies (the status page's recent failures). */
  recentDeadLetters(limit: number): Array<Omit<DeadLetter, 'body'>> {
    return (
      this.#sql.recentDeadLetters!.all(limit) as Array<{
        message_id: string;
        group_id: string;
        receive_count: number;
        dead_lettered_at: number;
        reason: string | null;
      }>
    )
      .map((r) => ({
        messageId: r.message_id,
        groupId: r.group_id,
        receiveCount: r.receive_count,
        deadLetteredAt: r.dead_lettered_at,
        ...(r.reason === null ? {} : { reason: r.reason }),
      }))
      .reverse();
  }

  /**
   * A real write that changes nothing (the format number, committed), for serve's /readyz: throws when the file can
   * no longer be written (read-only or full file system, the file gone or replaced, the queue closed).
   */
  probeWrite(): void {
    if (this.#closed) throw new QueueUnavailableError('the queue is closed');
    this.#db.exec(`BEGIN IMMEDIATE; PRAGMA user_version = ${SCHEMA_VERSION}; COMMIT`);
  }

  counts(): QueueCounts {
    this.#transaction(() => this.#expireVisibility());
    const c = this.#sql.counts!.get() as { total: number; in_flight: number; dead: number };
    return { available: c.total - c.in_flight, inFlight: c.in_flight, deadLetters: c.dead };
  }

  /**
   * For the metrics, read-only: continuations waiting (messages with `follow`) and when the oldest one's restart was,
   * and when the oldest change still waiting (neither a continuation nor a gate) was accepted. ISO times, or undefined.
   */
  backlog(): { continuations: number; oldestContinuationSince?: string; oldestChangeAcceptedAt?: string } {
    const b = this.#sql.backlog!.get() as {
      continuations: number;
      oldest_continuation: string | null;
      oldest_change: string | null;
    };
    return {
      continuations: b.continuations,
      ...(b.oldest_continuation ? { oldestContinuationSince: b.oldest_continuation } : {}),
      ...(b.oldest_change ? { oldestChangeAcceptedAt: b.oldest_change } : {}),
    };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#waiters.wake();
    this.#db.close();
  }

  #receiveNow(max: number): ReceivedRolloutMessage[] {
    return this.#transaction(() => {
      this.#expireVisibility();
      const now = this.#now();
      const received: ReceivedRolloutMessage[] = [];
      const groups = this.#sql.openGroups!.all(max) as Array<{ group_id: string }>;
      for (const { group_id } of groups) {
        if (received.length >= max) break;
        const rows = this.#sql.groupHead!.all(group_id, max - received.length) as unknown as Array<
          Row & { visible_at: number | null }
        >;
        for (const row of rows) {
          // A message held back (visible_at in the future) holds back the rest of its group too: order first.
          if (row.visible_at !== null && row.visible_at > now) break;
          const receiptHandle = randomUUID();
          this.#sql.markInFlight!.run(receiptHandle, now + this.visibilityTimeoutMs, row.seq);
          received.push({
            messageId: row.message_id,
            receiptHandle,
            body: row.body,
            groupId: row.group_id,
            receiveCount: row.receive_count + 1,
          });
        }
      }
      return received;
    });
  }

  /** In-flight messages past their visibility timeout: visible again, or dead letters when out of receives. */
  #expireVisibility(): void {
    for (const row of this.#sql.expired!.all(this.#now()) as unknown as Row[]) this.#makeVisible(row);
  }

  #makeVisible(row: Row): void {
    if (row.receive_count < this.#maxReceiveCount) {
      this.#sql.makeVisible!.run(row.seq);
      return;
    }
    this.#sql.deadLetter!.run(row.message_id, row.group_id, row.body, row.receive_count, this.#now(), null);
    this.#sql.deleteSeq!.run(row.seq);
  }

  /** One IMMEDIATE transaction; with synchronous=FULL its COMMIT returns once the WAL is on disk. */
  #transaction<T>(work: () => T): T {
    if (this.#closed) throw new QueueUnavailableError('the queue is closed');
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const result = work();
      this.#db.exec('COMMIT');
      return result;
    } catch (e) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw e;
    }
  }
}

/**
 * Where `serve` keeps its queue unless told: $VAULT_ROLLOUT_QUEUE_FILE, else
 * $XDG_STATE_HOME/vault-rollout/serve-queue.sqlite, else ~/.local/state/vault-rollout/serve-queue.sqlite.
 */
/** A queue that lives as long as the process: `reconcile`'s, and the tests'. */
export function memoryRolloutQueue(options: LocalQueueOptions = {}): SqliteRolloutQueue {
  return new SqliteRolloutQueue({ ...options, file: ':memory:' });
}

export function defaultQueueFile(env: Readonly<Record<string, string | undefined>>, home: string): string {
  if (env.VAULT_ROLLOUT_QUEUE_FILE) return env.VAULT_ROLLOUT_QUEUE_FILE;
  const state = env.XDG_STATE_HOME || `${home}/.local/state`;
  return `${state}/vault-rollout/serve-queue.sqlite`;
}
