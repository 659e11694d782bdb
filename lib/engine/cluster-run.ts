/** Helpers every step of a cluster's run shares: the clock, the per-cluster limiters, a target's name and identity. */
import type { RolloutTarget } from '../plan/planner.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import type { KubeFailure } from '../workloads/kube-errors.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { resourceDescriptor, WORKLOAD_KINDS, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import type { RolloutResult } from './types.ts';

export const realClock = { now: Date.now, monotonic: () => performance.now() };

export function descriptorOf(t: RolloutTarget): WorkloadDescriptor {
  if (t.type === 'resource') return resourceDescriptor(t.apiVersion, t.kind, t.patch, t.wait);
  if (t.type === 'workload') return WORKLOAD_KINDS[t.kind];
  // Consumers targets pass the descriptor of each object they restart (sync-step.ts); this is only their first step's.
  if (isSyncKind(t.kind)) return SYNC_KINDS[t.kind];
  throw new Error(`a ${t.kind} target has no descriptor of its own`);
}

/** Limiters outlive one execution so concurrent invocations in one process share a cluster's budget. */
const limiters = new Map<string, ConcurrencyLimiter>();
export function limiterFor(cluster: string, limit: number): ConcurrencyLimiter {
  const key = `${cluster}\u0000${limit}`;
  let limiter = limiters.get(key);
  if (!limiter) limiters.set(key, (limiter = new ConcurrencyLimiter(limit)));
  return limiter;
}

export const targetName = (t: RolloutTarget): string => (t.type !== 'workload' ? t.name : (t.name ?? (t.selector !== undefined ? `(selector ${t.selector})` : '(annotated)')));

export function failedResult(t: RolloutTarget, cluster: string, name: string, failure: KubeFailure, attempts: number, durationMs: number): RolloutResult {
  return { ...identity(t, cluster, name), outcome: 'failed', reason: failure.reason, detail: failure.detail, attempts, durationMs };
}

export function identity(t: RolloutTarget, cluster: string, name: string, kind: string = t.kind) {
  return { cluster, namespace: t.namespace, kind, name, routes: t.routes, paths: t.paths, restartToken: t.restartToken };
}

