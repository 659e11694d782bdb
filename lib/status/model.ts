/**
 * `vault-rollout status`'s model: what it lists, what the clusters and Vault answered, and what it reports per path.
 */
import type { PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';

/** One LIST: a kind in a namespace ('' = every namespace) of one cluster. */
export interface ListRequest {
  apiVersion: string;
  kind: string;
  namespace: string;
  /** Only objects with this label (pods, by the label their controller sets). */
  labelSelector?: string;
}

export const listKey = (r: ListRequest): string =>
  `${r.apiVersion}/${r.kind}/${r.namespace}${r.labelSelector ? `?${r.labelSelector}` : ''}`;

/** What one cluster answered: the objects per LIST, or why it could not be read. */
export interface ClusterListing {
  cluster: string;
  lists: Map<string, KubeObject[] | { error: string }>;
  error?: string;
}

export interface VaultVersion {
  currentVersion: number;
  /** created_time of the current version. */
  createdTime?: string;
  /** The current version was deleted or destroyed. */
  gone?: 'deleted' | 'destroyed';
}

export type VaultAnswer = VaultVersion | { error: string } | { absent: true };

export const ConsumerStates = ['current', 'behind', 'poisoned', 'unknown'] as const;
export type ConsumerState = (typeof ConsumerStates)[number];

export interface ConsumerStatus extends WorkloadRef {
  /** The version (or, KV v1, the change time) recorded for the path; null when none. */
  recorded: number | string | null;
  state: ConsumerState;
  rollout: RolloutState;
  pods?: PodCounts;
  /**
   * The pods running now, by revision (lib/status/running-pods.ts): on a revision whose template records the
   * version, or older. Absent for kinds without pods of their own (CronJob, custom resources) and when not listed.
   */
  runningPods?: RunningPods;
  /** Why a wave halted on it, when one did. */
  halted?: string;
  /**
   * A key-level skip of a version newer than its record (restart-record.ts KeySkip): a change claimed none of its
   * keys changed. Unverified until reconcile confirmed the version with Vault, so never counted safe to revoke.
   */
  skippedByKeys?: { v: number; skipped: string[] };
  /** A route targets it now; false: it only records the path (shown, not counted). */
  routed: boolean;
  /** Only notify-only routes (`mode: notify`) target it: vault-rollout announces its versions, never restarts it. */
  notifyOnly?: true;
  /** Current, rolled out and not halted. */
  ok: boolean;
  detail: string;
}

/** Pods counted by the revision they run; `unread` says why they could not be counted (then never safe). */
export interface RunningPods {
  onRecorded: number;
  older: number;
  unread?: string;
}

export interface PathStatus {
  /** Namespace-qualified `mount/key`, as the record keys it. */
  path: string;
  vaultNamespace: string;
  mount: string;
  key: string;
  kvVersion: 1 | 2;
  /** What current means for this path, and where it comes from. */
  current: number | string | null;
  currentFrom: 'vault' | 'records' | 'none';
  vault?: VaultAnswer;
  consumers: ConsumerStatus[];
  notes: string[];
  ok: boolean;
}

export interface FleetStatus {
  paths: PathStatus[];
  /** Clusters or lists that could not be read, per cluster. */
  unreadable: Array<{ cluster: string; error: string }>;
  /** Paths left out by the bound, and other warnings. */
  notes: string[];
  ok: boolean;
}

export interface StatusOptions {
  /** Only paths matching this pattern (route pattern syntax, namespace-qualified). */
  path?: string;
  /** Only these clusters. */
  clusters?: ReadonlySet<string>;
  /** At most this many paths (default 10,000); the rest are named as left out. */
  maxPaths?: number;
}

export const DEFAULT_MAX_PATHS = 10_000;
