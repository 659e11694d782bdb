/**
 * The rollout queue on Amazon SQS (FIFO): what the HTTP function and the relay write to.
 *
 * Each message goes out with its cluster as `MessageGroupId` and the restart-token hash as
 * `MessageDeduplicationId` (see rollout-message.ts), through `SendMessageBatch` calls of at most 10 entries and
 * 256 KiB. Order within a group is kept even when a batch partly fails: every call carries at most one message
 * per group, and a group's next message is sent only once its previous one was accepted. Batches still mix
 * groups, so the usual case — one message per cluster — needs one call per ten clusters.
 */
import { SendMessageBatchCommand, type SendMessageBatchRequestEntry, type SQSClient } from '@aws-sdk/client-sqs';
import { backoffDelayMs } from '../kernel/backoff.ts';
import {
  deduplicationId,
  messageGroupId,
  QueueUnavailableError,
  type QueueMessage,
  type RolloutQueue,
} from './rollout-message.ts';

/** SQS limits for one SendMessageBatch call. */
export const MAX_BATCH_ENTRIES = 10;
export const MAX_BATCH_BYTES = 256 * 1024;

export interface SqsRolloutQueueOptions {
  client: SQSClient;
  queueUrl: string;
  /** How many times an entry reported in `Failed` is sent again before giving up (default 3). */
  maxEntryRetries?: number;
  /** Backoff before a retry round: base * 2^(attempt-1), capped (defaults 100 ms, 2 s). */
  retryBaseDelayMs?: number;
  retryMaxDelayMs?: number;
  /** Injectable so tests do not wait. */
  sleep?: (ms: number) => Promise<void>;
}

interface Outgoing {
  group: string;
  entry: SendMessageBatchRequestEntry;
  bytes: number;
  /** Sends so far that came back in `Failed`. */
  failures: number;
}

const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class SqsRolloutQueue implements RolloutQueue {
  readonly client: SQSClient;
  readonly queueUrl: string;
  readonly #maxEntryRetries: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(options: SqsRolloutQueueOptions) {
    this.client = options.client;
    this.queueUrl = options.queueUrl;
    this.#maxEntryRetries = options.maxEntryRetries ?? 3;
    this.#baseDelayMs = options.retryBaseDelayMs ?? 100;
    this.#maxDelayMs = options.retryMaxDelayMs ?? 2000;
    this.#sleep = options.sleep ?? defaultSleep;
  }

  async send(messages: readonly QueueMessage[]): Promise<void> {
    // Per group, the messages still to send, in the caller's order.
    const pending = pendingByGroup(messages);

    // Not queued, by reason (an SQS error code): counted, never the bodies, which name workloads and paths.
    const notQueued = new Map<string, number>();
    const giveUp = (group: string, reason: string): void => {
      const left = pending.get(group)?.length ?? 0;
      // The group's later messages are given up with it: sending them would overtake the one that failed.
      notQueued.set(reason, (notQueued.get(reason) ?? 0) + left);
      pending.delete(group);
    };

    for (const [group, queue] of pending) {
      if (queue.some((o) => o.bytes > MAX_BATCH_BYTES)) giveUp(group, 'MessageTooLong');
    }

    while (pending.size > 0) {
      // One wave: the head message of every group that still has one.
      const heads = [...pending.values()].map((queue) => queue[0]).filter((o): o is Outgoing => o !== undefined);
      const retryAttempt = Math.max(...heads.map((o) => o.failures));
      if (retryAttempt > 0)
        await this.#sleep(backoffDelayMs(retryAttempt, this.#baseDelayMs, this.#maxDelayMs, Math.random, 1));

      await this.#sendWave(heads, pending, giveUp);
    }

    if (notQueued.size > 0) {
      const total = [...notQueued.values()].reduce((a, b) => a + b, 0);
      const reasons = [...notQueued].map(([code, count]) => `${code} ×${count}`).join(', ');
      throw new QueueUnavailableError(`${total} of ${messages.length} rollout message(s) were not queued (${reasons})`);
    }
  }

  /** Sends one wave's heads; a sent message leaves its group's queue, a failed one counts towards giving up. */
  async #sendWave(
    heads: readonly Outgoing[],
    pending: Map<string, Outgoing[]>,
    giveUp: (group: string, reason: string) => void,
  ): Promise<void> {
    for (const call of packCalls(heads)) {
      const failed = await this.#sendCall(call);
      for (const outgoing of call) {
        const failure = failed.get(outgoing.entry.Id ?? '');
        if (failure === undefined) {
          pending.get(outgoing.group)?.shift();
          if (pending.get(outgoing.group)?.length === 0) pending.delete(outgoing.group);
          continue;
        }
        outgoing.failures += 1;
        // A sender fault (a malformed entry) fails the same way every time; only the others are worth retrying.
        if (failure.senderFault || outgoing.failures > this.#maxEntryRetries) giveUp(outgoing.group, failure.code);
      }
    }
  }

  /**
   * One SendMessageBatch call; returns the failed entries by id. A call that fails as a whole is QueueUnavailableError.
   */
  async #sendCall(call: readonly Outgoing[]): Promise<Map<string, { code: string; senderFault: boolean }>> {
    let output;
    try {
      output = await this.client.send(
        new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: call.map((o) => o.entry) }),
      );
    } catch (error) {
      // Network, credentials, throttling, a missing queue: the SDK has already retried what it retries. The
      // caller answers 503 so the sender retries; what was queued before this call is deduplicated then.
      const name = error instanceof Error ? error.name : 'unknown error';
      throw new QueueUnavailableError(
        `the rollout queue did not accept a batch of ${call.length} message(s): ${name}`,
        { cause: error },
      );
    }
    const failed = new Map<string, { code: string; senderFault: boolean }>();
    for (const entry of output.Failed ?? []) {
      if (entry.Id !== undefined)
        failed.set(entry.Id, { code: entry.Code ?? 'Failed', senderFault: entry.SenderFault === true });
    }
    return failed;
  }
}

/** Packs entries, in order, into calls of at most 10 entries and 256 KiB of bodies. */
export function packCalls<T extends { bytes: number }>(items: readonly T[]): T[][] {
  const calls: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    if (current.length > 0 && (current.length === MAX_BATCH_ENTRIES || bytes + item.bytes > MAX_BATCH_BYTES)) {
      calls.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += item.bytes;
  }
  if (current.length > 0) calls.push(current);
  return calls;
}

/** The messages to send per group, in the caller's order, each as its SendMessageBatch entry. */
function pendingByGroup(messages: readonly QueueMessage[]): Map<string, Outgoing[]> {
  const pending = new Map<string, Outgoing[]>();
  messages.forEach((message, index) => {
    const group = messageGroupId(message);
    const body = JSON.stringify(message);
    const outgoing: Outgoing = {
      group,
      // The id only has to be unique within one call; the index is, and says nothing about the content.
      entry: {
        Id: `m${index}`,
        MessageBody: body,
        MessageGroupId: group,
        MessageDeduplicationId: deduplicationId(message),
      },
      bytes: Buffer.byteLength(body),
      failures: 0,
    };
    const queue = pending.get(group);
    if (queue) queue.push(outgoing);
    else pending.set(group, [outgoing]);
  });
  return pending;
}
