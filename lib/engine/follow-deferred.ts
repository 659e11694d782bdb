/**
 * After the patches: follow what was restarted, record how each rollout ended, and start deferred targets as
 * `rollout.maxUnavailable`'s slots free up, all within the call's follow budget.
 */
import { rolloutTimeoutMs, type RoutingTable } from '../routing/routing-table.ts';
import type { Admission } from '../slots/admission.ts';
import { realClock } from './cluster-run.ts';
import { recordRolloutEvent } from './events.ts';
import { startFollower, type FollowedRollout, type FollowTarget } from './rollout-follower.ts';
import type { ExecutorOptions, FollowSettings, WorkloadDone } from './types.ts';

/**
 * Follows what was restarted (or found restarted already), then records one RolloutComplete/RolloutFailed Event
 * each. With `rollout.maxUnavailable`, a rollout that ends gives its slot back and the next deferred target starts,
 * all within the same budget; what is still deferred at its end comes back `deferred` for a later attempt.
 *
 * One follower for the whole call: a target started by a freed slot joins the watch of its (cluster, namespace,
 * kind) that is already open, so the cost of a slot cycle is the patch and the controller, not a LIST and a WATCH
 * per restart (a 1,000-Deployment namespace is ~1,000 objects per LIST).
 */
export async function followDone(
  table: RoutingTable,
  done: WorkloadDone[],
  options: ExecutorOptions,
  follow: FollowSettings,
  admission: Admission | undefined,
): Promise<void> {
  const clock = options.clock ?? realClock;
  for (const d of done) follow.onProgress?.(d.result);
  const leaseStarts = await leaseStartsOf(done, admission);
  const wakeup = wakeSignal();
  const release = slotReleaser(admission, wakeup.signal);
  const follower = startFollower({
    budgetMs: Math.max(0, follow.budgetMs),
    ...(follow.once ? { once: true } : {}),
    clock,
    onProgress: (id, f) => {
      const d = done[Number(id)];
      if (!d) return;
      applyFollowed(d, f);
      // Level-triggered: whichever attempt sees the rollout end gives the slot back.
      if (f.rollout !== 'progressing') release(d);
      follow.onProgress?.(d.result);
    },
  });
  const following: Array<Promise<void>> = [];
  const startFollowing = (i: number) => {
    const d = done[i];
    const f = d?.follow;
    if (!d || !f) return;
    // Answered by an earlier look (a continuation names what it still waits on): not followed or reported again.
    if (follow.only && d.result.outcome === 'unchanged' && !follow.only(d.result)) {
      d.follow = undefined;
      return;
    }
    const target = followTargetOf(table, d, f, String(i), startedAtOf(d, f, leaseStarts, follow, clock), follow);
    following.push(follower.follow(target).then((answer) => recordEnd(d, f, answer)));
  };
  done.forEach((_, i) => startFollowing(i));
  // One look never waits for a slot: the next look (a continuation) tries the deferred targets again.
  if (admission && !follow.once)
    await startDeferred(done, admission, follow, options.slotPollMs ?? 2_000, startFollowing, wakeup);
  // Nothing more joins: every watch ends with its last answer.
  follower.seal();
  await Promise.all(following);
  // Slots released while nothing waited any more: nothing to wake.
  wakeup.forget();
}

type Followed = NonNullable<WorkloadDone['follow']>;

/**
 * When each unchanged target restarted by an earlier attempt started, by its lease (taken just before its patch),
 * keyed by the lease's holder; one read for the whole call.
 */
async function leaseStartsOf(done: readonly WorkloadDone[], admission: Admission | undefined) {
  const claims = done.flatMap((d) => (d.slot && d.result.outcome === 'unchanged' ? d.slot.scopeKeys.slice(0, 1) : []));
  return admission && claims.length > 0 ? await admission.leaseStarts([...new Set(claims)]) : new Map<string, number>();
}

/**
 * How the deferred loop sleeps and is woken: a release or an ended retry wakes it, and none is lost before it waits.
 */
interface WakeSignal {
  signal(): void;
  /** Was it signalled since the last call? Clears the signal. */
  takeSignal(): boolean;
  waitFor(ms: number): Promise<void>;
  /** Nothing waits any more: a late signal wakes nothing. */
  forget(): void;
}

function wakeSignal(): WakeSignal {
  let signalled = false;
  let wake: (() => void) | undefined;
  return {
    signal() {
      signalled = true;
      wake?.();
    },
    takeSignal() {
      const was = signalled;
      signalled = false;
      return was;
    },
    waitFor: (ms) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => ((wake = undefined), resolve()), ms);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        };
      }),
    forget() {
      wake = undefined;
    },
  };
}

/** Gives a target's slot back once (whichever attempt sees its rollout end first), then wakes the deferred loop. */
function slotReleaser(admission: Admission | undefined, signal: () => void): (d: WorkloadDone) => void {
  const released = new Set<WorkloadDone>();
  return (d) => {
    if (!d.slot || !admission || released.has(d)) return;
    released.add(d);
    void admission.release(d.slot).then(signal);
  };
}

/** A follower's answer written into the target's result. */
function applyFollowed(d: WorkloadDone, f: FollowedRollout): void {
  d.result = {
    ...d.result,
    rollout: f.rollout,
    ...(f.rolloutMs === undefined ? {} : { rolloutMs: f.rolloutMs }),
    ...(f.pods ? { pods: f.pods } : {}),
    rolloutReason: f.message,
  };
}

/**
 * Where a target's deadline counts from: its patch when this call restarted it; else, restarted by an earlier
 * attempt, its lease when it holds one, the message's first attempt, or now.
 */
