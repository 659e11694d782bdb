/**
 * Which rotation events the worker notifies, written to the outbox and nowhere else: a step never sends
 * a notification and never waits for one (serve's loop delivers them, lib/notify/delivery.ts). Each event's id comes
 * from the rotation, the kind and where (lib/notify/event.ts), and the outbox keeps one per id, so a redelivered
 * message, a gate worked again or a restarted `serve` notifies nothing twice. A failure here is logged and the step
 * goes on: notifications never hold a rotation back.
 *
 * - halted: a gate recorded a halt;
 * - target-failed: a target's restart failed (its message is redelivered; one notification per target);
 * - rollout-failed: a rollout ended failed or timed out, or a continuation expired with it still under way;
 * - progressing: a rollout still progressing `notifications.progressingAfter` after its restart;
 * - complete: every cluster of the rotation (every wave) finished, none failed, no halt;
 * - dead-letter: a refused message was dead-lettered, or serve's queue dead-lettered one after its redrive limit;
 * - would-restart: a notify-only route's targets that would have restarted in a cluster (nothing was patched).
 * - approval-requested: a wave waits for `vault-rollout approve` (one per rotation and wave), with the command.
 */
import type { RolloutResult } from '../engine/types.ts';
import { eventId, rotationEvent, type NotificationEvent } from '../notify/event.ts';
import { changeSets } from '../plan/cluster-changes.ts';
import type { Plan, RolloutTarget } from '../plan/planner.ts';
import type { ChangeSet } from '../plan/waves.ts';
import type { LocalRolloutQueue } from '../queue/local-queue.ts';
import { pendingName } from '../queue/rollout-message.ts';
import { NOTIFY_ONLY_REASON } from '../plan/route-modes.ts';
import { NOTIFICATION_TTL_MS, type NotificationOutbox } from '../rotations/notification-outbox.ts';
import type { NotificationEventKind } from '../routing/notifications-schema.ts';
import type { ApprovalRequest } from '../rotations/approvals.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { HaltRecord, QueueRecord, WorkerDeps } from './worker-deps.ts';

type Deps = Pick<WorkerDeps, 'table' | 'telemetry' | 'notifications' | 'now'>;

/**
 * The sinks an event of `kind` goes to: those of the routes it concerns (the top level's when none) that send that
 * kind.
 */
export function sinksFor(table: WorkerDeps['table'], kind: NotificationEventKind, routes: readonly string[]): string[] {
  const policies =
    routes.length === 0
      ? [table.notifications]
      : table.routes.filter((r) => routes.includes(r.name)).map((r) => r.notifications);
  return [...new Set(policies.filter((p) => p.events.has(kind)).flatMap((p) => [...p.sinks.keys()]))].sort();
}

async function emit(
  deps: Deps,
  outbox: NotificationOutbox,
  event: NotificationEvent,
  routes: readonly string[],
): Promise<void> {
  const sinks = sinksFor(deps.table, event.kind, routes);
  if (sinks.length === 0) return;
  const fresh = await outbox.enqueueOnce(
    event.id,
    sinks,
    JSON.stringify(event),
    (deps.now ?? Date.now)(),
    NOTIFICATION_TTL_MS,
  );
  if (fresh)
    deps.telemetry.info('notification queued', {
      eventId: event.id,
      kind: event.kind,
      rotation: event.rotation,
      sinks,
    });
}

/** Runs `work` only when notifications are configured; never throws. */
async function guarded(deps: Deps, what: string, work: (outbox: NotificationOutbox) => Promise<void>): Promise<void> {
  const outbox = deps.notifications?.outbox;
  if (!outbox || deps.table.allSinks.size === 0) return;
  try {
    await work(outbox);
  } catch (e) {
    deps.telemetry.warn('could not queue a notification; the rotation goes on', {
      what,
      error: e instanceof Error ? e.name : String(e),
    });
  }
}

const at = (deps: Deps) => new Date((deps.now ?? Date.now)()).toISOString();
const secretsOf = (targets: readonly Pick<RolloutTarget, 'secrets'>[]): string[] =>
  [
    ...new Set(
      targets.flatMap((t) =>
        t.secrets.map((s) => (s.version === null ? `${s.path} (${s.operation})` : `${s.path} version ${s.version}`)),
      ),
    ),
  ].sort();
const workloadOf = (r: RolloutResult) => ({ namespace: r.namespace, kind: r.kind, name: r.name });

export function noticeHalt(deps: Deps, set: Pick<ChangeSet, 'key' | 'route'>, halt: HaltRecord): Promise<void> {
  return guarded(deps, 'halted', (outbox) =>
    emit(
      deps,
      outbox,
      rotationEvent(
        {
          kind: 'halted',
          rotation: set.key,
          route: set.route,
          at: at(deps),
          secrets: halt.secrets,
          wave: halt.wave,
          waves: halt.waves,
          cluster: halt.failing.cluster,
          workload: { namespace: halt.failing.namespace, kind: halt.failing.kind, name: halt.failing.name },
          reason: halt.why,
          notRestarted: halt.notRestarted,
        },
        `wave ${halt.wave}`,
      ),
      [set.route],
    ),
  );
}

