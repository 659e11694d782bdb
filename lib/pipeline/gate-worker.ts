/**
 * A wave's gate message: look at the wave's rollouts, then release the next wave, look again later, or halt the
 * rotation (lib/plan/waves.ts decides, this acts).
 */
import { NOT_RESTARTED_YET, type RolloutResult } from '../engine/types.ts';
import { recordHalt } from './kube-executor.ts';
import { METRICS } from '../kernel/telemetry.ts';
import { planRollouts, type RolloutTarget } from '../plan/planner.ts';
import { decideGate, type ChangeSet, type GateAction, type WaveTargetState } from '../plan/waves.ts';
import {
  changeFromQueue,
  changeSetHash,
  MAX_GATE_ROUNDS,
  queuedChange,
  rolloutMessages,
  type GateMessage,
  type QueueMessage,
} from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { changeIdentity } from '../queue/rollout-message.ts';
import { changeSets, changesByCluster } from '../plan/cluster-changes.ts';
import { haltedReason, haltOf } from './wave-guard.ts';

import { decideWait } from '../plan/look-again.ts';
import { SUPERSEDED_REASON } from '../engine/types.ts';
import { waveWindowClosedUntil } from './foreground-window.ts';
import { lookAgainAfter } from './look-again.ts';
import { MAX_WINDOW_LOOK_MS } from './window-wait.ts';
import { noticeHalt } from './rotation-notices.ts';
import { lookAtWave, type Gate } from './gate-look.ts';
import { approvalTime, askApproval } from './gate-approval.ts';
import { refuse, type BatchOutcome, type HaltRecord, type QueueRecord, type WorkerDeps } from './worker-deps.ts';

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
  if (!set)
    return {
      refused:
        sets.length === 0
          ? `its ${changes.length} change(s) plan nothing under this routing table`
          : 'its changes no longer form one rotation under this routing table',
    };
  if (message.wave + 1 >= set.waves.length)
    return { refused: `wave ${message.wave + 1} is not followed by another wave (${set.waves.length} waves)` };
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
export async function workGate(
  record: QueueRecord,
  message: GateMessage,
  deps: WorkerDeps,
  outcome: BatchOutcome,
): Promise<boolean> {
  // Refused: acknowledged, dead-lettered with the reason.
  const refused = (why: string) => (refuse(deps, outcome, record, why), true);
  const planned = planGate(deps.table, message, record.messageId);
  if ('refused' in planned) return refused(planned.refused);
  const { set, targets } = planned;
  const refusal = await gateRefusal(deps, message, set);
  if (refusal !== undefined) return refused(refusal);
  if (!deps.queue) {
    deps.telemetry.warn('a gate message needs a queue to send the next wave to; it will be redelivered', {
      messageId: record.messageId,
    });
    return false;
  }
  const gate = await lookAtWave(record, message, deps, outcome, set, targets);
  if (typeof gate === 'boolean') return gate;
  if (superseded(gate)) return true;
  const states = gate.results.map(waveTargetStateOf);
  const { since, completeAt } = gate;
  const approvedAt = await approvalTime(deps, set, message.wave);
  if (approvedAt === false) return false;
  const decision = await gateDecision(deps, set, message.wave, { states, since, completeAt, approvedAt });
  if (decision === undefined) {
    deps.telemetry.warn("could not record the wave's completion; the gate will be redelivered", {
      messageId: record.messageId,
    });
    return false;
  }
  if (decision.action === 'wait' && decision.approval === true && !(await askApproval(gate))) return false;
  if (decision.action === 'wait') return waitForWave(gate, decision);
  if (decision.action === 'fail' && decision.onFailure === 'halt') return haltRotation(gate, decision);
  if (decision.action === 'fail')
    deps.telemetry.warn('wave gate failed; continuing (onFailure: continue)', { ...gate.fields, why: decision.why });
  return releaseNextWave(gate, targets, deps.queue);
}

/** A halted rotation's gate, or a gate for a wave no passed gate released, is refused (lib/pipeline/wave-guard.ts). */
async function gateRefusal(deps: WorkerDeps, message: GateMessage, set: ChangeSet): Promise<string | undefined> {
  const halted = await haltOf(deps.rotations, message.changes);
  if (halted) return haltedReason(halted);
  if (message.wave > 0 && (await deps.rotations.releasedWave(set.key)) < message.wave)
    return `a gate for wave ${message.wave + 1} of rotation ${set.key}, which no passed gate released`;
  return undefined;
}

