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
import type { FollowSettings, RolloutResult } from '../engine/types.ts';
import { executeRollouts } from './kube-executor.ts';
import { decideWait } from '../plan/look-again.ts';
import { lookAgainAfter } from './look-again.ts';
import { METRICS } from '../kernel/telemetry.ts';
import { planRollouts, type Plan, type RolloutTarget } from '../plan/planner.ts';
import { settleDelay } from '../plan/waves.ts';
import {
  changeFromQueue,
  followUpMessage,
  gateGroupId,
  isGateMessage,
  followGroupId,
  MAX_FOLLOW_ROUNDS,
  parseRolloutMessage,
  pendingName,
  type GateMessage,
  type RolloutMessage,
} from '../queue/rollout-message.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { workGate } from './gate-worker.ts';
import {
  HOLDS_BEFORE_RESEND,
  refuse,
  type BatchOutcome,
  type QueueRecord,
  type WatchedWorkload,
  type WorkerDeps,
} from './worker-deps.ts';
import { clusterMessageRefusal, markWavesStarted } from './wave-guard.ts';
import { noticeDeadLetter, noticeLook } from './rotation-notices.ts';

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
export function planMessage(
  table: RoutingTable,
  record: Pick<QueueRecord, 'messageId' | 'body' | 'groupId'>,
): MessagePlan {
  const message = parseRolloutMessage(record.body);
  if ('error' in message) return { refused: message.error };
  if (isGateMessage(message)) return { refused: 'a gate message outside a gate group' };
  // A continuation has a group of its own (its cluster and changes); one from before continuations came in the cluster's.
  const groups = message.follow
    ? [message.cluster, followGroupId(message.cluster, message.changes)]
    : [message.cluster];
  if (!groups.includes(record.groupId))
    return {
      refused: `the message names cluster "${message.cluster.slice(0, 63)}" but was sent to group "${record.groupId.slice(0, 63)}"`,
    };
  if (!table.clusters.has(message.cluster))
    return { refused: `cluster "${message.cluster.slice(0, 63)}" is not in the routing table` };
  const changes = message.changes.map((c, i) => changeFromQueue(c, `message ${record.messageId} changes[${i}]`));
  const plan = planRollouts(table, changes);
  const targets = plan.targets.filter((t) => t.cluster === message.cluster);
  if (targets.length === 0)
    return {
      refused: `its ${message.changes.length} change(s) plan nothing in cluster "${message.cluster}" under this routing table`,
    };
  return {
    message,
    changes,
    plan,
    targets,
    changeIds: [...new Set(message.changes.map((c) => c.id))],
    ignoredElsewhere: plan.targets.length - targets.length,
  };
}

/** A fresh copy received this close to its time is looked at now. */
const EARLY_SLACK_MS = 50;
/** The longest one hold of a copy received early (a look never asks for more than LOOK_MAX_MS; a gate's pause may). */
const MAX_HOLD_MS = 15 * 60_000;

/** What one step of a group works: a cluster message (or, with settle, several taken together) or a gate. */
type Unit =
  | { kind: 'cluster'; records: QueueRecord[]; planned: Extract<MessagePlan, { message: RolloutMessage }> }
  | { kind: 'gate'; record: QueueRecord; message: GateMessage };

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

/**
 * A group's messages as units of work, refusals acknowledged on the way. Settle: when the routes of a
 * cluster's messages set `settle`, the group's messages are held while the newest is younger than the window (at
 * most SETTLE_MAX_WINDOWS windows after the oldest, and at most HOLDS_BEFORE_RESEND holds), then worked as ONE
 * plan: each workload gets one restart recording every version.
 */
