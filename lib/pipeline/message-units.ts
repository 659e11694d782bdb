/**
 * What the worker makes of a group's messages before it works them: each message planned under this worker's own
 * routing table (refused when it cannot be honoured), copies received before their time held until then, and a
 * cluster's burst settled into one plan when its routes ask for a settle window.
 */
import { decideWait } from '../plan/look-again.ts';
import { planRollouts, type Plan, type RolloutTarget } from '../plan/planner.ts';
import { settleDelay } from '../plan/waves.ts';
import {
  changeFromQueue,
  followGroupId,
  gateGroupId,
  isGateMessage,
  parseRolloutMessage,
  pendingName,
  type GateMessage,
  type QueueMessage,
  type RolloutMessage,
  windowGroupId,
} from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { lookAgainAfter } from './look-again.ts';
import { clusterMessageRefusal } from './wave-guard.ts';
import { waitsForItsWindow } from './window-wait.ts';
import {
  HOLDS_BEFORE_RESEND,
  refuse,
  type BatchOutcome,
  type QueueRecord,
  type WatchedWorkload,
  type WorkerDeps,
} from './worker-deps.ts';

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

/** A message the worker's table plans something for in its cluster. */
export type PlannedMessage = Extract<MessagePlan, { message: RolloutMessage }>;

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
  // A continuation has a group of its own (its cluster and changes); one from before continuations came in the
  // cluster's.
  const groups = message.follow
    ? [message.cluster, followGroupId(message.cluster, message.changes)]
    : message.window
      ? [windowGroupId(message.cluster, message.window.opensAt)]
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
export type Unit = ClusterUnit | { kind: 'gate'; record: QueueRecord; message: GateMessage };
type ClusterUnit = { kind: 'cluster'; records: QueueRecord[]; planned: PlannedMessage };

/**
 * A group's messages as units of work, refusals acknowledged on the way. Settle: when the routes of a
 * cluster's messages set `settle`, the group's messages are held while the newest is younger than the window (at
 * most SETTLE_MAX_WINDOWS windows after the oldest, and at most HOLDS_BEFORE_RESEND holds), then worked as ONE
 * plan: each workload gets one restart recording every version.
 */
export async function unitsOf(group: readonly QueueRecord[], deps: WorkerDeps, outcome: BatchOutcome): Promise<Unit[]> {
  const units: Unit[] = [];
  const now = (deps.now ?? Date.now)();
  for (const record of group) {
    const unit = await unitOf(record, deps, outcome, now);
    if (unit) units.push(unit);
  }
  // Settle gathers the cluster step's messages; a continuation (its own group) only looks.
  const settling = units.filter(
    (u): u is ClusterUnit => u.kind === 'cluster' && !u.planned.message.follow && !u.planned.message.window,
  );
  const settled = await settle(units, settling, deps, outcome, now);
  // Maintenance windows: what waits for its window leaves this batch (lib/pipeline/window-wait.ts).
  const inWindow: Unit[] = [];
  for (const unit of mergeWindowWaits(settled, deps))
    if (unit.kind === 'gate' || !(await waitsForItsWindow(unit, deps, outcome, now))) inWindow.push(unit);
  return inWindow;
}

/**
 * The changes of a cluster that waited for the same window opening come back in one group: worked as one plan, so
 * each workload restarts once, onto the newest version of its secrets.
 */
function mergeWindowWaits(units: readonly Unit[], deps: WorkerDeps): Unit[] {
  const byGroup = new Map<string, ClusterUnit[]>();
  for (const u of units)
    if (u.kind === 'cluster' && u.planned.message.window && u.records[0])
      byGroup.set(u.records[0].groupId, [...(byGroup.get(u.records[0].groupId) ?? []), u]);
  const merged = new Map<ClusterUnit, Unit | undefined>();
  for (const group of byGroup.values()) {
    if (group.length < 2) continue;
    const burst = burstUnit(group, deps);
    if (!burst) continue;
    group.forEach((u, i) => merged.set(u, i === 0 ? burst : undefined));
  }
  return units.flatMap((u) => {
    if (u.kind !== 'cluster' || !merged.has(u)) return [u];
    const burst = merged.get(u);
    return burst ? [burst] : [];
  });
}

