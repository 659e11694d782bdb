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
import { NOT_RESTARTED_YET, type RolloutResult } from '../engine/types.ts';
import { executeRollouts, recordHalt, type ExecutorSettings } from './kube-executor.ts';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import { planRollouts, type RolloutTarget } from '../plan/planner.ts';
import { decideGate, settleDelay, type ChangeSet, type WaveTargetState } from '../plan/waves.ts';
import {
  changeFromQueue,
  changeSetHash,
  followUpMessage,
  gateGroupId,
  isGateMessage,
  MAX_FOLLOW_ROUNDS,
  MAX_GATE_ROUNDS,
  parseRolloutMessage,
  queuedChange,
  rolloutMessages,
  type GateMessage,
  type QueueMessage,
  type RolloutMessage,
  type RolloutQueue,
} from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import { changeIdentity } from '../queue/rollout-message.ts';
import { changeSets, changesByCluster } from './intake.ts';
import { clusterMessageRefusal, haltedReason, haltOf } from './wave-guard.ts';

export interface QueueRecord {
  messageId: string;
  body: string;
  groupId: string;
  /** How many times the queue has delivered it (1 the first time); holds re-send a fresh copy before the redrive limit. */
  receiveCount?: number;
}

export interface WorkerDeps {
  table: RoutingTable;
  /** Released waves and halts (lib/rotations): checked before every restart, written by gates. */
  rotations: RotationStore;
  /**
   * Where a refused message goes, with its reason (the runtime's dead-letter queue). When it throws, the message is
   * redelivered instead (and reaches the dead letters through the queue's redrive policy). Without it (tests) a
   * refused message is acknowledged.
   */
  deadLetter?: (record: QueueRecord, reason: string) => Promise<void>;
  executor: ExecutorSettings;
  telemetry: Telemetry;
  /** Called for a cluster whose credentials were refused, so the next attempt resolves them again. */
  invalidate?: (cluster: string) => void;
  now?: () => number;
  /**
   * Follow each restart's rollout for at most `budgetMs()` (in Lambda: the invocation's remaining time minus a
   * margin), then hand what is still progressing back to the queue as a follow-up message — the same changes, which
   * the next attempt finds `unchanged` and follows again. Nothing waits longer than the budget; nothing restarts
   * twice. Without it, a restart's result is the patch alone.
   */
  follow?: { budgetMs: () => number; requeue: (message: RolloutMessage) => Promise<void> };
  /** Where gates queue the next wave and their own fresh copies (issue #12); without it a gate is redelivered. */
  queue?: RolloutQueue;
  /** Gates: how long one look follows a wave's rollouts (default 10 s, capped by the follow budget), and how long to wait before the next look (default 10 s). */
  gate?: { lookMs?: number; recheckMs?: number };
  /**
   * Called as soon as one group of the batch (a cluster, a gate) is worked, before the slower groups are: lets a
   * runtime hand that group's messages back at once (delete the worked ones, defer the held ones), so a batch of
   * several clusters never makes one wait for another. Must not throw.
   */
  onGroupDone?: (group: GroupOutcome) => Promise<void>;
}

/** What became of one group's messages: the ids not in `failed` or `deferred` are done (worked or refused). */
export interface GroupOutcome {
  messageIds: string[];
  failed: string[];
  deferred: Array<{ messageId: string; delayMs: number }>;
}

/** Holds by visibility before a held message is re-sent fresh: with the first delivery, 3 of SQS's 5 receives. */
export const HOLDS_BEFORE_RESEND = 2;

/** How long one attempt follows rollouts before handing them back to the queue (VAULT_ROLLOUT_FOLLOW_SECONDS). */
export const DEFAULT_FOLLOW_BUDGET_MS = 60_000;

