/** Helpers every step of a cluster's run shares: the clock, the per-cluster limiters, a target's name and identity. */
import type { RolloutTarget } from '../plan/planner.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import type { KubeFailure } from '../workloads/kube-errors.ts';
import type { RolloutResult } from './types.ts';

export const realClock = { now: Date.now, monotonic: () => performance.now() };

/** Limiters outlive one execution so concurrent invocations in one process share a cluster's budget. */
const limiters = new Map<string, ConcurrencyLimiter>();
export function limiterFor(cluster: string, limit: number): ConcurrencyLimiter {
  const key = `${cluster}\u0000${limit}`;
  let limiter = limiters.get(key);
  if (!limiter) limiters.set(key, (limiter = new ConcurrencyLimiter(limit)));
  return limiter;
}

export const targetName = (t: RolloutTarget): string =>
  t.type !== 'workload' ? t.name : (t.name ?? (t.selector !== undefined ? `(selector ${t.selector})` : '(annotated)'));

export function failedResult(
  t: RolloutTarget,
  cluster: string,
  name: string,
  failure: KubeFailure,
  attempts: number,
  durationMs: number,
): RolloutResult {
  return {
    ...identity(t, cluster, name),
    outcome: 'failed',
    reason: failure.reason,
    detail: failure.detail,
    attempts,
    durationMs,
  };
}

export function identity(t: RolloutTarget, cluster: string, name: string, kind: string = t.kind) {
  return {
    cluster,
    namespace: t.namespace,
    kind,
    name,
    routes: t.routes,
    paths: t.paths,
    restartToken: t.restartToken,
  };
}
