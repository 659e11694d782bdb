/**
 * The worker loops of `vault-rollout serve`: what the SQS event source mapping does in Lambda, over the local queue
 * — receive a batch, process it, delete what succeeded, release what failed for redelivery after a backoff that
 * grows with its receive count (the group waits meanwhile, so its order holds; other clusters go on). Several loops
 * run at once (`loops`, like Lambda's concurrent invocations): the queue hands each a different group, so a cluster
 * whose API server is slow to answer holds only its own messages. A held message (a continuation or gate looking
 * again later) is woken early by the RolloutWaker's watch when what it waits on ends.
 *
 * A received message is this worker's until it hands it back: while it works, a heartbeat extends the message's
 * visibility every third of the queue's visibility timeout, so a rollout followed for longer than that timeout is
 * neither redelivered (worked twice) nor dead-lettered. Each group is handed back as soon as it is worked.
 *
 * The queue answering `false` (to the heartbeat, a delete, a release or a defer) means it has already taken the
 * message back: it is visible again, received again, or dead-lettered. That is an error — logged with the message
 * id and counted (VisibilityLost) — and the worker then does nothing more with that message: no delete or re-send
 * by id, which could drop or duplicate what another receive now holds. The redelivery runs it again, and the
 * restart record makes that run find its workloads `unchanged`; what is lost is a backoff or a gate's wait.
 */
import { METRICS } from '../kernel/telemetry.ts';
import { processBatch, type GroupOutcome, type WorkerDeps } from '../pipeline/worker.ts';
import type { RolloutWaker } from '../pipeline/rollout-waker.ts';
import { redeliveryBackoffMs, type LocalRolloutQueue, type ReceivedRolloutMessage } from '../queue/local-queue.ts';

export interface LocalWorker {
  stop(): Promise<void>;
  /** Resolves when every message sent so far has been worked (delivered or dead-lettered). */
  idle(): Promise<void>;
  /**
   * When a loop last started an iteration (epoch ms): every poll of an idle loop counts, so a stale one means stuck.
   */
  lastIterationAt(): number;
}

export interface LocalWorkerOptions {
  pollMs?: number;
  retryDelayMs?: number;
  /** How often the messages being worked get their visibility extended (default a third of the queue's timeout). */
  heartbeatMs?: number;
  /** Loops receiving and working at once (default 4): each works the groups the queue hands it. */
  loops?: number;
  /**
   * Wakes held messages when a watch sees the rollouts they wait on end (default: none, they come back at their delay).
   */
  waker?: RolloutWaker;
}

/** Loops per `serve` at most: each holds at most one receive (10 messages) in flight. */
export const MAX_LOOPS = 32;

type HandBack = 'extendVisibility' | 'delete' | 'release' | 'defer';

