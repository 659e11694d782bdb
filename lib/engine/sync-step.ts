/**
 * A consumers target, step by step: [nudge the operator -> wait until it wrote the Secret ->] find the workloads
 * that consume the Secret (or mount the SecretProviderClass) -> restart them. The restarts then follow their rollouts
 * like any other (rollout-executor.ts).
 *
 * Nothing here sleeps past the caller's follow budget: a sync not done by then comes back `progressing`, and the
 * worker hands the message back to the queue as a follow-up, exactly like a rollout still in progress. The next
 * attempt finds the nudge already applied (same restart token: `unchanged`, no patch) and only reads the status;
 * the sync's deadline counts from the nudge's time recorded on the resource, so follow-ups cannot extend it.
 */
import { everyKey, withConsumerKeys } from '../plan/changed-keys.ts';
import type { ConsumersRolloutTarget } from '../plan/planner.ts';
import type { KubeApi } from '../workloads/kube-port.ts';
import type { KubeFailure } from '../workloads/kube-errors.ts';
import { describeConsumed, discoverConsumers, type ConsumedObject, type ListKind } from '../workloads/consumers.ts';
import { followRollouts, type FollowedRollout } from './rollout-follower.ts';
import type { RolloutResult, WorkloadDone } from './types.ts';
import {
  DEFAULT_SYNC_TIMEOUT_MS,
  isSyncKind,
  SYNC_ANNOTATIONS,
  SYNC_KINDS,
  type SyncDescriptor,
} from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';

export interface ConsumersStepContext {
  cluster: string;
  api: KubeApi;
  dryRun: boolean;
  clock: { now(): number; monotonic(): number };
  started: number;
  /** Reads with the cluster's limiter and retries. */
  read(
    descriptor: WorkloadDescriptor,
    namespace: string,
    name: string,
  ): Promise<{ ok: true; value: KubeObject; attempts: number } | { ok: false; failure: KubeFailure; attempts: number }>;
  list: ListKind;
  /** The executor's per-object step: decide from the record, patch, record an Event. */
  restart(target: ConsumersRolloutTarget, descriptor: WorkloadDescriptor, object: KubeObject): Promise<WorkloadDone>;
  /** Epoch ms until which the call may wait for the sync; undefined: do not wait (evaluate once). */
  followUntil?: number;
  /** When an earlier attempt started (a follow-up's `since`). */
  since?: number;
}

export async function executeConsumersTarget(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
): Promise<WorkloadDone[]> {
  if (!isSyncKind(target.kind)) {
    const consumed: ConsumedObject =
      target.kind === 'Secret' ? { secret: target.name } : { secretProviderClass: target.name };
    return restartConsumers(ctx, target, consumed, [], undefined);
  }
  const descriptor = SYNC_KINDS[target.kind];
  const read = await ctx.read(descriptor, target.namespace, target.name);
  if (!read.ok) return [unreadable(ctx, target, descriptor, read.failure, read.attempts)];
  // The operator always syncs: only its consumers may be skipped for keys they do not use.
  const nudged = await ctx.restart(everyKey(target), descriptor, read.value);
  const nudge = nudged.result;
  if (nudge.outcome === 'dry-run') return dryRunNudge(ctx, target, descriptor, read.value, nudge);
  if (nudge.outcome !== 'restarted' && nudge.outcome !== 'unchanged') return [{ result: nudge }];
  const synced = await waitForSync(ctx, target, descriptor, nudged);
  return afterSync(ctx, target, descriptor, nudged, synced, read.value);
}

/** The synced resource could not be read: the target fails, saying whether it (or its operator's CRD) is missing. */
function unreadable(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  descriptor: SyncDescriptor,
  failure: KubeFailure,
  attempts: number,
): WorkloadDone {
  const detail =
    failure.reason === 'not found'
      ? `${target.kind} ${target.namespace}/${target.name} does not exist (or the ${descriptor.operator} CRD is not installed)`
      : failure.detail;
  return {
    result: {
      cluster: ctx.cluster,
      namespace: target.namespace,
      routes: target.routes,
      paths: target.paths,
      restartToken: target.restartToken,
      durationMs: ctx.clock.monotonic() - ctx.started,
      kind: target.kind,
      name: target.name,
      outcome: 'failed',
      reason: failure.reason,
      detail,
      attempts,
    },
  };
}