function startedAtOf(
  d: WorkloadDone,
  f: Followed,
  leaseStarts: ReadonlyMap<string, number>,
  follow: FollowSettings,
  clock: { now(): number },
): number {
  if (d.result.outcome === 'restarted') return f.patchedAt;
  const leased = d.slot ? leaseStarts.get(d.slot.holder) : undefined;
  return leased ?? follow.since ?? clock.now();
}

/** What the follower needs of a target: where it is, the restart it waits on, and its deadline. */
function followTargetOf(
  table: RoutingTable,
  d: WorkloadDone,
  f: Followed,
  id: string,
  startedAt: number,
  follow: FollowSettings,
): FollowTarget {
  const r = d.result;
  return {
    id,
    cluster: r.cluster,
    api: f.run.api,
    descriptor: f.descriptor,
    namespace: r.namespace,
    name: r.name,
    restartToken: r.restartToken,
    startedAt,
    timeoutMs: follow.timeoutMs ?? rolloutTimeoutMs(table, r.cluster, r.routes),
    ...f.restarted,
  };
}

/** The follower's last answer for a target, and its RolloutComplete/RolloutFailed Event when the rollout ended. */
async function recordEnd(d: WorkloadDone, f: Followed, answer: FollowedRollout): Promise<void> {
  applyFollowed(d, answer);
  if (answer.rollout === 'complete' || answer.rollout === 'failed')
    await recordRolloutEvent(f.run, f.target, f.descriptor, d.result);
}

/**
 * Deferred targets, in plan order: each freed slot starts the next one whose scopes have room, until none waits or
 * the budget ends. Admissions are decided one at a time (so a scope found full passes the rest over without a
 * call), but the patches that follow them run concurrently under the cluster's limiter: one slow PATCH does not
 * hold the next admission.
 */
async function startDeferred(
  done: WorkloadDone[],
  admission: Admission,
  follow: FollowSettings,
  pollMs: number,
  startFollowing: (i: number) => void,
  wakeup: WakeSignal,
): Promise<void> {
  /** Targets whose retry is under way (admitted and patching, or being decided): never tried twice at once. */
  const inFlight = new Map<number, Promise<void>>();
  const nextDeferred = roundRobin(done, inFlight);
  // The budget's end is a timer, like the follower's deadlines: decided once, not by comparing clock readings.
  let over = false;
  const budgetTimer = setTimeout(() => ((over = true), wakeup.signal()), Math.max(0, follow.budgetMs));
  let polls = 0;
  for (;;) {
    const waiting = nextDeferred();
    if ((waiting.length === 0 && inFlight.size === 0) || over) break;
    // Every wait ends at least once per poll interval: other workers may have freed slots meanwhile.
    if (polls++ > 0) admission.reopen();
    for (const i of waiting) {
      if (over) break;
      // Thousands may wait: those whose scope is known full are passed over without a call.
      if ((done[i] as WorkloadDone).blocked?.()) continue;
      inFlight.set(i, retryDeferred(done, i, follow, startFollowing, wakeup, inFlight));
      // Its admission is decided once the queue of admissions is idle: then `blocked` is current for the next one.
      await admission.idle();
    }
    if (over) break;
    // Until a slot is released, a retry ends, or it is time to ask the store again.
    if (!wakeup.takeSignal()) {
      await wakeup.waitFor(pollMs);
      wakeup.takeSignal();
    }
  }
  clearTimeout(budgetTimer);
  // Retries already admitted finish their patch (and join the follower): a slot taken is never left unfollowed.
  await Promise.all(inFlight.values());
}

/**
 * The deferred targets not already being retried, clusters taking turns (round robin, starting one further each
 * pass): in plan order, the first cluster would take every fleet slot that frees and the last would wait for the
 * others to finish.
 */
function roundRobin(done: readonly WorkloadDone[], inFlight: ReadonlyMap<number, unknown>): () => number[] {
  let turn = 0;
  return () => {
    const byCluster = new Map<string, number[]>();
    done.forEach((d, i) => {
      if (!(d.result.outcome === 'deferred' && d.retry) || inFlight.has(i)) return;
      const queue = byCluster.get(d.result.cluster);
      if (queue) queue.push(i);
      else byCluster.set(d.result.cluster, [i]);
    });
    const queues = [...byCluster.values()];
    const start = queues.length > 0 ? turn++ % queues.length : 0;
    const ordered = [...queues.slice(start), ...queues.slice(0, start)];
    const out: number[] = [];
    for (let k = 0; out.length < done.length && ordered.some((q) => k < q.length); k++)
      for (const q of ordered) if (k < q.length) out.push(q[k] as number);
    return out;
  };
}

/** One deferred target tried again: its new state replaces the old, and what it restarted joins the follower. */
function retryDeferred(
  done: WorkloadDone[],
  i: number,
  follow: FollowSettings,
  startFollowing: (i: number) => void,
  wakeup: WakeSignal,
  inFlight: Map<number, Promise<void>>,
): Promise<void> {
  const d = done[i] as WorkloadDone;
  return (d.retry as () => Promise<WorkloadDone>)().then(
    (next) => {
      done[i] = next;
      inFlight.delete(i);
      // Deferred again (another worker took the slot first): it waits for a release like the rest. Anything else
      // (restarted and followed, or failed and its slot given back) is worth another look now.
      if (next.result.outcome === 'deferred') return;
      follow.onProgress?.(next.result);
      if (next.event) void next.event();
      startFollowing(i);
      wakeup.signal();
    },
    (e: unknown) => {
      // Only a bug gets here (restartWorkload answers with results): a result for it rather than a lost target.
      done[i] = {
        result: { ...d.result, outcome: 'failed', reason: 'error', detail: e instanceof Error ? e.message : String(e) },
      };
      inFlight.delete(i);
    },
  );
}