const waveTargetStateOf = (r: RolloutResult): WaveTargetState => ({
  cluster: r.cluster,
  namespace: r.namespace,
  kind: r.kind,
  name: r.name,
  state: waveTargetState(r),
  reason: r.rolloutReason ?? r.detail ?? r.reason,
});

/**
 * A newer version of the secret already restarted this wave's workloads: this rotation is superseded. The newest
 * value wins; this rotation's later waves never run (the newer rotation's own gates release them).
 */
function superseded({ deps, set, results, fields }: Gate): boolean {
  const newer = results.filter((r) => r.outcome === 'skipped' && r.reason === SUPERSEDED_REASON);
  if (newer.length === 0) return false;
  deps.telemetry.info('rotation superseded by a newer version; its later waves will not run', {
    ...fields,
    rotation: set.key,
    newer: newer
      .slice(0, 5)
      .map((r) => ({ cluster: r.cluster, namespace: r.namespace, kind: r.kind, name: r.name, detail: r.detail })),
  });
  return true;
}

/**
 * The one waiting decision: the gate's own delay is its hint (a pause ends exactly; a rolling wave is woken
 * earlier by a watch where one runs).
 */
function waitForWave(
  { deps, outcome, record, message, results, fields, now, since }: Gate,
  decision: Extract<GateAction, { action: 'wait' }>,
): Promise<boolean> {
  const wait = decideWait({ pending: true, now: now(), since: since ?? now(), hintMs: decision.delayMs });
  const ms = wait.action === 'lookAgainAfter' ? wait.ms : decision.delayMs;
  const rolling = results.filter((r) => r.rollout === 'progressing');
  return lookAgainAfter(deps, outcome, {
    records: [record],
    ms,
    watch: rolling.map((r) => ({
      cluster: r.cluster,
      namespace: r.namespace,
      kind: r.kind,
      name: r.name,
      restartToken: r.restartToken,
    })),
    fields: { ...fields, why: decision.why, round: message.round },
    fresh: (lookAt) => (message.round + 1 > MAX_GATE_ROUNDS ? undefined : freshGate(message, lookAt)),
  });
}

/**
 * The wave failed its gate under `onFailure: halt`: the halt recorded (durable before anything else), noticed,
 * logged and counted, and an Event on the workload that failed it. False: the halt could not be recorded.
 */
