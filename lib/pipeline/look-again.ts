/**
 * The one piece that turns a `lookAgainAfter(ms)` (lib/plan/look-again.ts) into something the runtime's queue does,
 * for every wait of the worker — a rollout or sync followed by a continuation, a wave's gate, a rollout slot, a
 * settle window. The worker never sleeps: the message goes back to the queue and the worker goes on.
 *
 * - Held: the message stays invisible for `ms` (SQS ChangeMessageVisibility in Lambda and `worker`; the SQLite
 *   queue's visible_at in `serve`), then comes back. A long-lived process may end the hold early when a watch sees
 *   what the message waits on change (`watch`, lib/pipeline/rollout-waker.ts).
 * - Re-sent: after HOLDS_BEFORE_RESEND holds (each hold is a receive, and the queue dead-letters a message at its
 *   fifth), or when the message must remember something new (a gate's pause start), a fresh copy one round later goes
 *   out (a new deduplication id) and this one is acknowledged.
 */
import type { QueueMessage } from '../queue/rollout-message.ts';
import {
  HOLDS_BEFORE_RESEND,
  type BatchOutcome,
  type QueueRecord,
  type WatchedWorkload,
  type WorkerDeps,
} from './worker-deps.ts';

export interface LookAgain {
  /** The message(s) being worked: one, or a settled burst (held together). */
  records: readonly QueueRecord[];
  ms: number;
  /**
   * Its fresh copy one round later, not to be looked at before `lookAt` (ISO: a FIFO queue has no per-message
   * delay, so the copy carries its own and its first receive only holds it); undefined when it has used up its
   * rounds (it is then acknowledged).
   */
  fresh: (lookAt: string) => QueueMessage | undefined;
  /** Re-send now whatever the holds (the fresh copy carries state the held one lacks). */
  resend?: boolean;
  /** What a watch may wake it for before `ms` (long-lived runtimes only). */
  watch?: WatchedWorkload[];
  /** For the log lines: what waits and why. */
  fields: Record<string, unknown>;
}

/** True: handed back (the record is acknowledged, or held); false: it could not be, so redeliver it. */
export async function lookAgainAfter(deps: WorkerDeps, outcome: BatchOutcome, look: LookAgain): Promise<boolean> {
  const holds = Math.max(...look.records.map((r) => (r.receiveCount ?? 1) - 1));
  if (!look.resend && holds < HOLDS_BEFORE_RESEND) {
    outcome.deferred.push(
      ...look.records.map((r) => ({
        messageId: r.messageId,
        delayMs: look.ms,
        ...(look.watch && look.watch.length > 0 ? { watch: look.watch } : {}),
      })),
    );
    deps.telemetry.info('looking again later', { ...look.fields, delayMs: look.ms });
    return true;
  }
  const fresh = look.fresh(new Date((deps.now ?? Date.now)() + look.ms).toISOString());
  if (fresh === undefined) {
    deps.telemetry.warn('giving up looking again: out of rounds', look.fields);
    return true;
  }
  if (!deps.queue) {
    deps.telemetry.warn('no queue to send a fresh copy to; the message will be redelivered', look.fields);
    return false;
  }
  try {
    await deps.queue.send([fresh]);
  } catch (e) {
    deps.telemetry.warn('could not re-send the message to look again later; it will be redelivered', {
      ...look.fields,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  deps.telemetry.info('looking again later (re-sent)', { ...look.fields, delayMs: look.ms });
  return true;
}
