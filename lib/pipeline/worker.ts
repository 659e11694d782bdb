/**
 * The worker: rollout messages in, restarts out. A message carries Vault changes for one cluster, never targets:
 * the worker plans them with its own routing table and restarts only what that plan puts in the cluster of the
 * message group. Messages of one cluster arrive in order (FIFO group = cluster); when one fails, the later
 * messages of its group in the batch are returned unprocessed too, so order holds on redelivery. A message with a
 * failed target is redelivered and, after the queue's maxReceiveCount, lands in the dead-letter queue: nothing is
 * dropped. Re-running a message is safe: targets already restarted are `unchanged`.
 *
 * A message that cannot be honoured — unreadable, another format, a cluster that is not its group or not in the
 * table, changes that plan nothing in its cluster, a change of a halted rotation, a later wave no passed gate
 * released (lib/pipeline/wave-guard.ts) — is REFUSED: logged with the reason, counted in the RefusedMessages
 * metric, and dead-lettered with the reason (`deadLetter`) without executing anything. It is not redelivered, so a
 * forged message can neither run nor hold the real messages of its group behind it, and a change refused because
 * the sender planned with another table is kept where an operator finds it, not lost.
 */
import { workCluster } from './cluster-step.ts';
import { workGate } from './gate-worker.ts';
import { unitsOf } from './message-units.ts';
import { noticeDeadLetter } from './rotation-notices.ts';
import type { BatchOutcome, QueueRecord, WorkerDeps } from './worker-deps.ts';

export * from './worker-deps.ts';
export { planGate, waveTargetState, type GatePlan } from './gate-worker.ts';
export { planMessage, type MessagePlan } from './message-units.ts';
export { MAX_CONTINUATION_MS, SLOT_LOOK_MS } from './cluster-step.ts';

const emptyOutcome = (): BatchOutcome => ({ failed: [], refused: [], results: [], deferred: [], halts: [] });

export async function processBatch(records: readonly QueueRecord[], deps: WorkerDeps): Promise<BatchOutcome> {
  const outcome = emptyOutcome();
  // Groups (clusters, gates) are independent: work them concurrently, each in order.
  const groups = new Map<string, QueueRecord[]>();
  for (const r of records) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  await Promise.all(
    [...groups.values()].map(async (group) => {
      const own = emptyOutcome();
      await workGroup(group, deps, own);
      await deadLetterRefused(group, deps, own);
      outcome.failed.push(...own.failed);
      outcome.refused.push(...own.refused);
      outcome.results.push(...own.results);
      outcome.deferred.push(...own.deferred);
      outcome.halts.push(...own.halts);
      await deps.onGroupDone?.({
        messageIds: group.map((r) => r.messageId),
        failed: own.failed,
        deferred: own.deferred,
      });
    }),
  );
  deps.telemetry.flush();
  return outcome;
}

/** Hands each refused message of a group to the dead letters; one that cannot be is redelivered instead. */
async function deadLetterRefused(
  group: readonly QueueRecord[],
  deps: WorkerDeps,
  outcome: BatchOutcome,
): Promise<void> {
  if (!deps.deadLetter) return;
  for (const { messageId, reason } of outcome.refused) {
    const record = group.find((r) => r.messageId === messageId);
    if (!record) continue;
    try {
      await deps.deadLetter(record, reason);
      await noticeDeadLetter(deps, record, reason);
    } catch (e) {
      deps.telemetry.warn('could not dead-letter a refused message; it will be redelivered', {
        messageId,
        error: e instanceof Error ? e.name : String(e),
      });
      outcome.failed.push(messageId);
    }
  }
}

async function workGroup(group: readonly QueueRecord[], deps: WorkerDeps, outcome: BatchOutcome): Promise<void> {
  let blocked = false;
  for (const unit of await unitsOf(group, deps, outcome)) {
    const ids = unit.kind === 'gate' ? [unit.record.messageId] : unit.records.map((r) => r.messageId);
    if (blocked) {
      outcome.failed.push(...ids);
      continue;
    }
    const ok =
      unit.kind === 'gate'
        ? await workGate(unit.record, unit.message, deps, outcome)
        : await workCluster(unit.records, unit.planned, deps, outcome);
    if (!ok) {
      outcome.failed.push(...ids);
      blocked = true;
    }
  }
}