export function startLocalWorker(
  queue: LocalRolloutQueue,
  deps: WorkerDeps,
  options: LocalWorkerOptions = {},
): LocalWorker {
  const heartbeatMs = options.heartbeatMs ?? Math.max(1, Math.floor(queue.visibilityTimeoutMs / 3));
  const context: WorkContext = { queue, deps, options, heartbeatMs };
  let running = true;
  let busy = 0;
  let lastIterationAt = Date.now();
  const loop = async () => {
    while (running) {
      lastIterationAt = Date.now();
      const batch = await queue.receive({ max: 10, waitMs: options.pollMs ?? 250 });
      if (batch.length === 0) continue;
      busy++;
      try {
        await workBatch(batch, context);
      } finally {
        busy--;
      }
    }
  };
  const loops = Array.from({ length: Math.max(1, Math.min(MAX_LOOPS, options.loops ?? 4)) }, () => loop());
  return {
    lastIterationAt: () => lastIterationAt,
    stop: async () => {
      running = false;
      // Its watches would keep the process alive; what they waited on comes back at its delay.
      options.waker?.close();
      await Promise.all(loops);
    },
    idle: async () => {
      for (;;) {
        const { available, inFlight } = queue.counts();
        if (available === 0 && inFlight === 0 && busy === 0) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** What working a batch needs: the queue, the worker's dependencies and options, the heartbeat's interval. */
interface WorkContext {
  readonly queue: LocalRolloutQueue;
  readonly deps: WorkerDeps;
  readonly options: LocalWorkerOptions;
  readonly heartbeatMs: number;
}

/** Works one received batch; whatever no group handed back goes back for redelivery, after a backoff. */
async function workBatch(batch: ReceivedRolloutMessage[], context: WorkContext): Promise<void> {
  const { deps } = context;
  const held = new HeldBatch(batch, context);
  held.startHeartbeat();
  try {
    await processBatch(batch, {
      deadLetter: (record, reason) => held.deadLetter(record, reason),
      ...deps,
      onGroupDone: async (group) => {
        await deps.onGroupDone?.(group);
        await held.handBack(group.messageIds, group);
      },
    });
  } catch (e) {
    deps.telemetry.error('the worker failed on a batch; its messages will be redelivered', {
      messages: held.size,
      error: e instanceof Error ? e.message : String(e),
    });
  } finally {
    held.stopHeartbeat();
    // Whatever no group handed back (the batch failed as a whole) goes back for redelivery, after a backoff.
    const left = held.messageIds();
    if (left.length > 0) await held.handBack(left, { failed: left, deferred: [] });
    // A heartbeat that was under way at the first stop may have scheduled one more.
    held.stopHeartbeat();
  }
}

/**
 * The messages of one batch this worker still holds: the heartbeat extends their visibility, and each is handed
 * back (deleted, released, deferred) or dead-lettered once.
 */
class HeldBatch {
  readonly #held: Map<string, ReceivedRolloutMessage>;
  readonly #context: WorkContext;
  #beat: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;

  constructor(batch: readonly ReceivedRolloutMessage[], context: WorkContext) {
    this.#held = new Map(batch.map((m) => [m.messageId, m]));
    this.#context = context;
  }

  get size(): number {
    return this.#held.size;
  }

  messageIds(): string[] {
    return [...this.#held.keys()];
  }

  startHeartbeat(): void {
    this.#timer = setTimeout(() => {
      this.#beat = this.#extendAll().finally(() => {
        if (this.#held.size > 0) this.startHeartbeat();
      });
    }, this.#context.heartbeatMs);
  }

  stopHeartbeat(): void {
    clearTimeout(this.#timer);
  }

  async #extendAll(): Promise<void> {
    const { queue, deps } = this.#context;
    for (const m of [...this.#held.values()]) {
      let extended: boolean;
      try {
        extended = await queue.extendVisibility(m.receiptHandle, queue.visibilityTimeoutMs);
      } catch (e) {
        deps.telemetry.warn("could not extend a message's visibility; trying again at the next heartbeat", {
          messageId: m.messageId,
          error: e instanceof Error ? e.message : String(e),
        });
        continue;
      }
      // Handed back meanwhile: the hand-back's answer is the one that counts.
      if (!extended && this.#held.delete(m.messageId)) reportLost(deps, m, 'extendVisibility');
    }
  }

  /** Hands back a group's messages: deferred (and watched, with a waker), released when failed, else deleted. */
  async handBack(messageIds: readonly string[], outcome: Pick<GroupOutcome, 'failed' | 'deferred'>): Promise<void> {
    const { queue, deps, options } = this.#context;
    const mine = messageIds.flatMap((id) => this.#held.get(id) ?? []);
    for (const m of mine) this.#held.delete(m.messageId);
    // A heartbeat under way finishes first, so it never lands after (and undoes) a defer or release.
    await this.#beat;
    const holds = new Map(outcome.deferred.map((d) => [d.messageId, d]));
    for (const m of mine) {
      const hold = holds.get(m.messageId);
      const operation: HandBack =
        hold !== undefined ? 'defer' : outcome.failed.includes(m.messageId) ? 'release' : 'delete';
      const done =
        operation === 'defer'
          ? await queue.defer(m.receiptHandle, hold?.delayMs ?? 0)
          : operation === 'release'
            ? await queue.release(m.receiptHandle, redeliveryBackoffMs(m.receiveCount, options.retryDelayMs ?? 1000))
            : await queue.delete(m.receiptHandle);
      if (!done) reportLost(deps, m, operation);
      // Woken early: visible now under the same receipt handle, which a receive since (the delay ran out) has
      // made stale, so a late wake does nothing.
      else if (hold?.watch && options.waker)
        options.waker.watch(hold.watch, () => void queue.release(m.receiptHandle).catch(() => undefined));
    }
  }

  /**
   * A refused message goes to the dead letters with its reason, kept for an operator (never executed); once there it
   * is no longer this worker's to hand back.
   */
  async deadLetter(record: { messageId: string }, reason: string): Promise<void> {
    const m = this.#held.get(record.messageId);
    if (m === undefined || !(await this.#context.queue.deadLetter(m.receiptHandle, reason)))
      throw new Error(`message ${record.messageId} is no longer in flight`);
    this.#held.delete(record.messageId);
  }
}

/** The queue took a message back before this worker handed it back: said, and counted. */
function reportLost(deps: WorkerDeps, message: ReceivedRolloutMessage, operation: HandBack): void {
  deps.telemetry.error(
    'the queue took back a message the worker had not handed back: it will be redelivered, and its restarts are recorded, so this worker does nothing more with it',
    { messageId: message.messageId, group: message.groupId, operation },
  );
  deps.telemetry.metric(METRICS.visibilityLost, 1, 'Count');
}
