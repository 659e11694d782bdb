/**
 * What the engine is given and what it answers: the options of a call, the result of each target, and what one
 * cluster's run carries between its steps. Reports and services read results from here, never from the executor.
 */
import type { RolloutTarget } from '../plan/planner.ts';
import type { RestartBreakerPort } from '../plan/restart-breaker.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import type { Admission, SlotClaim } from '../slots/admission.ts';
import type { SlotStore } from '../slots/slot-store.ts';
import type { ConcurrencyLimiter } from '../kernel/limiter.ts';
import type { ClusterAccess, KubeApi } from '../workloads/kube-port.ts';
import type { PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import type { WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import type { RetryEnv, RetryPolicy } from './retry.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';

/**
 * `deferred`: bounded by `rollout.maxUnavailable` and no slot free; not patched, tried again
 * (docs/how-to/rollout-limits.md).
 */
export const Outcomes = ['restarted', 'unchanged', 'skipped', 'dry-run', 'failed', 'deferred'] as const;
export type Outcome = (typeof Outcomes)[number];

export interface RolloutResult extends WorkloadRef {
  outcome: Outcome;
  /** Why: the failure reason (`forbidden`, `unreachable`, `tls`...), the skip reason, or empty. */
  reason: string;
  detail?: string;
  attempts: number;
  durationMs: number;
  routes: string[];
  paths: string[];
  restartToken: string;
  /** Set when the rollout was followed (restarted and unchanged workloads, `follow` given): where it stands. */
  rollout?: RolloutState;
  /** Patch to complete, in ms (for an unchanged workload: from `follow.since`). */
  rolloutMs?: number;
  /** Pods on the new template out of the desired count, as the controller last reported them. */
  pods?: PodCounts;
  /** What the rollout waits for, why it failed or timed out, or why there is nothing to wait for. */
  rolloutReason?: string;
}

export interface FollowSettings {
  /** How long the call may spend following (a foreground command: `apply --wait`); not used with `once`. */
  budgetMs: number;
  /**
   * One look instead of following (the worker): where each rollout, sync and slot stands now, read once;
   * nothing waits, and deferred targets are not tried again in this call (the next look tries them).
   */
  once?: boolean;
  /**
   * Follow only the workloads this accepts (a continuation's `pending`): the others were answered by an earlier
   * look. Restarts and failures are reported whatever it says.
   */
  only?(result: RolloutResult): boolean;
  /**
   * Epoch ms when an earlier attempt restarted what is now `unchanged` (a re-delivered or follow-up message: its
   * acceptedAt), so deadlines and rolloutMs count from the restart, not from this call. Default: now.
   */
  since?: number;
  /** One deadline for every rollout, instead of the routing table's (`apply --timeout`). */
  timeoutMs?: number;
  /** Each result as soon as its patch is done, then at every change of its rollout (for a live view). */
  onProgress?(result: RolloutResult): void;
}

export interface Logger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface ExecutorOptions {
  /** Resolves (and caches) a cluster's access; see cluster-clients.ts. */
  access(name: string, config: ClusterConfig): Promise<ClusterAccess>;
  dryRun?: boolean;
  /** Record the targets' versions even where a higher one is recorded (`reset-version` after version poisoning). */
  overrideRecorded?: boolean;
  retry?: RetryPolicy;
  retryEnv?: RetryEnv;
  /** Requests in flight per cluster unless the cluster sets `concurrency`. */
  defaultConcurrency?: number;
  /** For measurements and Event times; not for anything a patch contains. */
  clock?: { now(): number; monotonic(): number };
  logger?: Logger;
  /**
   * The Kubernetes API of an access: the engine's port, given by the caller (lib/pipeline/kube-executor.ts binds the
   * HTTPS client).
   */
  apiFor(access: ClusterAccess): KubeApi;
  /**
   * Follow restarted (and unchanged) workloads until their rollout is complete, failed, past its deadline or the budget
   * ends.
   */
  follow?: FollowSettings;
  /**
   * Where the slots of `rollout.maxUnavailable` live, shared by every worker (DynamoDB in Lambda, a SQLite file for
   * `serve`), or how to open it, called only when a target is bounded. Given by the caller (the composition root, or
   * lib/pipeline/kube-executor.ts: one in-memory SQLite store per process); the engine never picks one.
   */
  slots?: SlotStore | (() => Promise<SlotStore>);
  /** How often a call that has deferred targets asks the store again while following (other workers free slots). */
  slotPollMs?: number;
  /**
   * Read and follow only, never patch (a wave's gate): a workload that would be restarted comes back
   * `skipped` with reason NOT_RESTARTED_YET — its cluster's message has not been worked yet.
   */
  observeOnly?: boolean;
  /**
   * `rollout.breaker`: asked before each patch of a target whose route sets a breaker (never for a dry run); a
   * refusal comes back `skipped` with BREAKER_REASON and its why, and the caller records the halt
   * (lib/pipeline/route-refusals.ts). Given by the caller from its rotation store.
   */
  breaker?: RestartBreakerPort;
}

/** The skip reason of a restart the breaker refused (its detail says how many restarts, within what). */
export const BREAKER_REASON = 'restart breaker';

/** The skip reason of a workload that records a newer version of a path than these changes: they are superseded. */
export const SUPERSEDED_REASON = 'older version';

/**
 * A `skipped` result's reason when none of the keys a target uses changed: its record moved to the new
 * version without a restart; the detail names the keys and the version (`keys password, api_key unchanged in v7`).
 */
export const KEYS_UNCHANGED_REASON = 'keys unchanged';

/** The skip reason of a workload an observe-only call found not restarted for these changes yet. */
export const NOT_RESTARTED_YET = 'not restarted yet';

export interface WorkloadDone {
  result: RolloutResult;
  /** Records the SecretRotated event, after every cluster's patches. */
  event?: () => Promise<void>;
  /** What following its rollout needs (restarted and unchanged workloads). */
  follow?: {
    run: ClusterRun;
    target: RolloutTarget;
    descriptor: WorkloadDescriptor;
    patchedAt: number;
    restarted?: Restarted;
  };
  /** The slot it holds (or held) under `rollout.maxUnavailable`: given back when its rollout ends. */
  slot?: SlotClaim;
  /** A deferred target: tries again (reads, decides, takes a slot, patches). */
  retry?: () => Promise<WorkloadDone>;
  /** A deferred target: is a scope it needs known to be full right now (so trying again is pointless)? */
  blocked?: () => boolean;
}

/** One cluster's share of a call: its API, limiter and retry budget. */
export interface ClusterRun {
  table: RoutingTable;
  admission: Admission | undefined;
  cluster: string;
  api: KubeApi;
  limiter: ConcurrencyLimiter;
  options: ExecutorOptions;
  retry: RetryPolicy;
  env: RetryEnv;
  clock: NonNullable<ExecutorOptions['clock']>;
  started: number;
}

/**
 * The object a rollout belongs to (the patch's answer, or the object found restarted): older generations of it are
 * stale.
 */
export type Restarted = { uid?: string; generation?: number; resourceVersion?: string };