/** One message as a unit of work, or nothing when it is held until its time or refused. */
async function unitOf(
  record: QueueRecord,
  deps: WorkerDeps,
  outcome: BatchOutcome,
  now: number,
): Promise<Unit | undefined> {
  const parsed = parseRolloutMessage(record.body);
  if (heldUntilItsTime(record, parsed, deps, outcome, now)) return undefined;
  if (!('error' in parsed) && isGateMessage(parsed)) {
    if (record.groupId === gateGroupId(parsed.changes)) return { kind: 'gate', record, message: parsed };
    const group = record.groupId.slice(0, 63);
    refuse(deps, outcome, record, `a gate message sent to group "${group}", not to the group of its changes`);
    return undefined;
  }
  const planned = planMessage(deps.table, record);
  if ('refused' in planned) {
    refuse(deps, outcome, record, planned.refused);
    return undefined;
  }
  const refusal = await clusterMessageRefusal(deps.table, deps.rotations, planned.message.cluster, planned);
  if (refusal !== undefined) {
    refuse(deps, outcome, record, refusal);
    return undefined;
  }
  return { kind: 'cluster', records: [record], planned };
}

/**
 * A fresh copy of a wait (a gate, a continuation) received before its time is only held until then: a FIFO queue
 * has no per-message delay. At most MAX_HOLD_MS a time, so a far-off time ends in the dead letters. True: held.
 */
function heldUntilItsTime(
  record: QueueRecord,
  parsed: QueueMessage | { error: string },
  deps: WorkerDeps,
  outcome: BatchOutcome,
  now: number,
): boolean {
  const lookAt =
    'error' in parsed
      ? undefined
      : isGateMessage(parsed)
        ? parsed.lookAt
        : (parsed.follow?.lookAt ?? parsed.window?.lookAt);
  const early = lookAt === undefined ? 0 : Date.parse(lookAt) - now;
  // Held until its time, a continuation's copy comes back early only when a watch woke it: then it looks now.
  const woken =
    !('error' in parsed) && !isGateMessage(parsed) && parsed.follow !== undefined && (record.receiveCount ?? 1) > 1;
  if (early <= EARLY_SLACK_MS || woken) return false;
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
  return true;
}

/**
 * The named workloads among `pending` that a continuation waits on, as a watch needs them (others come back at their
 * delay).
 */
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
 * The cluster step's messages under a settle window: held together while the burst is still arriving, else worked
 * as one plan. Without a window (or with one message) the units are as they came.
 */
async function settle(
  units: Unit[],
  settling: ClusterUnit[],
  deps: WorkerDeps,
  outcome: BatchOutcome,
  now: number,
): Promise<Unit[]> {
  const settleMs = settleWindowOf(settling, deps.table);
  if (settleMs === 0 || settling.length === 0) return units;
  const others = units.filter((u) => !settling.includes(u as ClusterUnit));
  const accepted = settling.map((u) => Date.parse(u.planned.message.acceptedAt)).filter((t) => !Number.isNaN(t));
  const holds = Math.max(...settling.flatMap((u) => u.records.map((r) => (r.receiveCount ?? 1) - 1)));
  const delayMs = settleDelay(accepted, settleMs, now);
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
      records: settling.flatMap((u) => u.records),
      ms: wait.ms,
      fresh: () => undefined,
      fields: { settling: settling[0]?.planned.message.cluster ?? '', messages: settling.length },
    });
    return others;
  }
  if (settling.length === 1) return units;
  const burst = burstUnit(settling, deps);
  // Cannot happen (each part planned); then they are worked one by one.
  if (!burst) return units;
  return [...others, burst];
}

/** The longest settle window among the routes of the messages' targets; 0 when none sets one. */
function settleWindowOf(settling: readonly ClusterUnit[], table: RoutingTable): number {
  return Math.max(
    0,
    ...settling.flatMap((u) =>
      u.planned.targets.flatMap((t) =>
        t.routes.map((name) => table.routes.find((r) => r.name === name)?.policy.settleMs ?? 0),
      ),
    ),
  );
}

/** One plan for the burst: the union of the changes, the oldest acceptance. */
function burstUnit(settling: readonly ClusterUnit[], deps: WorkerDeps): ClusterUnit | undefined {
  const cluster = settling[0]?.planned.message.cluster ?? '';
  const messages = settling.map((u) => u.planned.message);
  const union: RolloutMessage = {
    v: messages[0]?.v ?? 2,
    cluster,
    changes: messages.flatMap((m) => m.changes),
    acceptedAt: [...messages.map((m) => m.acceptedAt)].sort()[0] ?? '',
  };
  const records = settling.flatMap((u) => u.records);
  const planned = planMessage(deps.table, {
    messageId: records
      .map((r) => r.messageId)
      .join('+')
      .slice(0, 200),
    groupId: cluster,
    body: JSON.stringify(union),
  });
  if ('refused' in planned) return undefined;
  deps.telemetry.info("settled: one plan for the cluster's burst", {
    cluster,
    messages: records.length,
    changes: union.changes.length,
  });
  return { kind: 'cluster', records, planned };
}