/** A wave waits for `vault-rollout approve`: the event carries the exact command (one per rotation and wave). */
export function noticeApprovalRequested(
  deps: Deps,
  request: Pick<ApprovalRequest, 'rotation' | 'route' | 'secrets' | 'wave' | 'waves' | 'since'>,
  command: string,
): Promise<void> {
  const { rotation, route, secrets, wave, waves, since } = request;
  const reason = `wave ${wave} of ${waves} waits for approval (since ${since})`;
  return guarded(deps, 'approval-requested', (outbox) =>
    emit(
      deps,
      outbox,
      rotationEvent(
        { kind: 'approval-requested', rotation, route, at: at(deps), secrets, wave, waves, reason, command },
        `wave ${wave}`,
      ),
      [route],
    ),
  );
}

export interface LookedAt {
  cluster: string;
  changes: readonly SecretChange[];
  plan: Plan;
  targets: readonly RolloutTarget[];
}

/** The rotation a result belongs to: the change set of its route (the first set when none matches). */
const setOf = (sets: readonly ChangeSet[], r: Pick<RolloutResult, 'routes'>): ChangeSet | undefined =>
  sets.find((s) => r.routes.includes(s.route)) ?? sets[0];

/**
 * After a cluster step's or a continuation's look: failed targets, failed or timed-out rollouts, rollouts progressing
 * past the limit; and when nothing is left to wait for (`finished`), the cluster's part of each rotation is done, and
 * a rotation whose every cluster is done (none failed, not halted) is complete. `expired`: a continuation gave up
 * with these still under way.
 */
export function noticeLook(
  deps: Deps,
  looked: LookedAt,
  out: readonly RolloutResult[],
  phase: { sinceMs: number; finished: boolean; expired?: readonly RolloutResult[] },
): Promise<void> {
  return guarded(deps, 'look', async (outbox) => {
    const look: Look = {
      deps,
      outbox,
      looked,
      nowMs: (deps.now ?? Date.now)(),
      sets: changeSets(deps.table, looked.changes, looked.plan),
      secrets: secretsOf(looked.targets),
    };
    for (const r of out) await noticeResult(look, r, phase.sinceMs);
    for (const r of phase.expired ?? []) await noticeExpired(look, r);
    if (!phase.finished || out.some((r) => r.outcome === 'failed')) return;
    for (const set of look.sets) await noticeClusterDone(look, set);
  });
}

/** One look's notifications: where they go and what they are about. */
interface Look {
  readonly deps: Deps;
  readonly outbox: NotificationOutbox;
  readonly looked: LookedAt;
  readonly nowMs: number;
  readonly sets: readonly ChangeSet[];
  readonly secrets: string[];
}

/** The fields every notification of a result has: its rotation, route, time, secrets, cluster and workload. */
function resultBase(look: Look, r: RolloutResult, set: ChangeSet | undefined) {
  return {
    rotation: set?.key ?? 'unknown',
    ...(set ? { route: set.route } : {}),
    at: at(look.deps),
    secrets: look.secrets,
    cluster: r.cluster,
    workload: workloadOf(r),
  };
}

const whereOf = (r: RolloutResult) => `${r.cluster}/${pendingName(r)}`;

/** A failed target, a failed or timed-out rollout, or one progressing past its routes' limit. */
async function noticeResult(look: Look, r: RolloutResult, sinceMs: number): Promise<void> {
  const { deps, outbox, nowMs } = look;
  const set = setOf(look.sets, r);
  const routes = set ? [set.route] : r.routes;
  if (r.outcome === 'failed') {
    const reason = [r.reason, r.detail].filter(Boolean).join(': ');
    await emit(
      deps,
      outbox,
      rotationEvent({ kind: 'target-failed', ...resultBase(look, r, set), reason }, whereOf(r)),
      routes,
    );
  } else if (r.rollout === 'failed' || r.rollout === 'timeout') {
    if (set) await outbox.note(set.key, `failed ${r.cluster}`, nowMs, NOTIFICATION_TTL_MS);
    const reason = `rollout ${r.rollout}${r.rolloutReason ? `: ${r.rolloutReason}` : ''}`;
    await emit(
      deps,
      outbox,
      rotationEvent({ kind: 'rollout-failed', ...resultBase(look, r, set), reason }, whereOf(r)),
      routes,
    );
  } else if (r.rollout === 'progressing') {
    const limit = Math.min(
      ...deps.table.routes.filter((x) => routes.includes(x.name)).map((x) => x.notifications.progressingAfterMs),
    );
    if (Number.isFinite(limit) && nowMs - sinceMs >= limit) {
      const reason = `still progressing ${Math.round((nowMs - sinceMs) / 1000)} s after its restart${r.rolloutReason ? `: ${r.rolloutReason}` : ''}`;
      await emit(
        deps,
        outbox,
        rotationEvent({ kind: 'progressing', ...resultBase(look, r, set), reason }, whereOf(r)),
        routes,
      );
    }
  }
}

