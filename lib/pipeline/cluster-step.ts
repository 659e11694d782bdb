/**
 * One cluster message (or a settled burst), or one look of a continuation: read, decide, admit, patch, record, take
 * ONE look at where the restarts stand, and hand what is still under way to a continuation. The cluster's next
 * message never waits for a rollout.
 */
import type { FollowSettings, RolloutResult } from '../engine/types.ts';
import { METRICS } from '../kernel/telemetry.ts';
import { decideWait } from '../plan/look-again.ts';
import { followUpMessage, MAX_FOLLOW_ROUNDS, pendingName } from '../queue/rollout-message.ts';
import { executeRollouts } from './kube-executor.ts';
import { lookAgainAfter } from './look-again.ts';
import type { PlannedMessage } from './message-units.ts';
import { noticeLook, noticeWouldRestart } from './rotation-notices.ts';
import { haltBreakerRefusals, restartBreakerOf } from './route-refusals.ts';
import { markWavesStarted, releasedTargets } from './wave-guard.ts';
import type { BatchOutcome, QueueRecord, WatchedWorkload, WorkerDeps } from './worker-deps.ts';

/**
 * The longest a continuation looks: each rollout's and sync's own deadline ends its wait first (its look answers
 * `timeout`); this is the net under a wait for a slot that never frees.
 */
export const MAX_CONTINUATION_MS = 25 * 3_600_000;

/** How soon a target waiting for a rollout slot is tried again (a release in this process wakes it earlier). */
export const SLOT_LOOK_MS = 2_000;

/** What every step of one look shares. */
interface Look {
  deps: WorkerDeps;
  records: readonly QueueRecord[];
  planned: PlannedMessage;
  /** The message ids, joined: a settled burst is several. */
  messageId: string;
  now: () => number;
  startedAt: number;
  /** A continuation's: when the cluster step that it follows started (epoch ms). */
  since: number | undefined;
  /** A continuation's: the workloads it still waits on. */
  pending: ReadonlySet<string> | undefined;
}

/** Rotation events go to the outbox; a loop elsewhere sends them, so this never waits on a sink. */
type Notice = (finished: boolean, expired?: RolloutResult[]) => Promise<void>;

/** Works one cluster unit (see the file's header). False: redeliver. */
export async function workCluster(
  records: readonly QueueRecord[],
  received: PlannedMessage,
  deps: WorkerDeps,
  outcome: BatchOutcome,
): Promise<boolean> {
  const now = deps.now ?? Date.now;
  const messageId = records.map((r) => r.messageId).join(',');
  deps.telemetry.setCorrelationId(received.changeIds[0]);
  const planned = await onlyReleased(deps, received, messageId);
  if (planned === undefined) return false;
  const { message } = planned;
  const look: Look = {
    deps,
    records,
    planned,
    messageId,
    now,
    startedAt: now(),
    since: message.follow ? Date.parse(message.follow.since) : undefined,
    pending: message.follow?.pending ? new Set(message.follow.pending) : undefined,
  };
  if (!message.follow && !(await recordWaveStart(look))) return false;
  const out = await restartAndLook(look);
  outcome.results.push(...out);
  if (!(await routeRefusalsRecorded(look, out, outcome))) return false;
  recordMetrics(look, out);
  const notice: Notice = (finished, expired) =>
    noticeLook(
      deps,
      { cluster: message.cluster, changes: planned.changes, plan: planned.plan, targets: planned.targets },
      out,
      {
        sinceMs: look.since ?? look.startedAt,
        finished,
        ...(expired ? { expired } : {}),
      },
    );
  logLook(look, out);
  const failures = out.filter((r) => r.outcome === 'failed');
  if (failures.length > 0) {
    await notice(false);
    if (failures.some((f) => f.reason === 'unauthorized' || f.reason === 'credentials'))
      deps.invalidate?.(message.cluster);
    return false;
  }
  // Waiting for a rollout slot (rollout.maxUnavailable) and no continuation to hand it to: the message comes back.
  if (!deps.follow) {
    const settled = !out.some((r) => r.outcome === 'deferred');
    await notice(settled);
    return settled;
  }
  return waitOrFinish(look, out, notice, outcome, deps.follow);
}

