/**
 * What following a rollout takes and gives: the target, the answer, the options, and the one sentence that says
 * where a rollout stands. Shared by the follower (rollout-follower.ts) and its watches (shared-watch.ts).
 */
import type { KubeApi } from '../workloads/kube-port.ts';
import type { Health, PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import type { WorkloadDescriptor } from '../workloads/workload-kinds.ts';

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
  /** Its resourceVersion then: a single look needs the cluster's state no older than this, not the newest. */
  resourceVersion?: string;
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
   * One look (a Lambda step that must not wait): one LIST per (cluster, namespace, kind), every target answered from it
   * — complete, failed,
   * past its deadline, or still `progressing` — and no watch, no wait. `budgetMs` is not used.
   */
  once?: boolean;
  clock?: { now(): number };
  /** Every change of a followed workload's state (for a live view). */
  onProgress?(id: string, state: FollowedRollout): void;
  /**
   * Server-side length of one watch request, in seconds (the API server closes it; we resume from the last version).
   */
  watchSeconds?: number;
  /** Interval of the LIST fallback when watching is denied. */
  pollMs?: number;
}

const seconds = (ms: number) => Math.round(ms / 1000);

/** `2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded (...)`: counts first, then the cause. */
export function describeRollout(
  state: RolloutState,
  health: Health | undefined,
  elapsedMs: number,
  lastError?: string,
): string {
  const pods = health?.pods;
  const behind = pods ? pods.desired - pods.ready : 0;
  const counts =
    pods && behind > 0 ? `${behind} of ${pods.desired} new pods not Ready after ${seconds(elapsedMs)} s` : undefined;
  if (state === 'failed') return [counts, health?.message].filter(Boolean).join(': ');
  if (state === 'timeout') {
    const cause =
      [health?.message, lastError ? `last error: ${lastError}` : undefined].filter(Boolean).join('; ') ||
      'no status read';
    return `${counts ?? `not complete after ${seconds(elapsedMs)} s`} (deadline): ${cause}`;
  }
  if (state === 'progressing')
    return [health?.message ?? 'waiting for the first status', lastError ? `last error: ${lastError}` : undefined]
      .filter(Boolean)
      .join('; ');
  return health?.message ?? '';
}
