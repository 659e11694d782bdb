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
import { executeRollouts } from './kube-executor.ts';
import { METRICS } from '../kernel/telemetry.ts';
import { planRollouts, type Plan, type RolloutTarget } from '../plan/planner.ts';
import { settleDelay } from '../plan/waves.ts';
import {
  changeFromQueue,
  followUpMessage,
  gateGroupId,
  isGateMessage,
  MAX_FOLLOW_ROUNDS,
  parseRolloutMessage,
  type GateMessage,
  type RolloutMessage,
} from '../queue/rollout-message.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { workGate } from './gate-worker.ts';
import { HOLDS_BEFORE_RESEND, refuse, type BatchOutcome, type QueueRecord, type WorkerDeps } from './worker-deps.ts';
import { clusterMessageRefusal } from './wave-guard.ts';

export * from './worker-deps.ts';
export { planGate, waveTargetState, type GatePlan } from './gate-worker.ts';

export type MessagePlan =
  | {
      message: RolloutMessage;
      /** The message's changes and their whole plan (every cluster): what the wave guard needs, planned once. */
      changes: SecretChange[];
      plan: Plan;
      targets: RolloutTarget[];
      changeIds: string[];
      ignoredElsewhere: number;
    }
  | { refused: string };

/**
 * What a message may restart: the plan of its changes under this worker's routing table, in the message group's
 * cluster only. Pure, so the refusal rules are table-tested.
 */
export function planMessage(table: RoutingTable, record: Pick<QueueRecord, 'messageId' | 'body' | 'groupId'>): MessagePlan {
  const message = parseRolloutMessage(record.body);
  if ('error' in message) return { refused: message.error };
  if (isGateMessage(message)) return { refused: 'a gate message outside a gate group' };
  if (message.cluster !== record.groupId) return { refused: `the message names cluster "${message.cluster.slice(0, 63)}" but was sent to group "${record.groupId.slice(0, 63)}"` };
  if (!table.clusters.has(record.groupId)) return { refused: `cluster "${record.groupId.slice(0, 63)}" is not in the routing table` };
  const changes = message.changes.map((c, i) => changeFromQueue(c, `message ${record.messageId} changes[${i}]`));
  const plan = planRollouts(table, changes);
  const targets = plan.targets.filter((t) => t.cluster === record.groupId);
  if (targets.length === 0) return { refused: `its ${message.changes.length} change(s) plan nothing in cluster "${record.groupId}" under this routing table` };
  return { message, changes, plan, targets, changeIds: [...new Set(message.changes.map((c) => c.id))], ignoredElsewhere: plan.targets.length - targets.length };
}

/** What one step of a group works: a cluster message (or, with settle, several taken together) or a gate. */
type Unit = { kind: 'cluster'; records: QueueRecord[]; planned: Extract<MessagePlan, { message: RolloutMessage }> } | { kind: 'gate'; record: QueueRecord; message: GateMessage };

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
      await deps.onGroupDone?.({ messageIds: group.map((r) => r.messageId), failed: own.failed, deferred: own.deferred });
    }),
  );
  deps.telemetry.flush();
  return outcome;
}