/**
 * The message's targets narrowed to those of released waves (a wave that selects targets splits a cluster: its
 * later targets wait for their gate). Undefined when the store cannot say (the message is redelivered).
 */
async function onlyReleased(
  deps: WorkerDeps,
  planned: PlannedMessage,
  messageId: string,
): Promise<PlannedMessage | undefined> {
  try {
    const targets = await releasedTargets(deps.table, deps.rotations, planned.message.cluster, planned);
    return targets.length === planned.targets.length ? planned : { ...planned, targets };
  } catch (e) {
    deps.telemetry.warn("could not read the rotation's released waves; the message will be redelivered", {
      messageId,
      cluster: planned.message.cluster,
      error: e instanceof Error ? e.name : String(e),
    });
    return undefined;
  }
}

/** The cluster step records its waves' start first; false when it cannot (the message is redelivered). */
async function recordWaveStart({ deps, planned, messageId, startedAt }: Look): Promise<boolean> {
  try {
    await markWavesStarted(
      deps.table,
      deps.rotations,
      planned.message.cluster,
      planned,
      new Date(startedAt).toISOString(),
    );
    return true;
  } catch (e) {
    deps.telemetry.warn("could not record the wave's start; the message will be redelivered", {
      messageId,
      cluster: planned.message.cluster,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
}

/**
 * The targets the engine refused for their route's sake: a breaker's refusal halts its rotation (recorded before the
 * message is acknowledged: false, and the message comes back to record it), a notify-only route's targets are sent.
 */
async function routeRefusalsRecorded(
  { deps, planned, messageId }: Look,
  out: readonly RolloutResult[],
  outcome: BatchOutcome,
): Promise<boolean> {
  const step = { changes: planned.changes, plan: planned.plan, targets: planned.targets };
  try {
    const halts = await haltBreakerRefusals(deps, step, out);
    outcome.halts.push(...halts.map((h) => ({ ...h, failing: { ...h.failing, state: 'failed' as const } })));
  } catch (e) {
    deps.telemetry.warn("could not record the breaker's halt; the message will be redelivered", {
      messageId,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  await noticeWouldRestart(deps, { cluster: planned.message.cluster, ...step }, out);
  return true;
}

/**
 * The engine's pass over the targets with one look at their rollouts. A continuation reports what it still waits
 * on, and anything it restarts or fails on now; the rest was answered.
 */
async function restartAndLook({ deps, planned, since, pending }: Look): Promise<RolloutResult[]> {
  const reported = (r: RolloutResult) =>
    pending === undefined || r.outcome !== 'unchanged' || pending.has(pendingName(r));
  const follow: FollowSettings | undefined = deps.follow
    ? { budgetMs: 0, once: true, ...(since === undefined ? {} : { since }), ...(pending ? { only: reported } : {}) }
    : undefined;
  const breaker = restartBreakerOf(deps.rotations, deps.now ?? Date.now);
  const results = await executeRollouts(deps.table, planned.targets, {
    ...deps.executor,
    ...(follow ? { follow } : {}),
    ...(breaker ? { breaker } : {}),
  });
  return results.filter(reported);
}

/** Per result: the target count, the lag from the newest secret change to its restart, and the rollout's duration. */
function recordMetrics({ deps, planned, now, since, startedAt }: Look, out: readonly RolloutResult[]): void {
  for (const r of out) {
    deps.telemetry.metric(METRICS.targets, 1, 'Count', { outcome: r.outcome, cluster: r.cluster });
    if (r.outcome === 'restarted') {
      const target = planned.targets.find((t) => t.restartToken === r.restartToken);
      const newest = Math.max(
        ...(target?.secrets ?? []).map((s) => Date.parse(s.time)).filter((t) => !Number.isNaN(t)),
      );
      if (Number.isFinite(newest))
        deps.telemetry.metric(METRICS.lag, Math.max(0, now() - newest), 'Milliseconds', { cluster: r.cluster });
    }
    // A rollout seen ending, by the step that patched it or the continuation that followed it: patch to end.
    if (
      (r.outcome === 'restarted' || planned.message.follow) &&
      (r.rollout === 'complete' || r.rollout === 'failed' || r.rollout === 'timeout')
    )
      deps.telemetry.metric(METRICS.rolloutDuration, Math.max(0, now() - (since ?? startedAt)), 'Milliseconds', {
        cluster: r.cluster,
        outcome: r.rollout,
      });
  }
}

/** One log line for the look, with each target's outcome. */
function logLook({ deps, planned: { message }, messageId }: Look, out: readonly RolloutResult[]): void {
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
}

/**
 * What is still under way after the look decides what comes next: nothing (finished), past its deadline (expired),
 * or another look later — a continuation queued by the cluster step, or this continuation held or sent again.
 */
async function waitOrFinish(
  look: Look,
  out: readonly RolloutResult[],
  notice: Notice,
  outcome: BatchOutcome,
  follow: NonNullable<WorkerDeps['follow']>,
): Promise<boolean> {
  const { deps, planned, since, startedAt, pending } = look;
  const { message } = planned;
  const deferred = out.filter((r) => r.outcome === 'deferred');
  const waiting = out.filter((r) => r.rollout === 'progressing' || r.outcome === 'deferred');
  const wait = decideWait({
    pending: waiting.length > 0,
    now: look.now(),
    since: since ?? startedAt,
    ...(message.follow?.until ? { deadline: Date.parse(message.follow.until) } : {}),
    // Only slots to wait for: try again soon (a freed slot is worth taking at once).
    ...(deferred.length === waiting.length ? { hintMs: SLOT_LOOK_MS } : {}),
  });
  const fields = {
    messageId: look.messageId,
    group: (look.records[0] as QueueRecord).groupId,
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
    const still = waiting.map(pendingName).slice(0, 20);
    deps.telemetry.warn('continuation expired: still under way at its deadline', { ...fields, why: wait.why, still });
    return true;
  }
  const names = waiting.map(pendingName);
  if (!message.follow) return queueContinuation(look, follow, names, wait.ms, fields);
  return lookAgainAfter(deps, outcome, {
    records: look.records,
    ms: wait.ms,
    // This look restarted something new (a consumer once its operator synced, a target whose slot freed): only a
    // fresh copy can name it among what the next look waits on.
    resend: pending !== undefined && names.some((name) => !pending.has(name)),
    watch: watchedOf(waiting),
    fields: { ...fields, round: message.follow.round },
    fresh: (lookAt) =>
      (message.follow?.round ?? 0) >= MAX_FOLLOW_ROUNDS
        ? undefined
        : followUpMessage(message, message.follow?.since ?? '', names, undefined, lookAt),
  });
}

/**
 * The cluster step's continuation goes out before this message is acknowledged (a worker killed in between leaves
 * this message to be redelivered, which finds its workloads unchanged and sends it again).
 */
async function queueContinuation(
  { deps, planned, now, startedAt }: Look,
  follow: NonNullable<WorkerDeps['follow']>,
  names: string[],
  ms: number,
  fields: Record<string, unknown>,
): Promise<boolean> {
  const lookAt = new Date(now() + ms).toISOString();
  const since = new Date(startedAt).toISOString();
  const next = followUpMessage(planned.message, since, names, startedAt + MAX_CONTINUATION_MS, lookAt);
  try {
    await follow.requeue(next);
  } catch (e) {
    deps.telemetry.warn('could not queue the continuation; the message will be redelivered', {
      ...fields,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  deps.telemetry.info('restarts under way; continuation queued', { ...fields, lookInMs: ms });
  return true;
}

/** The rollouts still progressing, as a watch needs them (a target waiting for a slot has no rollout to watch). */
function watchedOf(waiting: readonly RolloutResult[]): WatchedWorkload[] {
  return waiting
    .filter((r) => r.outcome !== 'deferred')
    .map((r) => ({
      cluster: r.cluster,
      namespace: r.namespace,
      kind: r.kind,
      name: r.name,
      restartToken: r.restartToken,
    }));
}