async function unitsOf(group: readonly QueueRecord[], deps: WorkerDeps, outcome: BatchOutcome): Promise<Unit[]> {
  const units: Unit[] = [];
  const clusterUnits: Array<Extract<Unit, { kind: 'cluster' }>> = [];
  const now = (deps.now ?? Date.now)();
  for (const record of group) {
    const parsed = parseRolloutMessage(record.body);
    // A fresh copy of a wait (a gate, a continuation) received before its time is only held until then: a FIFO
    // queue has no per-message delay. At most MAX_HOLD_MS a time, so a far-off time ends in the dead letters.
    const lookAt = 'error' in parsed ? undefined : isGateMessage(parsed) ? parsed.lookAt : parsed.follow?.lookAt;
    const early = lookAt === undefined ? 0 : Date.parse(lookAt) - now;
    // Held until its time, a continuation's copy comes back early only when a watch woke it: then it looks now.
    const woken =
      !('error' in parsed) && !isGateMessage(parsed) && parsed.follow !== undefined && (record.receiveCount ?? 1) > 1;
    if (early > EARLY_SLACK_MS && !woken) {
      // A continuation's fresh copy is watched like a held one: a rollout that ends before its time wakes it.
      const watch =
        'error' in parsed || isGateMessage(parsed) || !parsed.follow?.pending
          ? []
          : watchedOf(deps.table, record, parsed.follow.pending);
      outcome.deferred.push({
        messageId: record.messageId,
        delayMs: Math.min(MAX_HOLD_MS, early),
        ...(watch.length > 0 ? { watch } : {}),
      });
      continue;
    }
    if (!('error' in parsed) && isGateMessage(parsed)) {
      if (record.groupId !== gateGroupId(parsed.changes))
        refuse(
          deps,
          outcome,
          record,
          `a gate message sent to group "${record.groupId.slice(0, 63)}", not to the group of its changes`,
        );
      else units.push({ kind: 'gate', record, message: parsed });
      continue;
    }
    const planned = planMessage(deps.table, record);
    if ('refused' in planned) {
      refuse(deps, outcome, record, planned.refused);
      continue;
    }
    const refusal = await clusterMessageRefusal(deps.table, deps.rotations, planned.message.cluster, planned);
    if (refusal !== undefined) {
      refuse(deps, outcome, record, refusal);
      continue;
    }
    const unit = { kind: 'cluster' as const, records: [record], planned };
    units.push(unit);
    // Settle gathers the cluster step's messages; a continuation (its own group) only looks.
    if (!planned.message.follow) clusterUnits.push(unit);
  }
  const settleMs = Math.max(
    0,
    ...clusterUnits.flatMap((u) =>
      u.planned.targets.flatMap((t) =>
        t.routes.map((name) => deps.table.routes.find((r) => r.name === name)?.policy.settleMs ?? 0),
      ),
    ),
  );
  if (settleMs === 0 || clusterUnits.length === 0) return units;
  const accepted = clusterUnits.map((u) => Date.parse(u.planned.message.acceptedAt)).filter((t) => !Number.isNaN(t));
  const holds = Math.max(...clusterUnits.flatMap((u) => u.records.map((r) => (r.receiveCount ?? 1) - 1)));
  const delayMs = settleDelay(accepted, settleMs, now);
  const cluster = clusterUnits[0]?.planned.message.cluster ?? '';
  // The one waiting decision; a settle hold is never re-sent (the burst must come back together, in order), so past
  // HOLDS_BEFORE_RESEND holds it is worked now.
  const wait = decideWait({
    pending: delayMs > 0 && holds < HOLDS_BEFORE_RESEND,
    now,
    since: Math.min(...accepted, now),
    hintMs: delayMs,
  });
  if (wait.action === 'lookAgainAfter') {
    // Below HOLDS_BEFORE_RESEND holds (the decision above): always a hold, never a fresh copy.
    await lookAgainAfter(deps, outcome, {
      records: clusterUnits.flatMap((u) => u.records),
      ms: wait.ms,
      fresh: () => undefined,
      fields: { settling: cluster, messages: clusterUnits.length },
    });
    return units.filter((u) => !clusterUnits.includes(u as Extract<Unit, { kind: 'cluster' }>));
  }
  if (clusterUnits.length === 1) return units;
  // One plan for the burst: the union of the changes, the oldest acceptance.
  const messages = clusterUnits.map((u) => u.planned.message);
  const union: RolloutMessage = {
    v: messages[0]?.v ?? 2,
    cluster,
    changes: messages.flatMap((m) => m.changes),
    acceptedAt: [...messages.map((m) => m.acceptedAt)].sort()[0] ?? '',
  };
  const records = clusterUnits.flatMap((u) => u.records);
  const planned = planMessage(deps.table, {
    messageId: records
      .map((r) => r.messageId)
      .join('+')
      .slice(0, 200),
    groupId: cluster,
    body: JSON.stringify(union),
  });
  if ('refused' in planned) return units; // cannot happen (each part planned); work them one by one then
  deps.telemetry.info("settled: one plan for the cluster's burst", {
    cluster,
    messages: records.length,
    changes: union.changes.length,
  });
  return [
    ...units.filter((u) => !clusterUnits.includes(u as Extract<Unit, { kind: 'cluster' }>)),
    { kind: 'cluster', records, planned },
  ];
}