/** Hands each refused message of a group to the dead letters; one that cannot be is redelivered instead. */
async function deadLetterRefused(group: readonly QueueRecord[], deps: WorkerDeps, outcome: BatchOutcome): Promise<void> {
  if (!deps.deadLetter) return;
  for (const { messageId, reason } of outcome.refused) {
    const record = group.find((r) => r.messageId === messageId);
    if (!record) continue;
    try {
      await deps.deadLetter(record, reason);
    } catch (e) {
      deps.telemetry.warn('could not dead-letter a refused message; it will be redelivered', { messageId, error: e instanceof Error ? e.name : String(e) });
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
    const ok = unit.kind === 'gate' ? await workGate(unit.record, unit.message, deps, outcome) : await workCluster(unit.records, unit.planned, deps, outcome);
    if (!ok) {
      outcome.failed.push(...ids);
      blocked = true;
    }
  }
}

/**
 * A group's messages as units of work, refusals acknowledged on the way. Settle (issue #12): when the routes of a
 * cluster's messages set `settle`, the group's messages are held while the newest is younger than the window (at
 * most SETTLE_MAX_WINDOWS windows after the oldest, and at most HOLDS_BEFORE_RESEND holds), then worked as ONE
 * plan: each workload gets one restart recording every version.
 */
async function unitsOf(group: readonly QueueRecord[], deps: WorkerDeps, outcome: BatchOutcome): Promise<Unit[]> {
  const units: Unit[] = [];
  const clusterUnits: Array<Extract<Unit, { kind: 'cluster' }>> = [];
  for (const record of group) {
    const parsed = parseRolloutMessage(record.body);
    if (!('error' in parsed) && isGateMessage(parsed)) {
      if (record.groupId !== gateGroupId(parsed.changes)) refuse(deps, outcome, record, `a gate message sent to group "${record.groupId.slice(0, 63)}", not to the group of its changes`);
      else units.push({ kind: 'gate', record, message: parsed });
      continue;
    }
    const planned = planMessage(deps.table, record);
    if ('refused' in planned) {
      refuse(deps, outcome, record, planned.refused);
      continue;
    }
    const refusal = await clusterMessageRefusal(deps.table, deps.rotations, record.groupId, planned);
    if (refusal !== undefined) {
      refuse(deps, outcome, record, refusal);
      continue;
    }
    const unit = { kind: 'cluster' as const, records: [record], planned };
    units.push(unit);
    clusterUnits.push(unit);
  }
  const settleMs = Math.max(0, ...clusterUnits.flatMap((u) => u.planned.targets.flatMap((t) => t.routes.map((name) => deps.table.routes.find((r) => r.name === name)?.policy.settleMs ?? 0))));
  if (settleMs === 0 || clusterUnits.length === 0) return units;
  const now = (deps.now ?? Date.now)();
  const accepted = clusterUnits.map((u) => Date.parse(u.planned.message.acceptedAt)).filter((t) => !Number.isNaN(t));
  const holds = Math.max(...clusterUnits.flatMap((u) => u.records.map((r) => (r.receiveCount ?? 1) - 1)));
  const delayMs = settleDelay(accepted, settleMs, now);
  const cluster = clusterUnits[0]?.records[0]?.groupId ?? '';
  if (delayMs > 0 && holds < HOLDS_BEFORE_RESEND) {
    deps.telemetry.info('settling: holding the cluster\'s changes', { cluster, messages: clusterUnits.length, delayMs });
    outcome.deferred.push(...clusterUnits.flatMap((u) => u.records.map((r) => ({ messageId: r.messageId, delayMs }))));
    return units.filter((u) => u.kind === 'gate');
  }
  if (clusterUnits.length === 1) return units;
  // One plan for the burst: the union of the changes, the oldest acceptance, the earliest follow-up start.
  const messages = clusterUnits.map((u) => u.planned.message);
  const follows = messages.flatMap((m) => (m.follow ? [m.follow] : []));
  const union: RolloutMessage = {
    v: messages[0]?.v ?? 2,
    cluster,
    changes: messages.flatMap((m) => m.changes),
    acceptedAt: [...messages.map((m) => m.acceptedAt)].sort()[0] ?? '',
    ...(follows.length > 0 ? { follow: { since: follows.map((f) => f.since).sort()[0] ?? '', round: Math.max(...follows.map((f) => f.round)) } } : {}),
  };
  const records = clusterUnits.flatMap((u) => u.records);
  const planned = planMessage(deps.table, { messageId: records.map((r) => r.messageId).join('+').slice(0, 200), groupId: cluster, body: JSON.stringify(union) });
  if ('refused' in planned) return units; // cannot happen (each part planned); work them one by one then
  deps.telemetry.info('settled: one plan for the cluster\'s burst', { cluster, messages: records.length, changes: union.changes.length });
  return [...units.filter((u) => u.kind === 'gate'), { kind: 'cluster', records, planned }];
}

/** One cluster message (or a settled burst): restart, follow, hand back what still rolls. False: redeliver. */
async function workCluster(records: readonly QueueRecord[], planned: Extract<MessagePlan, { message: RolloutMessage }>, deps: WorkerDeps, outcome: BatchOutcome): Promise<boolean> {
  const now = deps.now ?? Date.now;
  const record = records[0] as QueueRecord;
  const messageId = records.map((r) => r.messageId).join(',');
  deps.telemetry.setCorrelationId(planned.changeIds[0]);
  const { targets, message } = planned;
  const startedAt = now();
  const since = message.follow ? Date.parse(message.follow.since) : undefined;
  const follow = deps.follow ? { budgetMs: Math.max(0, deps.follow.budgetMs()), ...(since === undefined ? {} : { since }) } : undefined;
  const out = await executeRollouts(deps.table, targets, { ...deps.executor, ...(follow ? { follow } : {}) });
  outcome.results.push(...out);
  for (const r of out) {
    deps.telemetry.metric(METRICS.targets, 1, 'Count', { outcome: r.outcome, cluster: r.cluster });
    if (r.outcome === 'restarted') {
      const target = targets.find((t) => t.restartToken === r.restartToken);
      const newest = Math.max(...(target?.secrets ?? []).map((s) => Date.parse(s.time)).filter((t) => !Number.isNaN(t)));
      if (Number.isFinite(newest)) deps.telemetry.metric(METRICS.lag, Math.max(0, now() - newest), 'Milliseconds', { cluster: r.cluster });
    }
  }
  const failures = out.filter((r) => r.outcome === 'failed');
  deps.telemetry.info('rollout message done', { messageId, cluster: record.groupId, results: out.map((r) => ({ namespace: r.namespace, kind: r.kind, name: r.name, outcome: r.outcome, reason: r.reason, attempts: r.attempts, ...(r.rollout ? { rollout: r.rollout, rolloutReason: r.rolloutReason } : {}) })) });
  if (failures.length > 0) {
    if (failures.some((f) => f.reason === 'unauthorized' || f.reason === 'credentials')) deps.invalidate?.(record.groupId);
    return false;
  }
  // Waiting for a rollout slot (rollout.maxUnavailable) and no follow-up to hand it to: the message comes back.
  if (!deps.follow && out.some((r) => r.outcome === 'deferred')) return false;
  if (deps.follow && out.some((r) => r.rollout === 'progressing' || r.outcome === 'deferred') && (message.follow?.round ?? 0) < MAX_FOLLOW_ROUNDS) {
    // The rollouts outlast this attempt's budget, or wait for a slot: hand them back rather than wait. If the
    // queue cannot take the follow-up, the message itself comes back (it is safe to run again).
    const next = followUpMessage(message, new Date(startedAt).toISOString());
    try {
      await deps.follow.requeue(next);
      deps.telemetry.info('rollouts still progressing; follow-up queued', { messageId, cluster: record.groupId, round: next.follow?.round, progressing: out.filter((r) => r.rollout === 'progressing').length, deferred: out.filter((r) => r.outcome === 'deferred').length });
    } catch (e) {
      deps.telemetry.warn('could not queue the follow-up; the message will be redelivered', { messageId, cluster: record.groupId, error: e instanceof Error ? e.name : String(e) });
      return false;
    }
  }
  return true;
}

