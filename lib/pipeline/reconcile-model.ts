/** What reconcile is given, its bounds, and its report. */
import type { KubeApi } from '../workloads/kube-port.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import type { RetryEnv, RetryPolicy } from '../engine/retry.ts';
import type { Plan } from '../plan/planner.ts';
import type { RolloutQueue } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import type { Operation } from '../sources/secret-change.ts';
import { DEFAULT_EXPANSION_LIMITS, type ExpansionLimits } from '../vault/expand-pattern.ts';
import type { VaultMetadataClient } from '../vault/metadata-client.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';

export interface ReconcileLimits extends ExpansionLimits {
  /** Paths one reconcile reads metadata of, over every route. */
  maxPaths: number;
  /** Vault requests in flight at once. */
  vaultConcurrency: number;
  /** Kubernetes requests in flight per cluster. */
  kubeConcurrency: number;
}

export const DEFAULT_RECONCILE_LIMITS: ReconcileLimits = {
  ...DEFAULT_EXPANSION_LIMITS,
  maxPaths: 20_000,
  vaultConcurrency: 16,
  kubeConcurrency: 10,
};

export interface ReconcileDeps {
  table: RoutingTable;
  vault: Pick<VaultMetadataClient, 'readMetadata' | 'listMetadata'>;
  /** Resolves (and caches) a cluster's access. */
  access(name: string, config: ClusterConfig): Promise<ClusterAccess>;
  apiFor?: (access: ClusterAccess) => KubeApi;
  queue: RolloutQueue;
  now: () => number;
  /** Plan and report only: record nothing, queue nothing. */
  dryRun?: boolean;
  limits?: Partial<ReconcileLimits>;
  retry?: RetryPolicy;
  retryEnv?: RetryEnv;
  /**
   * Halts and released waves (lib/rotations). A change of a halted rotation is never queued (reported in `halted`),
   * so a scheduled reconcile cannot undo a halt; the worker refuses such a message anyway.
   */
  rotations?: Pick<RotationStore, 'haltsOf'>;
}

export interface RouteExpansionReport {
  route: string;
  namespace: string;
  pattern: string;
  /** kv2: expanded; kv1: no versions, reconcile cannot see its changes; unexpandable / error: why not. */
  status: 'kv2' | 'kv1' | 'unexpandable' | 'error';
  mount?: string;
  paths: number;
  lists: number;
  truncated?: string;
  reason?: string;
}

export interface PathReport {
  /** Namespace-qualified mount/key. */
  path: string;
  version: number;
  operation: Operation;
  /** When the version was created (a delete: deleted; a destroy: the metadata's update time). */
  time: string;
}

export const WorkloadStates = ['current', 'recorded', 'behind', 'failed'] as const;
export type WorkloadState = (typeof WorkloadStates)[number];

export interface WorkloadReport extends WorkloadRef {
  /**
   * current: its record has every version; recorded: its pods already run them, recorded without a restart (in a dry
   * run: would be); behind: queued for a restart; failed: could not be read or recorded (see detail).
   */
  state: WorkloadState;
  /** The paths it is behind on or was recorded for (empty when current). */
  paths: string[];
  detail?: string;
}

export interface ReconcileReport {
  routes: RouteExpansionReport[];
  paths: PathReport[];
  /** Paths that could not be read (the Vault error); the rest of the reconcile goes on. */
  pathErrors: Array<{ path: string; error: string }>;
  plan: Plan;
  workloads: WorkloadReport[];
  /** Messages queued (0 in a dry run) and the changes they carry. */
  queued: { messages: number; changes: number };
  /**
   * Halted rotations whose changes were behind somewhere and were not queued (`vault-rollout halts clear` resumes
   * them).
   */
  halted: RotationHalt[];
  dryRun: boolean;
}