async function haltRotation(gate: Gate, decision: Extract<GateAction, { action: 'fail' }>): Promise<boolean> {
  const { deps, set, message, secrets, fields } = gate;
  // decideGate fails only a wave with a recorded start, so only a rotation the store shows started halts.
  const notRestarted = [...new Set(set.waves.slice(message.wave + 1).flatMap((w) => w.clusters))];
  const { cluster, namespace, kind, name, state } = decision.failing;
  const halt: HaltRecord = {
    secrets,
    wave: message.wave + 1,
    waves: set.waves.length,
    failing: { cluster, namespace, kind, name, state },
    why: decision.why,
    notRestarted,
  };
  // From here every path that restarts refuses these changes (wave-guard.ts).
  try {
    await deps.rotations.halt({
      rotation: set.key,
      route: set.route,
      changes: set.changes.map((c) => changeIdentity(queuedChange(c))),
      ...halt,
      haltedAt: new Date(gate.now()).toISOString(),
    });
  } catch (e) {
    deps.telemetry.warn('could not record the halt; the gate will be redelivered', {
      ...fields,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  gate.outcome.halts.push(halt);
  await noticeHalt(deps, set, halt);
  deps.telemetry.error('rotation halted', {
    ...fields,
    rotation: set.key,
    failing: halt.failing,
    why: decision.why,
    notRestarted,
  });
  // No dimension but the service's: the alarm (serverless.yml HaltedRotationsAlarm) watches exactly that metric.
  deps.telemetry.metric(METRICS.haltedRotations, 1, 'Count');
  deps.telemetry.metric(METRICS.gateDecisions, 1, 'Count', { decision: 'halted' });
  const target = gate.waveTargets.find(
    (t) =>
      t.cluster === cluster &&
      t.namespace === namespace &&
      gate.results.some((r) => r.restartToken === t.restartToken && r.name === name),
  );
  if (target) {
    const eventMessage = `vault-rollout halted the rotation of ${secrets.join(', ')} at wave ${halt.wave} of ${halt.waves}: ${decision.why}. Not restarted: ${notRestarted.join(', ')}. Write a fixed version of the secret (it starts again from wave 1), or fix the cause and run vault-rollout halts clear ${set.key}.`;
    await recordHalt(deps.table, target, name, deps.executor, eventMessage);
  }
  return true;
}

/** Advance: the next wave's clusters, and its gate unless it is the last wave. False: they could not be queued. */
async function releaseNextWave(
  { deps, set, message, next, fields, now }: Gate,
  targets: RolloutTarget[],
  queue: NonNullable<WorkerDeps['queue']>,
): Promise<boolean> {
  const startedAt = new Date(now()).toISOString();
  const inSet = new Set(set.changes);
  const byCluster = changesByCluster(set.changes, { targets });
  // Each message carries the whole set, so the worker that receives it finds this rotation (wave-guard.ts).
  const messages: QueueMessage[] = next.clusters
    .filter((cluster) => (byCluster.get(cluster) ?? []).some((c) => inSet.has(c)))
    .flatMap((cluster) => rolloutMessages(cluster, set.changes, message.acceptedAt, message.wave + 1, deps.table.hash));
  if (set.waves[message.wave + 2])
    messages.push({
      v: message.v,
      kind: 'gate',
      changes: set.changes.map(queuedChange),
      wave: message.wave + 1,
      acceptedAt: message.acceptedAt,
      round: 0,
      table: deps.table.hash,
    });
  try {
    // The next wave's start, then its release, before the messages go out: a worker killed in between leaves a
    // release with nothing queued, which the gate, redelivered, queues again; the reverse order would leave queued
    // messages the guard refuses. Its gate times it from this start (the first one written stays).
    await deps.rotations.markWave(set.key, message.wave + 1, 'startedAt', startedAt);
    await deps.rotations.releaseWave(set.key, message.wave + 1);
    await queue.send(messages);
  } catch (e) {
    deps.telemetry.warn('could not queue the next wave; the gate will be redelivered', {
      ...fields,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  // This wave passed: a later run of the same rotation (reconcile queues a wave's stragglers again) times it afresh.
  await deps.rotations.forgetWave(set.key, message.wave).catch((e: unknown) =>
    deps.telemetry.warn("could not forget a passed wave's times", {
      ...fields,
      error: e instanceof Error ? e.name : String(e),
    }),
  );
  deps.telemetry.metric(METRICS.gateDecisions, 1, 'Count', { decision: 'released' });
  deps.telemetry.info('wave gate passed; next wave queued', {
    ...fields,
    next: next.clusters,
    messages: messages.length,
  });
  return true;
}

/**
 * The gate's decision from the store's times. A wave seen complete for the first time has its completion recorded
 * (the first worker's time stays), and the pause counts from what the store holds. Undefined: the store failed.
 */
async function gateDecision(
  deps: WorkerDeps,
  set: ChangeSet,
  wave: number,
  seen: { states: WaveTargetState[]; since: number | undefined; completeAt: string | undefined; approvedAt?: number },
): Promise<ReturnType<typeof decideGate> | undefined> {
  const now = (deps.now ?? Date.now)();
  const input = {
    states: seen.states,
    now,
    since: seen.since,
    ...(seen.approvedAt === undefined ? {} : { approvedAt: seen.approvedAt }),
    policy: set.policy,
    recheckMs: waitForWindowMs(set, wave, now, seen.since) ?? deps.gate?.recheckMs ?? 10_000,
  };
  const stored = seen.completeAt === undefined ? undefined : Date.parse(seen.completeAt);
  const decision = decideGate({ ...input, ...(stored === undefined ? {} : { completeAt: stored }) });
  if (decision.action !== 'wait' || decision.completeAt === undefined || stored !== undefined) return decision;
  try {
    const times = await deps.rotations.markWave(
      set.key,
      wave,
      'completeAt',
      new Date(decision.completeAt).toISOString(),
    );
    return times.completeAt === undefined
      ? decision
      : decideGate({ ...input, completeAt: Date.parse(times.completeAt) });
  } catch {
    return undefined;
  }
}

/**
 * A wave not started whose maintenance window is closed: its gate looks again when the window opens (at most a hold
 * away), not every few seconds, so its rounds last as long as the wait does.
 */
function waitForWindowMs(set: ChangeSet, wave: number, now: number, since: number | undefined): number | undefined {
  if (since !== undefined) return undefined;
  const opensAt = waveWindowClosedUntil(set, wave, now);
  return opensAt === undefined ? undefined : Math.max(1, Math.min(MAX_WINDOW_LOOK_MS, opensAt - now));
}

/** A gate's fresh copy one round later: the changes, the wave and when to look; no time the worker would read. */
function freshGate(message: GateMessage, lookAt: string): GateMessage {
  const copy: GateMessage = { ...message, round: message.round + 1, lookAt };
  delete copy.since;
  delete copy.completeAt;
  return copy;
}