/** The follow budget from the environment: seconds, 0 to only patch (results then carry no rollout state). */
export function followBudgetFromEnv(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env.VAULT_ROLLOUT_FOLLOW_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_FOLLOW_BUDGET_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > 900) throw new Error(`VAULT_ROLLOUT_FOLLOW_SECONDS=${raw.slice(0, 20)} must be a number of seconds from 0 to 900`);
  return seconds * 1000;
}

export interface BatchOutcome {
  /** Message ids to redeliver (SQS `batchItemFailures`). */
  failed: string[];
  /** Message ids refused (acknowledged, never executed), with the reason. */
  refused: Array<{ messageId: string; reason: string }>;
  results: RolloutResult[];
  /** Message ids to hand back to the queue for later (invisible for `delayMs`, then redelivered): gates, settle. */
  deferred: Array<{ messageId: string; delayMs: number }>;
  /** Rotations a wave's gate halted: which change, where, why. */
  halts: HaltRecord[];
}

export interface HaltRecord {
  /** The changes' paths and versions. */
  secrets: string[];
  /** 1-based wave that failed, and how many waves there are. */
  wave: number;
  waves: number;
  /** The workload that failed the gate. */
  failing: Pick<WaveTargetState, 'cluster' | 'namespace' | 'kind' | 'name' | 'state'>;
  why: string;
  /** Clusters of the later waves, never restarted for these changes. */
  notRestarted: string[];
}

export type MessagePlan = { message: RolloutMessage; targets: RolloutTarget[]; changeIds: string[]; ignoredElsewhere: number } | { refused: string };

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
  const plan = planRollouts(table, message.changes.map((c, i) => changeFromQueue(c, `message ${record.messageId} changes[${i}]`)));
  const targets = plan.targets.filter((t) => t.cluster === record.groupId);
  if (targets.length === 0) return { refused: `its ${message.changes.length} change(s) plan nothing in cluster "${record.groupId}" under this routing table` };
  return { message, targets, changeIds: [...new Set(message.changes.map((c) => c.id))], ignoredElsewhere: plan.targets.length - targets.length };
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

