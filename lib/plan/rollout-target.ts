/**
 * What a plan is made of: rollout targets, the secret versions they restart for, and a target's identity. The
 * planner (lib/plan/planner.ts) builds them; everything after it (waves, queue, work, status) reads them.
 */
import type { Operation } from '../sources/secret-change.ts';
import type { SyncKind, WorkloadKind } from '../routing/target-schema.ts';

/** The secret version a target is restarted for: the newest change of one Vault path. */
export interface SecretRef {
  /** Namespace-qualified `mount/key`, as Vault's API addresses it from the root namespace. */
  path: string;
  operation: Operation;
  version: number | null;
  /** The change's id and time: identify versionless changes (KV v1, deletes). */
  id: string;
  time: string;
  /**
   * The keys this change changed, relative to the version before it (resolved by the intake from the
   * audit log's HMACs); absent: every key (no comparison was possible). A target whose keys are disjoint from them
   * is skipped only while its record is at the version before (lib/plan/changed-keys.ts keyLevelSkip).
   */
  changedKeys?: string[];
}

/** The keys a target uses of one secret path, and where they are known from (`route <name>`...). */
export interface KeysUsed {
  keys: string[];
  from: string[];
}

interface TargetBase {
  cluster: string;
  namespace: string;
  routes: string[];
  paths: string[];
  secrets: SecretRef[];
  /** Derived only from `secrets`: equal tokens mean the same restart, so a replay is recognisable. */
  restartToken: string;
  /** RFC 3339 (UTC, seconds) of the newest change: what `restartedAt` records, never the clock of a retry. */
  restartedAt: string | null;
  /**
   * Per secret path, the keys the target uses, when every route that named it for that path says which (`keys:`);
   * a path absent here uses every key. Absent when no path has keys.
   */
  uses?: Record<string, KeysUsed>;
}

export interface WorkloadRolloutTarget extends TargetBase {
  type: 'workload';
  kind: WorkloadKind;
  name?: string;
  selector?: string;
  annotated?: true;
  /**
   * A Rollout restarted by a new revision of its pod template (lib/routing/rollout-restart-by.ts); absent: restartAt.
   */
  restartBy?: 'template';
}

export interface ResourceRolloutTarget extends TargetBase {
  type: 'resource';
  apiVersion: string;
  kind: string;
  name: string;
  /** The route's merge-patch template, rendered. */
  patch: Record<string, unknown>;
  /** The status condition that says the operator is done (the route's `wait`), if any. */
  wait?: { condition: string };
}

/**
 * Restart the consumers of a Secret: the workloads whose pod template references it (or, for `SecretProviderClass`,
 * mounts that class through the CSI driver). With a sync kind, the operator's resource of that name is nudged first,
 * and the Secret is the one it writes; the consumers restart only once it has written it.
 */
export interface ConsumersRolloutTarget extends TargetBase {
  type: 'consumers';
  /** What the route names: the operator's resource to sync, or the Secret / SecretProviderClass itself. */
  kind: SyncKind | 'Secret' | 'SecretProviderClass';
  name: string;
  /** `none`: sync only, restart nothing. */
  restart: 'consumers' | 'none';
  /** How long the operator may take to write the Secret (sync kinds only); default DEFAULT_SYNC_TIMEOUT_MS. */
  syncTimeoutMs?: number;
}

export type RolloutTarget = WorkloadRolloutTarget | ResourceRolloutTarget | ConsumersRolloutTarget;

/**
 * A target a route names but that was not planned: a captured value that is no Kubernetes name, no label value in a
 * selector, a namespace outside the target's `namespaces` or a name outside its `names`.
 */
export interface PlanProblem {
  route: string;
  path: string;
  record: string;
  error: string;
}

export interface Plan {
  targets: RolloutTarget[];
  /** For each input change, the routes it matched (same order as the input). */
  routed: string[][];
  problems: PlanProblem[];
}

/** What the planner fills in once every change of a batch is in: the rest of a target is rendered per route. */
type PlannedLater = 'routes' | 'paths' | 'secrets' | 'restartToken' | 'restartedAt' | 'uses';

/** A target as one route renders it for one change, before the batch's routes and secrets are gathered on it. */
export type PlannedTarget =
  | Omit<WorkloadRolloutTarget, PlannedLater>
  | Omit<ResourceRolloutTarget, PlannedLater>
  | Omit<ConsumersRolloutTarget, PlannedLater>;

/** The identity of a target: two routes naming the same workload plan it once. */
export function targetKey(t: PlannedTarget): string {
  const what =
    t.type === 'resource'
      ? `${t.apiVersion}/${t.kind}/${t.name}`
      : t.type === 'consumers'
        ? `consumers/${t.kind}/${t.name}`
        : `${t.kind}/${t.name !== undefined ? `name=${t.name}` : t.selector !== undefined ? `selector=${t.selector}` : 'annotated'}`;
  return `${t.cluster}\u0000${t.namespace}\u0000${what}`;
}
