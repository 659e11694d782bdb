/**
 * Follows restarted workloads until their rollout is complete, failed or past its deadline — or until the caller's
 * time budget ends (a Lambda worker never sleeps past its own timeout), which leaves them `progressing`.
 *
 * One LIST-then-WATCH per (cluster, namespace, kind), shared by every workload followed there (also by those that
 * join while it runs: startFollower); 410 Gone relists, other errors reconnect with backoff, a denied watch falls
 * back to a LIST every few seconds. Level-triggered:
 * every answer is derived from the object the cluster holds now (its kind's health rule), so calling again with
 * the same (cluster, namespace, kind, name, restart token) — a re-delivered message, a follow-up after the budget —
 * gives the same answer without anything remembered in between.
 */
import { ApiException } from '@kubernetes/client-node';
import { backoffDelayMs } from '../kernel/backoff.ts';
import type { KubeApi } from '../workloads/kube-port.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import { ANNOTATIONS } from '../plan/restart-record.ts';
import type { Health, PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';

/** The default deadline of a rollout, like a Deployment's progressDeadlineSeconds default (600). */
export const DEFAULT_ROLLOUT_TIMEOUT_MS = 10 * 60_000;

export interface FollowTarget {
  /** The caller's key for this target; results come back under it. */
  id: string;
  cluster: string;
  api: KubeApi;
  descriptor: WorkloadDescriptor;
  namespace: string;
  name: string;
  /** The restart this rollout belongs to (the pod template's `vault-rollout.io/restart-token`). */
  restartToken: string;
  /** Epoch ms when the rollout began (the patch); deadline and `rolloutMs` count from it. */
  startedAt: number;
  timeoutMs: number;
  /**
   * The restarted object (the patch's answer, or the object found restarted already): a status of an older
   * generation of the same object (same uid) predates this restart and is not taken as its answer.
   */
  uid?: string;
  generation?: number;
}

export interface FollowedRollout {
  rollout: RolloutState;
  /** Patch to complete, in ms (as observed: at most one watch event late). */
  rolloutMs?: number;
  pods?: PodCounts;
  /** What a person can act on: why it failed, what it still waits for, or why there is nothing to wait for. */
  message: string;
}

export interface FollowOptions {
  /** How long this call may take; what is not finished then comes back `progressing`. */
  budgetMs: number;
  /**
   * One look (issue #23): one LIST per (cluster, namespace, kind), every target answered from it — complete, failed,
   * past its deadline, or still `progressing` — and no watch, no wait. `budgetMs` is not used.
   */
  once?: boolean;
  clock?: { now(): number };
  /** Every change of a followed workload's state (for a live view). */
  onProgress?(id: string, state: FollowedRollout): void;
  /** Server-side length of one watch request, in seconds (the API server closes it; we resume from the last version). */
  watchSeconds?: number;
  /** Interval of the LIST fallback when watching is denied. */
  pollMs?: number;
}

const realClock = { now: Date.now };
/** How long a rollout already past its deadline waits for its first status read before it is called timeout. */
const PAST_DEADLINE_GRACE_MS = 5_000;
const seconds = (ms: number) => Math.round(ms / 1000);

/** `2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded (...)`: counts first, then the cause. */
export function describeRollout(state: RolloutState, health: Health | undefined, elapsedMs: number, lastError?: string): string {
  const pods = health?.pods;
  const behind = pods ? pods.desired - pods.ready : 0;
  const counts = pods && behind > 0 ? `${behind} of ${pods.desired} new pods not Ready after ${seconds(elapsedMs)} s` : undefined;
  if (state === 'failed') return [counts, health?.message].filter(Boolean).join(': ');
  if (state === 'timeout') {
    const cause = [health?.message, lastError ? `last error: ${lastError}` : undefined].filter(Boolean).join('; ') || 'no status read';
    return `${counts ?? `not complete after ${seconds(elapsedMs)} s`} (deadline): ${cause}`;
  }
  if (state === 'progressing') return [health?.message ?? 'waiting for the first status', lastError ? `last error: ${lastError}` : undefined].filter(Boolean).join('; ');
  return health?.message ?? '';
}

/**
 * Follows a fixed set of targets: every watch ends as soon as each of its targets has an answer. With a single
 * workload in a (cluster, namespace, kind), its watch is by name: the stream carries nothing else.
 */
export async function followRollouts(targets: readonly FollowTarget[], options: FollowOptions): Promise<Map<string, FollowedRollout>> {
  const follower = startFollower(options);
  const answers = targets.map(async (t) => [t.id, await follower.follow(t)] as const);
  follower.seal();
  return new Map(await Promise.all(answers));
}

export interface RolloutFollower {
  /**
   * Follows one more target in the shared LIST + WATCH of its (cluster, namespace, kind): a watch already open
   * answers from what it has seen, with no new request. Resolves with the target's answer (never rejects).
   */
  follow(target: FollowTarget): Promise<FollowedRollout>;
  /** No more targets will join: each watch ends when its last target has an answer. Also happens when the budget ends. */
  seal(): void;
  /** Ends every watch now; a target still without an answer gets `progressing` (a process shutting down). */
  stop(): void;
}

/**
 * A follower that targets join while it runs (a freed `maxUnavailable` slot starts the next restart): the watches
 * stay open, idle ones included, until `seal()` or the end of the budget, so a workload restarted later joins its
 * (cluster, namespace, kind)'s watch instead of starting a LIST and a WATCH of its own.
 */
export function startFollower(options: FollowOptions): RolloutFollower {
  const clock = options.clock ?? realClock;
  const budgetEnd = clock.now() + Math.max(0, options.budgetMs);
  const groups = new Map<KubeApi, Map<string, WatchGroup>>();
  let sealed = false;
  const seal = () => {
    if (sealed) return;
    sealed = true;
    clearTimeout(budgetTimer);
    for (const byKey of groups.values()) for (const g of byKey.values()) g.sealed();
  };
  const budgetTimer = setTimeout(seal, Math.max(0, budgetEnd - clock.now()));
  return {
    follow(target) {
      const byKey = groups.get(target.api) ?? new Map<string, WatchGroup>();
      groups.set(target.api, byKey);
      const key = `${target.namespace}\u0000${target.descriptor.apiVersion}\u0000${target.descriptor.kind}`;
      let group = byKey.get(key);
      if (!group || group.ended()) byKey.set(key, (group = watchGroup(target, options, clock, budgetEnd, () => sealed)));
      return group.join(target);
    },
    seal,
    stop() {
      seal();
      for (const byKey of groups.values()) for (const g of byKey.values()) g.stopped();
    },
  };
}

interface Member {
  target: FollowTarget;
  /** Join order in its group: a LIST sent after the join proves the workload gone when it is missing. */
  seq: number;
  last?: Health;
  lastError?: string;
  done?: FollowedRollout;
  answer(done: FollowedRollout): void;
  timer?: ReturnType<typeof setTimeout>;
}

/** What the group's LIST and WATCH last said about one object of its kind (the health, not the object). */
type Seen = { deleted: false; uid?: string; generation: number; token?: string; health: Health } | { deleted: true; uid?: string };

interface WatchGroup {
  join(target: FollowTarget): Promise<FollowedRollout>;
  /** No more joins: end once every member has its answer. */
  sealed(): void;
  /** End now, answering every member still waiting `progressing`. */
  stopped(): void;
  ended(): boolean;
}

/**
 * One LIST + WATCH for one (cluster, namespace, kind), shared by every member, with what it has seen of each
 * object's health (bounded by the objects of that kind in the namespace), so a member that joins later is answered
 * from it at once and then by the events that follow.
 */
function watchGroup(first: FollowTarget, options: FollowOptions, clock: { now(): number }, budgetEnd: number, isSealed: () => boolean): WatchGroup {
  const { api, descriptor, namespace } = first;
  /** Members still without an answer, by workload name. */
  const byName = new Map<string, Member[]>();
  let known = new Map<string, Seen>();
  let listed = false;
  /** A single workload is watched by name until a second one joins; from then on the whole namespace. */
  let several = false;
  let selector: string | undefined;
  const stop = new AbortController();
  let request: AbortController | undefined;
  let relist = false;
  let pending = 0;
  let joins = 0;
  let wake: (() => void) | undefined;

  const end = () => {
    if (stop.signal.aborted) return;
    stop.abort();
    wake?.();
  };
  const settle = (m: Member, done: FollowedRollout) => {
    if (m.done) return;
    m.done = done;
    clearTimeout(m.timer);
    const same = byName.get(m.target.name) ?? [];
    const rest = same.filter((x) => x !== m);
    if (rest.length > 0) byName.set(m.target.name, rest);
    else byName.delete(m.target.name);
    options.onProgress?.(m.target.id, done);
    m.answer(done);
    if (--pending === 0 && isSealed()) end();
  };
  const seen = (obj: KubeObject, deleted: boolean): Seen => {
    const uid = obj.metadata?.uid;
    if (deleted) return { deleted: true, ...(uid === undefined ? {} : { uid }) };
    const token = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartToken];
    return { deleted: false, ...(uid === undefined ? {} : { uid }), generation: obj.metadata?.generation ?? 0, ...(token === undefined ? {} : { token }), health: descriptor.health(obj) };
  };
  const evaluate = (m: Member, s: Seen | undefined) => {
    if (m.done) return;
    const { target } = m;
    // What the watch saw of the object before this member's restart (a shared watch may lag behind the patch):
    // an older generation of the same object says nothing about this rollout. The events that follow will.
    const sameObject = target.uid !== undefined && s?.uid === target.uid;
    if (s?.deleted && target.uid !== undefined && s.uid !== undefined && !sameObject) return;
    if (s && !s.deleted && sameObject && s.generation < (target.generation ?? 0)) return;
    const now = clock.now();
    const elapsed = now - target.startedAt;
    if (s === undefined || s.deleted) return settle(m, { rollout: 'failed', message: `${descriptor.kind} ${namespace}/${target.name} no longer exists` });
    let health = s.health;
    // Versions only move forward: a later restart includes ours, and its rollout is the one to follow.
    if (s.token !== undefined && s.token !== target.restartToken) health = { ...health, message: `${health.message} (restarted again since, restart ${s.token.slice(0, 12)})` };
    m.last = health;
    m.lastError = undefined;
    const pods = health.pods ? { pods: health.pods } : {};
    if (health.state === 'progressing' && now >= target.startedAt + target.timeoutMs) {
      // Past its deadline when read (a follow-up, a wave's gate): the status read says why.
      return settle(m, { rollout: 'timeout', ...pods, message: describeRollout('timeout', health, elapsed) });
    }
    if (health.state === 'progressing') {
      options.onProgress?.(target.id, { rollout: 'progressing', ...pods, message: describeRollout('progressing', health, elapsed) });
      return;
    }
    settle(m, { rollout: health.state, ...pods, ...(health.state === 'complete' ? { rolloutMs: Math.max(0, elapsed) } : {}), message: describeRollout(health.state, health, elapsed) });
  };
  const onObject = (obj: KubeObject, deleted: boolean) => {
    const name = obj.metadata?.name ?? '';
    const s = seen(obj, deleted);
    known.set(name, s);
    for (const m of byName.get(name) ?? []) evaluate(m, s);
  };
  const noteError = (e: unknown) => {
    const f = classifyKubeError(e);
    for (const ms of byName.values()) for (const m of ms) m.lastError = `${f.reason}: ${f.detail}`.slice(0, 300);
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => ((wake = undefined), resolve()), ms);
      wake = () => (clearTimeout(t), (wake = undefined), resolve());
    });

  let failures = 0;
  let poll = false;
  const watchSeconds = options.watchSeconds ?? 60;
  /** Once: what one LIST says, and every member still without an answer is `progressing` (or past its deadline). */
  const lookOnce = async () => {
    try {
      const answer = await api.listForWatch(descriptor, namespace, several ? undefined : { fieldSelector: `metadata.name=${first.name}` });
      known = new Map(answer.items.map((o) => [o.metadata?.name ?? '', seen(o, false)]));
      listed = true;
      for (const [name, ms] of [...byName]) for (const m of [...ms]) evaluate(m, known.get(name));
    } catch (e) {
      noteError(e);
    }
    const now = clock.now();
    for (const ms of [...byName.values()])
      for (const m of [...ms]) {
        const state: RolloutState = now >= m.target.startedAt + m.target.timeoutMs ? 'timeout' : 'progressing';
        settle(m, { rollout: state, ...(m.last?.pods ? { pods: m.last.pods } : {}), message: describeRollout(state, m.last, now - m.target.startedAt, m.lastError) });
      }
    end();
  };
  const loop = async () => {
    if (options.once) return lookOnce();
    while (!stop.signal.aborted) {
      let resourceVersion: string;
      selector = several ? undefined : first.name;
      const listedFrom = joins;
      try {
        const answer = await api.listForWatch(descriptor, namespace, selector ? { fieldSelector: `metadata.name=${selector}` } : undefined);
        resourceVersion = answer.resourceVersion;
        // A selector that no longer covers every member (one joined during the LIST): list again, wider.
        if (selector !== undefined && several) continue;
        known = new Map(answer.items.map((o) => [o.metadata?.name ?? '', seen(o, false)]));
        listed = true;
        for (const [name, ms] of [...byName]) for (const m of [...ms]) if (known.has(name) || m.seq < listedFrom) evaluate(m, known.get(name));
      } catch (e) {
        noteError(e);
        await pause(backoff(++failures));
        continue;
      }
      if (poll) {
        await pause(options.pollMs ?? 2_000);
        continue;
      }
      relist = false;
      try {
        while (!stop.signal.aborted && !relist) {
          const remaining = Math.max(1, Math.ceil((budgetEnd - clock.now()) / 1000));
          request = new AbortController();
          await api.watch(descriptor, namespace, {
            resourceVersion,
            timeoutSeconds: Math.min(watchSeconds, remaining),
            signal: AbortSignal.any([stop.signal, request.signal]),
            ...(selector ? { fieldSelector: `metadata.name=${selector}` } : {}),
            onEvent: (event) => {
              resourceVersion = event.object.metadata?.resourceVersion ?? resourceVersion;
              if (event.type !== 'BOOKMARK') onObject(event.object, event.type === 'DELETED');
            },
          });
          failures = 0;
        }
      } catch (e) {
        // 410 Gone: the version is too old to resume from; relist now. 403: watching is not granted; poll instead.
        if (e instanceof ApiException && e.code === 410) continue;
        if (e instanceof ApiException && e.code === 403) {
          poll = true;
          for (const ms of byName.values()) for (const m of ms) m.lastError = 'watch is forbidden (grant watch; following by LIST meanwhile)';
          continue;
        }
        noteError(e);
        await pause(backoff(++failures));
      }
    }
  };
  // Started once the caller has added what it has at hand (followRollouts adds every target first).
  queueMicrotask(() => {
    loop().catch((e: unknown) => {
      // Only a bug gets here (a health rule that throws): answer for every member rather than hang.
      for (const ms of [...byName.values()]) for (const m of [...ms]) settle(m, { rollout: 'failed', message: `could not follow: ${e instanceof Error ? e.message : String(e)}` });
      end();
    });
  });

  return {
    ended: () => stop.signal.aborted,
    sealed: () => {
      if (pending === 0) end();
    },
    stopped: () => {
      for (const ms of [...byName.values()]) for (const m of [...ms]) settle(m, { rollout: 'progressing', ...(m.last?.pods ? { pods: m.last.pods } : {}), message: 'no longer followed: the process is stopping' });
      end();
    },
    join(target) {
      return new Promise<FollowedRollout>((resolve) => {
        const m: Member = { target, seq: joins++, answer: resolve };
        pending++;
        byName.set(target.name, [...(byName.get(target.name) ?? []), m]);
        if (target.name !== first.name && !several) {
          several = true;
          // The open watch is by name and would never carry this one: relist the whole namespace.
          if (selector !== undefined) {
            relist = true;
            request?.abort();
          }
        }
        // One look: the LIST answers every member; no timer.
        if (options.once) return;
        // Deadlines: per member, cut short by the call's budget.
        const deadline = target.startedAt + target.timeoutMs;
        const at = Math.min(deadline, budgetEnd);
        // Decided when the timer is set, not by comparing clocks when it fires (timers may fire a millisecond early).
        const state: RolloutState = deadline <= budgetEnd ? 'timeout' : 'progressing';
        const now = clock.now();
        m.timer = setTimeout(
          () => settle(m, { rollout: state, ...(m.last?.pods ? { pods: m.last.pods } : {}), message: describeRollout(state, m.last, clock.now() - target.startedAt, m.lastError) }),
          // Already past its deadline: read the status first (it may be complete by now), within a short grace.
          at > now ? at - now : Math.min(PAST_DEADLINE_GRACE_MS, Math.max(0, budgetEnd - now)),
        );
        // The watch is open: answer from what it has seen (a later restart's events follow on the same stream).
        if (listed && known.has(target.name)) evaluate(m, known.get(target.name));
      });
    },
  };
}

/** 250 ms doubling to 5 s, jittered; a flapping cluster costs a request every few seconds at most. */
const backoff = (failures: number): number => backoffDelayMs(failures, 250, 5_000);