/** A rollout a continuation stopped following while still under way. */
async function noticeExpired(look: Look, r: RolloutResult): Promise<void> {
  const set = setOf(look.sets, r);
  if (set) await look.outbox.note(set.key, `failed ${r.cluster}`, look.nowMs, NOTIFICATION_TTL_MS);
  // The same id as a rollout that ended `timeout`: one notification whichever look saw it first.
  await emit(
    look.deps,
    look.outbox,
    rotationEvent(
      {
        kind: 'rollout-failed',
        ...resultBase(look, r, set),
        reason: 'rollout still under way when vault-rollout stopped following it',
      },
      whereOf(r),
    ),
    set ? [set.route] : r.routes,
  );
}

/** This cluster's part of a rotation is done; the rotation is complete when every cluster's is, none failed. */
async function noticeClusterDone(look: Look, set: ChangeSet): Promise<void> {
  const { deps, outbox, nowMs, looked } = look;
  const clusters = set.waves.flatMap((w) => w.clusters);
  if (!clusters.includes(looked.cluster)) return;
  await outbox.note(set.key, `done ${looked.cluster}`, nowMs, NOTIFICATION_TTL_MS);
  const notes = new Set(await outbox.notes(set.key, nowMs));
  if ([...notes].some((n) => n.startsWith('failed '))) return;
  if (!clusters.every((c) => notes.has(`done ${c}`))) return;
  const setSecrets = [
    ...new Set(
      set.changes.map((c) => (c.version === null ? `${c.path} (${c.operation})` : `${c.path} version ${c.version}`)),
    ),
  ].sort();
  await emit(
    deps,
    outbox,
    rotationEvent({
      kind: 'complete',
      rotation: set.key,
      route: set.route,
      at: at(deps),
      secrets: setSecrets,
      waves: set.waves.length,
      clusters,
    }),
    [set.route],
  );
}

/**
 * A notify-only route's targets in one cluster that would have restarted: one event per rotation and cluster (a
 * redelivery computes the same id), listing the first EVENT_BOUNDS.list of them and a count of the rest.
 */
export function noticeWouldRestart(deps: Deps, looked: LookedAt, out: readonly RolloutResult[]): Promise<void> {
  const would = out.filter((r) => r.outcome === 'skipped' && r.reason === NOTIFY_ONLY_REASON);
  if (would.length === 0) return Promise.resolve();
  return guarded(deps, 'would-restart', async (outbox) => {
    const sets = changeSets(deps.table, looked.changes, looked.plan);
    const bySet = new Map<ChangeSet | undefined, RolloutResult[]>();
    for (const r of would) bySet.set(setOf(sets, r), [...(bySet.get(setOf(sets, r)) ?? []), r]);
    for (const [set, results] of bySet) {
      const event = rotationEvent(
        {
          kind: 'would-restart',
          rotation: set?.key ?? 'unknown',
          ...(set ? { route: set.route } : {}),
          at: at(deps),
          secrets: secretsOf(looked.targets),
          cluster: looked.cluster,
          reason: `${results.length} target${results.length === 1 ? '' : 's'} would restart; the route is notify-only, nothing was patched`,
          targets: results.map((r) => `${r.kind} ${r.namespace}/${r.name}`).sort(),
        },
        `cluster ${looked.cluster}`,
      );
      await emit(deps, outbox, event, set ? [set.route] : results.flatMap((r) => r.routes));
    }
  });
}

/** A refused message went to the dead letters: one notification per message id (the top-level sinks). */
export function noticeDeadLetter(
  deps: Deps,
  record: Pick<QueueRecord, 'messageId' | 'groupId'>,
  reason: string,
): Promise<void> {
  return guarded(deps, 'dead-letter', (outbox) =>
    emit(
      deps,
      outbox,
      rotationEvent({
        kind: 'dead-letter',
        rotation: record.messageId.slice(0, 128),
        at: at(deps),
        secrets: [],
        reason: `group ${record.groupId.slice(0, 63)}: ${reason}`,
      }),
      [],
    ),
  );
}

/**
 * Dead letters the queue itself made (serve's SQLite queue: a message received `maxReceiveCount` times without being
 * worked), read from its dead letters since `sinceMs`: one notification per message id — a refused message, already
 * notified when it was refused, adds nothing. Returns how many were read.
 */
export async function noticeDeadLetters(
  deps: Deps,
  queue: Pick<LocalRolloutQueue, 'deadLetters'>,
  sinceMs: number,
): Promise<number> {
  const letters = queue.deadLetters(sinceMs);
  for (const letter of letters)
    await noticeDeadLetter(
      deps,
      letter,
      letter.reason ?? `received ${letter.receiveCount} times without being worked (the queue's redrive limit)`,
    );
  return letters.length;
}

export { eventId };