/** A dry run: say which consumers would restart once the operator has synced. */
async function dryRunNudge(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  descriptor: SyncDescriptor,
  object: KubeObject,
  nudge: RolloutResult,
): Promise<WorkloadDone[]> {
  const consumed = { secret: descriptor.secretName(object) };
  const consumers = await restartConsumers(ctx, target, consumed, descriptor.restartedByOperator(object), descriptor);
  const detail = `would nudge ${target.kind} ${target.name}, wait for ${descriptor.operator}, then restart its consumers`;
  return [{ result: { ...nudge, detail } }, ...consumers];
}

/**
 * The nudge's result once the sync's state is known: failed or timed out (the consumers keep running on the value
 * they have: restarting them now would bring nothing new), still under way (a follow-up checks again), or complete,
 * when the consumers restart unless the target says `restart: none`. The nudge itself is not followed as a rollout.
 */
async function afterSync(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  descriptor: SyncDescriptor,
  nudged: WorkloadDone,
  synced: FollowedRollout & { object?: KubeObject },
  read: KubeObject,
): Promise<WorkloadDone[]> {
  const nudge = nudged.result;
  const state = synced.rollout;
  const syncResult: RolloutResult = {
    ...nudge,
    reason: nudge.outcome === 'restarted' ? 'sync requested' : 'already requested for this version',
    rollout: state,
    rolloutReason: synced.message,
    ...(synced.rolloutMs === undefined ? {} : { rolloutMs: synced.rolloutMs }),
  };
  const nudgeDone = (result: RolloutResult): WorkloadDone => ({ ...nudged, follow: undefined, result });
  if (state === 'failed' || state === 'timeout')
    return [
      nudgeDone({
        ...syncResult,
        outcome: 'failed',
        reason: state === 'failed' ? 'sync failed' : 'sync timeout',
        detail: `${synced.message}; its consumers were not restarted`,
      }),
    ];
  if (state !== 'complete')
    return [
      nudgeDone({
        ...syncResult,
        detail: `${descriptor.operator} has not written the Secret yet; its consumers restart once it has (a follow-up checks again)`,
      }),
    ];
  if (target.restart === 'none') return [nudgeDone(syncResult)];
  const latest = synced.object ?? read;
  const byOperator = descriptor.restartedByOperator(latest);
  const secret = descriptor.secretName(latest);
  const consumers = await restartConsumers(ctx, target, { secret }, byOperator, descriptor, latest);
  const names = consumers.filter((c) => c.result.kind !== target.kind).map((c) => `${c.result.kind}/${c.result.name}`);
  const notes = [
    `restarting the consumers of Secret ${secret}: ${names.join(', ') || 'none found'}`,
    ...(byOperator.length > 0
      ? [
          `${descriptor.operator} restarts ${byOperator.map((b) => `${b.kind}/${b.name}`).join(', ')} itself (rolloutRestartTargets): not restarted again`,
        ]
      : []),
  ];
  return [
    nudgeDone({ ...syncResult, detail: notes.join('; ') }),
    ...consumers.filter((c) => c.result.kind !== target.kind || c.result.outcome !== 'skipped'),
  ];
}

/** Where the sync stands: once from the object in hand, then (within the budget) by following it. */
async function waitForSync(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  descriptor: SyncDescriptor,
  nudged: WorkloadDone,
): Promise<FollowedRollout & { object?: KubeObject }> {
  const patchedAt = nudged.follow?.patchedAt ?? ctx.clock.now();
  const timeoutMs = target.syncTimeoutMs ?? DEFAULT_SYNC_TIMEOUT_MS;
  // The deadline counts from the nudge recorded on the resource, so a follow-up or a replay never extends it.
  const current = await ctx.read(descriptor, target.namespace, target.name);
  const object = current.ok ? current.value : undefined;
  const recorded = Date.parse(object?.metadata?.annotations?.[SYNC_ANNOTATIONS.requestedAt] ?? '');
  const startedAt = Number.isNaN(recorded) ? patchedAt : recorded;
  const now = object && syncStateNow(ctx, descriptor, object, startedAt, timeoutMs);
  if (now) return now;
  const budgetMs = ctx.followUntil === undefined ? 0 : ctx.followUntil - ctx.clock.now();
  if (budgetMs <= 0)
    return {
      rollout: 'progressing',
      message: object
        ? descriptor.health(object).message
        : `could not read the ${target.kind}: ${current.ok ? '' : current.failure.detail}`,
    };
  return followSync(ctx, target, descriptor, object, { startedAt, timeoutMs, budgetMs });
}