function refuse(deps: WorkerDeps, outcome: BatchOutcome, record: QueueRecord, reason: string): void {
  // Never executed, never redelivered: redelivery cannot make it acceptable, and a forged message must not
  // hold the real messages of its group behind it.
  deps.telemetry.error('refused rollout message', { messageId: record.messageId, group: record.groupId.slice(0, 63), reason });
  deps.telemetry.metric(METRICS.refusedMessages, 1, 'Count');
  outcome.refused.push({ messageId: record.messageId, reason });
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
    const refusal = await clusterMessageRefusal(deps.table, deps.rotations, record.groupId, planned.message.changes, planned.message.table);
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

/** Where a gate message stands under this worker's table: its change set, its waves, the plan's targets. */
export type GatePlan = { set: ChangeSet; targets: RolloutTarget[] } | { refused: string };

/**
 * Re-plans a gate's changes with this worker's table. Refused (like any message) when they plan nothing, no longer
 * form one change set (the table changed), or name a wave with no wave after it. Pure.
 */
export function planGate(table: RoutingTable, message: GateMessage, messageId: string): GatePlan {
  const changes = message.changes.map((c, i) => changeFromQueue(c, `message ${messageId} changes[${i}]`));
  const plan = planRollouts(table, changes);
  const sets = changeSets(table, changes, plan);
  const key = changeSetHash(message.changes);
  const set = sets.find((s) => s.key === key);
  if (!set) return { refused: sets.length === 0 ? `its ${changes.length} change(s) plan nothing under this routing table` : 'its changes no longer form one rotation under this routing table' };
  if (message.wave + 1 >= set.waves.length) return { refused: `wave ${message.wave + 1} is not followed by another wave (${set.waves.length} waves)` };
  return { set, targets: plan.targets };
}

/** A wave target's state for its gate, from what an observe-only (or restarting) call found. */
export const waveTargetState = (r: RolloutResult): WaveTargetState['state'] => {
  if (r.outcome === 'failed' || (r.outcome === 'skipped' && r.reason === NOT_RESTARTED_YET)) return 'pending';
  if (r.outcome !== 'restarted' && r.outcome !== 'unchanged') return 'done';
  if (r.rollout === undefined) return 'pending';
  return r.rollout === 'none' ? 'done' : r.rollout;
};

/** A gate: look at its wave, then queue the next wave, halt, or hand itself back for later. False: redeliver. */
async function workGate(record: QueueRecord, message: GateMessage, deps: WorkerDeps, outcome: BatchOutcome): Promise<boolean> {
  const planned = planGate(deps.table, message, record.messageId);
  if ('refused' in planned) {
    refuse(deps, outcome, record, planned.refused);
    return true;
  }
  const { set, targets } = planned;
  // A halted rotation's gate, or a gate for a wave no passed gate released, is refused (lib/pipeline/wave-guard.ts).
  const halted = await haltOf(deps.rotations, message.changes);
  if (halted) {
    refuse(deps, outcome, record, haltedReason(halted));
    return true;
  }
  if (message.wave > 0 && (await deps.rotations.releasedWave(set.key)) < message.wave) {
    refuse(deps, outcome, record, `a gate for wave ${message.wave + 1} of rotation ${set.key}, which no passed gate released`);
    return true;
  }
  if (!deps.queue) {
    deps.telemetry.warn('a gate message needs a queue to send the next wave to; it will be redelivered', { messageId: record.messageId });
    return false;
  }
  const now = deps.now ?? Date.now;
  const wave = set.waves[message.wave];
  const next = set.waves[message.wave + 1];
  if (!wave || !next) return true;
  const waveTargets = targets.filter((t) => wave.clusters.includes(t.cluster));
  const lookMs = Math.min(deps.gate?.lookMs ?? 10_000, deps.follow ? Math.max(0, deps.follow.budgetMs()) : Infinity);
  const since = Date.parse(message.since);
  const results = await executeRollouts(deps.table, waveTargets, { ...deps.executor, observeOnly: true, follow: { budgetMs: lookMs, since } });
  const states: WaveTargetState[] = results.map((r) => ({ cluster: r.cluster, namespace: r.namespace, kind: r.kind, name: r.name, state: waveTargetState(r), reason: r.rolloutReason ?? r.detail ?? r.reason }));
  const decision = decideGate({ states, now: now(), since, ...(message.completeAt ? { completeAt: Date.parse(message.completeAt) } : {}), policy: set.policy, recheckMs: deps.gate?.recheckMs ?? 10_000 });
  const secrets = [...new Set(targets.flatMap((t) => t.secrets.map((s) => (s.version === null ? `${s.path} (${s.operation})` : `${s.path} version ${s.version}`))))].sort();
  const fields = { messageId: record.messageId, route: set.route, secrets, wave: message.wave + 1, waves: set.waves.length, clusters: wave.clusters };

  if (decision.action === 'wait') {
    const fresh: GateMessage = { ...message, round: message.round + 1, ...(decision.completeAt !== undefined ? { completeAt: new Date(decision.completeAt).toISOString() } : {}) };
    const holds = (record.receiveCount ?? 1) - 1;
    // The pause's start must be remembered, and a message held too often would reach the redrive limit: both go
    // out as a fresh copy (a new deduplication id), and this one is acknowledged.
    if ((decision.completeAt !== undefined && message.completeAt === undefined) || holds >= HOLDS_BEFORE_RESEND) {
      if (fresh.round > MAX_GATE_ROUNDS) return true;
      try {
        await deps.queue.send([fresh]);
      } catch (e) {
        deps.telemetry.warn('could not re-send the gate; it will be redelivered', { ...fields, error: e instanceof Error ? e.name : String(e) });
        return false;
      }
      deps.telemetry.info('wave gate waiting (re-sent)', { ...fields, why: decision.why, round: fresh.round });
      return true;
    }
    deps.telemetry.info('wave gate waiting', { ...fields, why: decision.why, delayMs: decision.delayMs });
    outcome.deferred.push({ messageId: record.messageId, delayMs: decision.delayMs });
    return true;
  }

  if (decision.action === 'fail' && decision.onFailure === 'halt') {
    const notRestarted = set.waves.slice(message.wave + 1).flatMap((w) => w.clusters);
    const halt: HaltRecord = { secrets, wave: message.wave + 1, waves: set.waves.length, failing: { cluster: decision.failing.cluster, namespace: decision.failing.namespace, kind: decision.failing.kind, name: decision.failing.name, state: decision.failing.state }, why: decision.why, notRestarted };
    // Durable before anything else: from here every path that restarts refuses these changes (wave-guard.ts).
    try {
      await deps.rotations.halt({ rotation: set.key, route: set.route, changes: set.changes.map((c) => changeIdentity(queuedChange(c))), ...halt, haltedAt: new Date(now()).toISOString() });
    } catch (e) {
      deps.telemetry.warn('could not record the halt; the gate will be redelivered', { ...fields, error: e instanceof Error ? e.name : String(e) });
      return false;
    }
    outcome.halts.push(halt);
    deps.telemetry.error('rotation halted', { ...fields, rotation: set.key, failing: halt.failing, why: decision.why, notRestarted });
    // No dimension but the service's: the alarm (serverless.yml HaltedRotationsAlarm) watches exactly that metric.
    deps.telemetry.metric(METRICS.haltedRotations, 1, 'Count');
    const target = waveTargets.find((t) => t.cluster === decision.failing.cluster && t.namespace === decision.failing.namespace && results.some((r) => r.restartToken === t.restartToken && r.name === decision.failing.name));
    if (target) {
      const eventMessage = `vault-rollout halted the rotation of ${secrets.join(', ')} at wave ${halt.wave} of ${halt.waves}: ${decision.why}. Not restarted: ${notRestarted.join(', ')}. Write a fixed version of the secret (it starts again from wave 1), or fix the cause and run vault-rollout halts clear ${set.key}.`;
      await recordHalt(deps.table, target, decision.failing.name, deps.executor, eventMessage);
    }
    return true;
  }
  if (decision.action === 'fail') deps.telemetry.warn('wave gate failed; continuing (onFailure: continue)', { ...fields, why: decision.why });

  // Advance: the next wave's clusters, and its gate unless it is the last wave.
  const startedAt = new Date(now()).toISOString();
  const inSet = new Set(set.changes);
  const byCluster = changesByCluster(set.changes, { targets });
  // Each message carries the whole set, so the worker that receives it finds this rotation (wave-guard.ts).
  const messages: QueueMessage[] = next.clusters.filter((cluster) => (byCluster.get(cluster) ?? []).some((c) => inSet.has(c))).flatMap((cluster) => rolloutMessages(cluster, set.changes, message.acceptedAt, message.wave + 1, deps.table.hash));
  if (set.waves[message.wave + 2]) messages.push({ v: message.v, kind: 'gate', changes: set.changes.map(queuedChange), wave: message.wave + 1, since: startedAt, acceptedAt: message.acceptedAt, round: 0, table: deps.table.hash });
  try {
    // Released before the messages go out: a worker killed in between leaves a release with nothing queued, which the
    // gate, redelivered, queues again; the reverse order would leave queued messages the guard refuses.
    await deps.rotations.releaseWave(set.key, message.wave + 1);
    await deps.queue.send(messages);
  } catch (e) {
    deps.telemetry.warn('could not queue the next wave; the gate will be redelivered', { ...fields, error: e instanceof Error ? e.name : String(e) });
    return false;
  }
  deps.telemetry.info('wave gate passed; next wave queued', { ...fields, next: next.clusters, messages: messages.length });
  return true;
}
