/**
 * Follows restarted workloads until their rollout is complete, failed or past its deadline — or until the caller's
 * time budget ends (a Lambda worker never sleeps past its own timeout), which leaves them `progressing`.
 *
 * One LIST-then-WATCH per (cluster, namespace, kind), shared by every workload followed there; 410 Gone relists,
 * other errors reconnect with backoff, a denied watch falls back to a LIST every few seconds. Level-triggered:
 * every answer is derived from the object the cluster holds now (its kind's health rule), so calling again with
 * the same (cluster, namespace, kind, name, restart token) — a re-delivered message, a follow-up after the budget —
 * gives the same answer without anything remembered in between.
 */
import { ApiException } from '@kubernetes/client-node';
import type { KubeApi } from './kube-api.ts';
import { classifyKubeError } from './kube-errors.ts';
import { ANNOTATIONS } from './restart-record.ts';
import type { Health, PodCounts, RolloutState } from './rollout-health.ts';
import type { KubeObject, WorkloadDescriptor } from './workload-kinds.ts';

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
  clock?: { now(): number };
  /** Every change of a followed workload's state (for a live view). */
  onProgress?(id: string, state: FollowedRollout): void;
  /** Server-side length of one watch request, in seconds (the API server closes it; we resume from the last version). */
  watchSeconds?: number;
  /** Interval of the LIST fallback when watching is denied. */
  pollMs?: number;
}

interface Member {
  target: FollowTarget;
  last?: Health;
  lastError?: string;
  done?: FollowedRollout;
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

export async function followRollouts(targets: readonly FollowTarget[], options: FollowOptions): Promise<Map<string, FollowedRollout>> {
  const clock = options.clock ?? realClock;
  const callStart = clock.now();
  const budgetEnd = callStart + Math.max(0, options.budgetMs);
  const groups = new Map<KubeApi, Map<string, Member[]>>();
  for (const target of targets) {
    const byKey = groups.get(target.api) ?? new Map<string, Member[]>();
    groups.set(target.api, byKey);
    const key = `${target.namespace}\u0000${target.descriptor.apiVersion}\u0000${target.descriptor.kind}`;
    byKey.set(key, [...(byKey.get(key) ?? []), { target }]);
  }
  const results = new Map<string, FollowedRollout>();
  await Promise.all([...groups.values()].flatMap((byKey) => [...byKey.values()].map((members) => followGroup(members, options, clock, budgetEnd))));
  for (const group of groups.values()) for (const members of group.values()) for (const m of members) if (m.done) results.set(m.target.id, m.done);
  return results;
}

/** One shared LIST + WATCH for the members of one (cluster, namespace, kind), until each has an answer. */
async function followGroup(members: Member[], options: FollowOptions, clock: { now(): number }, budgetEnd: number): Promise<void> {
  const first = members[0] as Member;
  const { api, descriptor, namespace } = first.target;
  const byName = new Map<string, Member[]>();
  for (const m of members) byName.set(m.target.name, [...(byName.get(m.target.name) ?? []), m]);
  // A single workload is watched by name: the stream carries nothing else.
  const fieldSelector = byName.size === 1 ? `metadata.name=${first.target.name}` : undefined;
  const stop = new AbortController();
  let pending = members.length;
  let wake: (() => void) | undefined;
  let finished!: () => void;
  // The answer is due when every member has one, even if a request is still in flight (it ends on its own timeout).
  const allDone = new Promise<void>((resolve) => (finished = resolve));

  const settle = (m: Member, done: FollowedRollout) => {
    if (m.done) return;
    m.done = done;
    options.onProgress?.(m.target.id, done);
    if (--pending === 0) {
      stop.abort();
      wake?.();
      finished();
    }
  };
  const evaluate = (m: Member, obj: KubeObject | undefined) => {
    if (m.done) return;
    const now = clock.now();
    const elapsed = now - m.target.startedAt;
    if (obj === undefined) return settle(m, { rollout: 'failed', message: `${descriptor.kind} ${namespace}/${m.target.name} no longer exists` });
    let health = descriptor.health(obj);
    const token = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartToken];
    // Versions only move forward: a later restart includes ours, and its rollout is the one to follow.
    if (token !== undefined && token !== m.target.restartToken) health = { ...health, message: `${health.message} (restarted again since, restart ${token.slice(0, 12)})` };
    m.last = health;
    m.lastError = undefined;
    const pods = health.pods ? { pods: health.pods } : {};
    if (health.state === 'progressing' && now >= m.target.startedAt + m.target.timeoutMs) {
      // Past its deadline when read (a follow-up, a wave's gate): the status read says why.
      return settle(m, { rollout: 'timeout', ...pods, message: describeRollout('timeout', health, elapsed) });
    }
    if (health.state === 'progressing') {
      options.onProgress?.(m.target.id, { rollout: 'progressing', ...pods, message: describeRollout('progressing', health, elapsed) });
      return;
    }
    settle(m, { rollout: health.state, ...pods, ...(health.state === 'complete' ? { rolloutMs: Math.max(0, elapsed) } : {}), message: describeRollout(health.state, health, elapsed) });
  };
  const onObject = (obj: KubeObject, deleted: boolean) => {
    for (const m of byName.get(obj.metadata?.name ?? '') ?? []) evaluate(m, deleted ? undefined : obj);
  };