/** The named workloads among `pending` that a continuation waits on, as a watch needs them (others come back at their delay). */
function watchedOf(table: RoutingTable, record: QueueRecord, pending: readonly string[]): WatchedWorkload[] {
  const planned = planMessage(table, record);
  if ('refused' in planned) return [];
  const names = new Set(pending);
  return planned.targets.flatMap((t) =>
    t.name !== undefined && names.has(pendingName({ namespace: t.namespace, kind: t.kind, name: t.name }))
      ? [
          {
            cluster: planned.message.cluster,
            namespace: t.namespace,
            kind: t.kind,
            name: t.name,
            restartToken: t.restartToken,
          },
        ]
      : [],
  );
}

/**
 * The longest a continuation looks: each rollout's and sync's own deadline ends its wait first (its look answers
 * `timeout`); this is the net under a wait for a slot that never frees.
 */
export const MAX_CONTINUATION_MS = 25 * 3_600_000;

/** How soon a target waiting for a rollout slot is tried again (a release in this process wakes it earlier). */
export const SLOT_LOOK_MS = 2_000;

/**
 * One cluster message (or a settled burst), or one look of a continuation: read, decide, admit, patch, record, take
 * ONE look at where the restarts stand, and hand what is still under way to a continuation. The
 * cluster's next message never waits for a rollout. False: redeliver.
 */
