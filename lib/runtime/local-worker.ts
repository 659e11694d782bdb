/**
 * The worker loop of `vault-rollout serve`: what the SQS event source mapping does in Lambda, over the local queue
 * — receive a batch, process it, delete what succeeded, release what failed for redelivery after a backoff that
 * grows with its receive count (the group waits meanwhile, so its order holds; other clusters go on).
 */
import { processBatch, type WorkerDeps } from '../pipeline/worker.ts';
import { redeliveryBackoffMs, type LocalRolloutQueue } from '../queue/local-queue.ts';

export interface LocalWorker {
  stop(): Promise<void>;
  /** Resolves when every message sent so far has been worked (delivered or dead-lettered). */
  idle(): Promise<void>;
}

export function startLocalWorker(queue: LocalRolloutQueue, deps: WorkerDeps, options: { pollMs?: number; retryDelayMs?: number } = {}): LocalWorker {
  let running = true;
  let busy = false;
  const loop = (async () => {
    while (running) {
      const batch = await queue.receive({ max: 10, waitMs: options.pollMs ?? 250 });
      if (batch.length === 0) continue;
      busy = true;
      try {
        // A refused message goes to the dead letters with its reason, kept for an operator (never executed).
        const deadLetter = async (record: { messageId: string }, reason: string): Promise<void> => {
          const handle = batch.find((m) => m.messageId === record.messageId)?.receiptHandle;
          if (handle === undefined || !(await queue.deadLetter(handle, reason))) throw new Error(`message ${record.messageId} is no longer in flight`);
        };
        const { failed, deferred, refused } = await processBatch(batch, { deadLetter, ...deps });
        const gone = new Set(refused.map((r) => r.messageId));
        const failedIds = new Set(failed);
        const delays = new Map(deferred.map((d) => [d.messageId, d.delayMs]));
        for (const m of batch) {
          if (gone.has(m.messageId) && !failedIds.has(m.messageId)) continue;
          const delayMs = delays.get(m.messageId);
          await (delayMs !== undefined ? queue.defer(m.receiptHandle, delayMs) : failedIds.has(m.messageId) ? queue.release(m.receiptHandle, redeliveryBackoffMs(m.receiveCount, options.retryDelayMs ?? 1000)) : queue.delete(m.receiptHandle));
        }
      } finally {
        busy = false;
      }
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
    idle: async () => {
      for (;;) {
        const { available, inFlight } = queue.counts();
        if (available === 0 && inFlight === 0 && !busy) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