  // Deadlines: per member, cut short by the call's budget.
  const timers = members.map((m) => {
    const deadline = m.target.startedAt + m.target.timeoutMs;
    const at = Math.min(deadline, budgetEnd);
    // Decided when the timer is set, not by comparing clocks when it fires (timers may fire a millisecond early).
    const state: RolloutState = deadline <= budgetEnd ? 'timeout' : 'progressing';
    return setTimeout(
      () => {
        const now = clock.now();
        settle(m, { rollout: state, ...(m.last?.pods ? { pods: m.last.pods } : {}), message: describeRollout(state, m.last, now - m.target.startedAt, m.lastError) });
      },
      // Already past its deadline: read the status first (it may be complete by now), within a short grace.
      at > clock.now() ? at - clock.now() : Math.min(PAST_DEADLINE_GRACE_MS, Math.max(0, budgetEnd - clock.now())),
    );
  });

  const noteError = (e: unknown) => {
    const f = classifyKubeError(e);
    for (const m of members) m.lastError = `${f.reason}: ${f.detail}`.slice(0, 300);
  };
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => ((wake = undefined), resolve()), ms);
      wake = () => (clearTimeout(t), (wake = undefined), resolve());
    });

  let failures = 0;
  let poll = false;
  const watchSeconds = options.watchSeconds ?? 60;
  const loop = async () => {
    while (pending > 0) {
      let resourceVersion: string;
      try {
        const listed = await api.listForWatch(descriptor, namespace, fieldSelector ? { fieldSelector } : undefined);
        resourceVersion = listed.resourceVersion;
        const seen = new Set(listed.items.map((o) => o.metadata?.name ?? ''));
        for (const o of listed.items) onObject(o, false);
        for (const [name, ms] of byName) if (!seen.has(name)) for (const m of ms) evaluate(m, undefined);
      } catch (e) {
        noteError(e);
        await pause(backoff(++failures));
        continue;
      }
      if (poll) {
        await pause(options.pollMs ?? 2_000);
        continue;
      }
      try {
        while (pending > 0) {
          const remaining = Math.max(1, Math.ceil((budgetEnd - clock.now()) / 1000));
          await api.watch(descriptor, namespace, {
            resourceVersion,
            timeoutSeconds: Math.min(watchSeconds, remaining),
            signal: stop.signal,
            ...(fieldSelector ? { fieldSelector } : {}),
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
          for (const m of members) m.lastError = 'watch is forbidden (grant watch; following by LIST meanwhile)';
          continue;
        }
        noteError(e);
        await pause(backoff(++failures));
      }
    }
  };
  void loop().catch((e: unknown) => {
    // Only a bug gets here (a health rule that throws): answer for every member rather than hang.
    for (const m of members) settle(m, { rollout: 'failed', message: `could not follow: ${e instanceof Error ? e.message : String(e)}` });
  });
  await allDone;
  for (const t of timers) clearTimeout(t);
}

/** 250 ms doubling to 5 s, jittered; a flapping cluster costs a request every few seconds at most. */
const backoff = (failures: number): number => {
  const cap = Math.min(5_000, 250 * 2 ** Math.min(failures - 1, 5));
  return cap / 2 + Math.random() * (cap / 2);
};