async function workCluster(
  records: readonly QueueRecord[],
  planned: Extract<MessagePlan, { message: RolloutMessage }>,
  deps: WorkerDeps,
  outcome: BatchOutcome,
): Promise<boolean> {
  const now = deps.now ?? Date.now;
  const record = records[0] as QueueRecord;
  const messageId = records.map((r) => r.messageId).join(',');
  deps.telemetry.setCorrelationId(planned.changeIds[0]);
  const { targets, message } = planned;
  const startedAt = now();
  const since = message.follow ? Date.parse(message.follow.since) : undefined;
  if (!message.follow) {
    try {
      await markWavesStarted(deps.table, deps.rotations, message.cluster, planned, new Date(startedAt).toISOString());
    } catch (e) {
      deps.telemetry.warn("could not record the wave's start; the message will be redelivered", {
        messageId,
        cluster: message.cluster,
        error: e instanceof Error ? e.name : String(e),
      });
      return false;
    }
  }
  // A continuation reports what it still waits on, and anything it restarts or fails on now; the rest was answered.
  const pending = message.follow?.pending ? new Set(message.follow.pending) : undefined;
  const reported = (r: RolloutResult) =>
    pending === undefined || r.outcome !== 'unchanged' || pending.has(pendingName(r));
  const follow: FollowSettings | undefined = deps.follow
    ? { budgetMs: 0, once: true, ...(since === undefined ? {} : { since }), ...(pending ? { only: reported } : {}) }
    : undefined;
  const out = (await executeRollouts(deps.table, targets, { ...deps.executor, ...(follow ? { follow } : {}) })).filter(
    reported,
  );
  outcome.results.push(...out);
  for (const r of out) {
    deps.telemetry.metric(METRICS.targets, 1, 'Count', { outcome: r.outcome, cluster: r.cluster });
    if (r.outcome === 'restarted') {
      const target = targets.find((t) => t.restartToken === r.restartToken);
      const newest = Math.max(
        ...(target?.secrets ?? []).map((s) => Date.parse(s.time)).filter((t) => !Number.isNaN(t)),
      );
      if (Number.isFinite(newest))
        deps.telemetry.metric(METRICS.lag, Math.max(0, now() - newest), 'Milliseconds', { cluster: r.cluster });
    }
    // A rollout seen ending, by the step that patched it or the continuation that followed it: patch to end.
    if (
      (r.outcome === 'restarted' || message.follow) &&
      (r.rollout === 'complete' || r.rollout === 'failed' || r.rollout === 'timeout')
    )
      deps.telemetry.metric(METRICS.rolloutDuration, Math.max(0, now() - (since ?? startedAt)), 'Milliseconds', {
        cluster: r.cluster,
        outcome: r.rollout,
      });
  }
  const failures = out.filter((r) => r.outcome === 'failed');
  // Rotation events go to the outbox; a loop elsewhere sends them, so this never waits on a sink.
  const notice = (finished: boolean, expired?: RolloutResult[]) =>
    noticeLook(deps, { cluster: message.cluster, changes: planned.changes, plan: planned.plan, targets }, out, {
      sinceMs: since ?? startedAt,
      finished,
      ...(expired ? { expired } : {}),
    });
  const group = record.groupId;
  deps.telemetry.info(message.follow ? 'continuation looked' : 'rollout message done', {
    messageId,
    cluster: message.cluster,
    ...(message.follow ? { round: message.follow.round } : {}),
    results: out.map((r) => ({
      namespace: r.namespace,
      kind: r.kind,
      name: r.name,
      outcome: r.outcome,
      reason: r.reason,
      attempts: r.attempts,
      ...(r.rollout ? { rollout: r.rollout, rolloutReason: r.rolloutReason } : {}),
    })),
  });
  if (failures.length > 0) {
    await notice(false);
    if (failures.some((f) => f.reason === 'unauthorized' || f.reason === 'credentials'))
      deps.invalidate?.(message.cluster);
    return false;
  }
  const deferred = out.filter((r) => r.outcome === 'deferred');
  // Waiting for a rollout slot (rollout.maxUnavailable) and no continuation to hand it to: the message comes back.
  if (!deps.follow) {
    await notice(deferred.length === 0);
    return deferred.length === 0;
  }
  const waiting = out.filter((r) => r.rollout === 'progressing' || r.outcome === 'deferred');
  const wait = decideWait({
    pending: waiting.length > 0,
    now: now(),
    since: since ?? startedAt,
    ...(message.follow?.until ? { deadline: Date.parse(message.follow.until) } : {}),
    // Only slots to wait for: try again soon (a freed slot is worth taking at once).
    ...(deferred.length === waiting.length ? { hintMs: SLOT_LOOK_MS } : {}),
  });
  const fields = {
    messageId,
    group,
    cluster: message.cluster,
    waiting: waiting.length,
    progressing: waiting.length - deferred.length,
    deferred: deferred.length,
  };
  await notice(
    wait.action === 'finish',
    wait.action === 'expire' ? waiting.filter((r) => r.outcome !== 'deferred') : undefined,
  );
  if (wait.action === 'finish') {
    if (message.follow)
      deps.telemetry.info('continuation finished: nothing left to wait for', {
        ...fields,
        round: message.follow.round,
      });
    return true;
  }
  if (wait.action === 'expire') {
    deps.telemetry.warn('continuation expired: still under way at its deadline', {
      ...fields,
      why: wait.why,
      still: waiting.map(pendingName).slice(0, 20),
    });
    return true;
  }
  const names = waiting.map(pendingName);
  const watch: WatchedWorkload[] = waiting
    .filter((r) => r.outcome !== 'deferred')
    .map((r) => ({
      cluster: r.cluster,
      namespace: r.namespace,
      kind: r.kind,
      name: r.name,
      restartToken: r.restartToken,
    }));
  if (!message.follow) {
    // The cluster step: the continuation goes out before this message is acknowledged (a worker killed in between
    // leaves this message to be redelivered, which finds its workloads unchanged and sends it again).
    const lookAt = new Date(now() + wait.ms).toISOString();
    const next = followUpMessage(
      message,
      new Date(startedAt).toISOString(),
      names,
      startedAt + MAX_CONTINUATION_MS,
      lookAt,
    );
    try {
      await deps.follow.requeue(next);
    } catch (e) {
      deps.telemetry.warn('could not queue the continuation; the message will be redelivered', {
        ...fields,
        error: e instanceof Error ? e.name : String(e),
      });
      return false;
    }
    deps.telemetry.info('restarts under way; continuation queued', { ...fields, lookInMs: wait.ms });
    return true;
  }
  return lookAgainAfter(deps, outcome, {
    records,
    ms: wait.ms,
    // This look restarted something new (a consumer once its operator synced, a target whose slot freed): only a
    // fresh copy can name it among what the next look waits on.
    resend: pending !== undefined && names.some((name) => !pending.has(name)),
    watch,
    fields: { ...fields, round: message.follow.round },
    fresh: (lookAt) =>
      (message.follow?.round ?? 0) >= MAX_FOLLOW_ROUNDS
        ? undefined
        : followUpMessage(message, message.follow?.since ?? '', names, undefined, lookAt),
  });
}