/** The sync's end as the object read says it: complete, failed, or past its deadline; undefined while under way. */
function syncStateNow(
  ctx: ConsumersStepContext,
  descriptor: SyncDescriptor,
  object: KubeObject,
  startedAt: number,
  timeoutMs: number,
): (FollowedRollout & { object: KubeObject }) | undefined {
  const health = descriptor.health(object);
  if (health.state === 'complete')
    return {
      rollout: 'complete',
      message: health.message,
      rolloutMs: Math.max(0, ctx.clock.now() - startedAt),
      object,
    };
  if (health.state === 'failed') return { rollout: 'failed', message: health.message, object };
  if (ctx.clock.now() >= startedAt + timeoutMs)
    return { rollout: 'timeout', message: notSyncedWithin(descriptor, timeoutMs, health.message), object };
  return undefined;
}

const notSyncedWithin = (descriptor: SyncDescriptor, timeoutMs: number, why: string): string =>
  `${descriptor.operator} did not sync within ${Math.round(timeoutMs / 1000)} s of the nudge: ${why}`;

/** Follows the synced resource like a rollout, within the budget, keeping the last object seen (its Secret's name). */
async function followSync(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  descriptor: SyncDescriptor,
  object: KubeObject | undefined,
  times: { startedAt: number; timeoutMs: number; budgetMs: number },
): Promise<FollowedRollout & { object?: KubeObject }> {
  let last: KubeObject | undefined = object;
  const watched: WorkloadDescriptor = {
    ...descriptor,
    health: (o) => ((last = o as KubeObject), descriptor.health(o)),
  };
  const followed = await followRollouts(
    [
      {
        id: 'sync',
        cluster: ctx.cluster,
        api: ctx.api,
        descriptor: watched,
        namespace: target.namespace,
        name: target.name,
        restartToken: target.restartToken,
        startedAt: times.startedAt,
        timeoutMs: times.timeoutMs,
      },
    ],
    { budgetMs: times.budgetMs, clock: ctx.clock },
  );
  const f = followed.get('sync') ?? { rollout: 'progressing', message: 'no answer' };
  const message = f.rollout === 'timeout' ? notSyncedWithin(descriptor, times.timeoutMs, f.message) : f.message;
  return { ...f, message, ...(last ? { object: last } : {}) };
}

/**
 * Restarts the workloads that consume the object, except those the operator restarts itself. No consumer at all is a
 * `skipped` result naming what was looked for, never silence.
 */
async function restartConsumers(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  consumed: ConsumedObject,
  byOperator: ReadonlyArray<{ kind: string; name: string }>,
  sync: SyncDescriptor | undefined,
  synced?: KubeObject,
): Promise<WorkloadDone[]> {
  const found = await discoverConsumers(ctx.list, target.namespace, consumed);
  if (!found.ok) return [targetResult(ctx, target, 'failed', found.reason, found.detail)];
  const mine = found.consumers.filter((c) => !byOperator.some((b) => b.kind === c.kind && b.name === c.name));
  if (mine.length === 0) {
    const why =
      found.consumers.length > 0
        ? `every consumer of ${describeConsumed(consumed)} is restarted by ${sync?.operator ?? 'its operator'} itself (rolloutRestartTargets)`
        : `no workload in ${target.namespace} references ${describeConsumed(consumed)}`;
    return [targetResult(ctx, target, 'skipped', 'no workload matched', why)];
  }
  return Promise.all(
    mine.map(async (c) => {
      // The keys this consumer uses, from its pod template and the synced resource, where the routes say none.
      const own =
        sync && synced && 'secret' in consumed
          ? withConsumerKeys(target, c, consumed.secret, { kind: sync.kind, name: target.name, object: synced })
          : target;
      const done = await ctx.restart(own, WORKLOAD_KINDS[c.kind], c.object);
      return {
        ...done,
        result: {
          ...done.result,
          detail: [done.result.detail, `consumes ${describeConsumed(consumed)}: ${c.via.join(', ')}`]
            .filter(Boolean)
            .join('; '),
        },
      };
    }),
  );
}

/** The consumers target's own result, in one attempt: its consumers could not be listed, or none is to restart. */
function targetResult(
  ctx: ConsumersStepContext,
  target: ConsumersRolloutTarget,
  outcome: 'failed' | 'skipped',
  reason: string,
  detail: string,
): WorkloadDone {
  return {
    result: {
      cluster: ctx.cluster,
      namespace: target.namespace,
      routes: target.routes,
      paths: target.paths,
      restartToken: target.restartToken,
      kind: target.kind,
      name: target.name,
      outcome,
      reason,
      detail,
      attempts: 1,
      durationMs: ctx.clock.monotonic() - ctx.started,
    },
  };
}
