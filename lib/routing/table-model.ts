/** The compiled routing table: its routes, targets and rollout policies, and what to ask of them. */
import type { KvMounts } from '../sources/kv-mounts.ts';
import type { Operation } from '../sources/secret-change.ts';
import type { RouteIndex } from './bucketed-index.ts';
import { matchSegment, type CompiledPattern, type PatternSegment } from './path-pattern.ts';
import { parseDuration, type ClusterConfig, type MaxUnavailable, type RotationStoreRef } from './schema.ts';
import type { RestartWindow } from './restart-window.ts';
import { type NotificationEventKind, type NotificationSink } from './notifications-schema.ts';
import type { WaveTargets } from './wave-targets.ts';
import {
  type ConsumersTarget,
  type ResourceTarget,
  type SyncTarget,
  type Target,
  type WorkloadTarget,
} from './target-schema.ts';

export interface ConfigProblem {
  file: string;
  line: number;
  column: number;
  field: string;
  message: string;
}

/** `file:line:column: field: message`, as compilers and kubectl print it; a problem of the whole text has no field. */
export const formatProblem = (p: ConfigProblem): string =>
  `${p.file}:${p.line}:${p.column}: ${p.field ? `${p.field}: ` : ''}${p.message}`;

export class RoutingTableError extends Error {
  override readonly name = 'RoutingTableError';
  readonly problems: ConfigProblem[];
  constructor(problems: ConfigProblem[]) {
    super(`invalid routing table:\n${problems.map(formatProblem).join('\n')}`);
    this.problems = problems;
  }
}

export interface CompiledTarget {
  target: Target;
  /** Cluster names this target applies to, sorted. */
  clusters: string[];
  /** The target's `namespaces`, compiled; undefined when the target sets no bound. */
  namespaces?: NameBound;
  /** The target's `names`, compiled; undefined when the target sets no bound. */
  names?: NameBound;
}

/**
 * The namespaces (`namespaces`) or object names (`names`) a target may reach: names and `*` globs, matched like one
 * segment of a path pattern.
 */
export interface NameBound {
  sources: readonly string[];
  globs: readonly PatternSegment[];
}

export const boundAllows = (bound: NameBound, value: string): boolean =>
  bound.globs.some((g) => (g.kind === 'literal' ? g.source === value : matchSegment(g.tokens, value) !== undefined));

export interface CompiledRoute {
  name: string;
  namespace: string;
  operations: ReadonlySet<Operation>;
  pattern: CompiledPattern;
  targets: CompiledTarget[];
  /** `rollout.timeout` of the route, if it sets one. */
  rolloutTimeoutMs?: number;
  /** `rollout.maxUnavailable` of the route, if it sets one. */
  maxUnavailable?: MaxUnavailable;
  /** Waves, gate, onFailure and settle: the top-level `rollout` with the route's own fields over it. */
  policy: RolloutPolicy;
  /** Where this route's rotation events go: the top-level `notifications` with the route's own over it. */
  notifications: NotificationPolicy;
  /** `mode: notify`: its targets are planned and announced, never patched (set only for notify). */
  mode?: 'notify';
}

/**
 * Sinks by name (a route's block adds sinks or overrides one of the same name), the events sent, the progressing limit.
 */
export interface NotificationPolicy {
  sinks: ReadonlyMap<string, NotificationSink>;
  events: ReadonlySet<NotificationEventKind>;
  progressingAfterMs: number;
}

/** A rollout still progressing this long after its restart sends one `progressing` event. */
export const DEFAULT_PROGRESSING_AFTER_MS = 15 * 60_000;

/**
 * How one route's changes are rolled out across clusters. Without `waves`, all at once as before.
 * A route's `rollout` block overrides the top-level one field by field (`gate` too, field by field); `waves` is
 * replaced whole.
 */
export interface RolloutPolicy {
  /** Cluster names per wave, in order, each cluster in its first wave only; undefined: one wave, everything. */
  waves?: string[][];
  /** Per wave, the targets it selects in its clusters (lib/routing/wave-targets.ts); undefined: waves of clusters. */
  waveTargets?: ReadonlyArray<WaveTargets | undefined>;
  /** `approval`: the next wave also waits for `vault-rollout approve` (lib/rotations approvals). */
  gate: { healthy: boolean; timeoutMs: number; pauseMs: number; approval?: boolean };
  onFailure: 'halt' | 'continue';
  settleMs: number;
  /** `rollout.breaker`: at most `restarts` restarts of one workload within `withinMs` (lib/plan/restart-breaker.ts). */
  breaker?: { restarts: number; withinMs: number };
  /** `rollout.window`: restarts start only inside it (lib/plan/restart-window.ts). */
  window?: RestartWindow;
  /** `rollout.waves[i].window` by wave index (the `from` of a Wave), over `window` for that wave. */
  waveWindows?: ReadonlyArray<RestartWindow | undefined>;
}

/** The gate defaults: healthy, 10 minutes, no pause. */
export const DEFAULT_GATE_TIMEOUT_MS = 600_000;

export interface RoutingTable {
  clusters: ReadonlyMap<string, ClusterConfig>;
  mounts: KvMounts;
  routes: readonly CompiledRoute[];
  /** One pattern index per Vault namespace. */
  index: ReadonlyMap<string, RouteIndex>;
  /** Where the table came from, for relative kubeconfig paths. */
  file: string;
  /** The top-level `rollout.timeout`, if set. */
  rolloutTimeoutMs?: number;
  /** The top-level `rollout.maxUnavailable`, if set: the default of every route that sets none. */
  maxUnavailable?: MaxUnavailable;
  /** The top-level `notifications` (events that belong to no route: dead letters), and every sink any route names. */
  notifications: NotificationPolicy;
  allSinks: ReadonlyMap<string, NotificationSink>;
  /** The top-level `rotationStore`: where the deployment serving this table keeps its halts, if it says. */
  rotationStore?: RotationStoreRef;
  /**
   * A short hash of the checked document, carried in queue messages so a refusal can say that the sender planned
   * with another table (a deploy in progress, a relay's older copy). Computed on first use.
   */
  readonly hash: string;
}

/** The default rollout deadline, like a Deployment's progressDeadlineSeconds default (600 s). */
export const DEFAULT_ROLLOUT_TIMEOUT_MS = 600_000;

/**
 * The deadline of one target's rollout: its routes' `rollout.timeout` (the longest when several routes name it:
 * each says how long the workload may take), else its cluster's `rolloutTimeout`, else the top-level
 * `rollout.timeout`, else 10 minutes.
 */
export function rolloutTimeoutMs(
  table: Pick<RoutingTable, 'routes' | 'clusters' | 'rolloutTimeoutMs'>,
  cluster: string,
  routeNames: readonly string[],
): number {
  const fromRoutes = table.routes
    .filter((r) => routeNames.includes(r.name) && r.rolloutTimeoutMs !== undefined)
    .map((r) => r.rolloutTimeoutMs as number);
  if (fromRoutes.length > 0) return Math.max(...fromRoutes);
  const fromCluster = table.clusters.get(cluster)?.rolloutTimeout;
  return (
    (fromCluster === undefined ? undefined : parseDuration(fromCluster)) ??
    table.rolloutTimeoutMs ??
    DEFAULT_ROLLOUT_TIMEOUT_MS
  );
}

/**
 * The slots one target's restart needs: each of its routes' `rollout.maxUnavailable` (else the top-level one),
 * the smallest bound of each scope when several routes name it (each says how many may roll at once), or
 * undefined when none bounds it (today's behaviour: restart at once).
 */
export function maxUnavailableFor(
  table: Pick<RoutingTable, 'routes' | 'maxUnavailable'>,
  routeNames: readonly string[],
): MaxUnavailable | undefined {
  const bounds = table.routes
    .filter((r) => routeNames.includes(r.name))
    .map((r) => r.maxUnavailable ?? table.maxUnavailable);
  const smallest = (values: Array<number | undefined>) => {
    const set = values.filter((v): v is number => v !== undefined);
    return set.length > 0 ? Math.min(...set) : undefined;
  };
  const perCluster = smallest(bounds.map((b) => b?.perCluster));
  const fleet = smallest(bounds.map((b) => b?.fleet));
  if (perCluster === undefined && fleet === undefined) return undefined;
  return { ...(perCluster === undefined ? {} : { perCluster }), ...(fleet === undefined ? {} : { fleet }) };
}

export const isResourceTarget = (t: Target): t is ResourceTarget => 'resource' in t;
export const isSyncTarget = (t: Target): t is SyncTarget => 'sync' in t;
export const isConsumersTarget = (t: Target): t is ConsumersTarget => 'consumers' in t;
export const isWorkloadTarget = (t: Target): t is WorkloadTarget =>
  !isResourceTarget(t) && !isSyncTarget(t) && !isConsumersTarget(t);

/** The Secret or SecretProviderClass a consumers target names: which field, and its (template) value. */
export const consumersOf = (t: ConsumersTarget): { field: 'secret' | 'secretProviderClass'; name: string } =>
  'secret' in t.consumers
    ? { field: 'secret', name: t.consumers.secret }
    : { field: 'secretProviderClass', name: t.consumers.secretProviderClass };

/**
 * The one object name a target names, where it is written and its template: a workload's `name`, a resource's
 * `resource.name`, the synced resource's `sync.name`, the consumers' Secret or SecretProviderClass. Undefined for
 * targets that find their objects by `selector` or `annotated`.
 */
export function targetName(t: Target): { field: string[]; template: string } | undefined {
  if (isResourceTarget(t)) return { field: ['resource', 'name'], template: t.resource.name };
  if (isSyncTarget(t)) return { field: ['sync', 'name'], template: t.sync.name };
  if (isConsumersTarget(t)) {
    const { field, name } = consumersOf(t);
    return { field: ['consumers', field], template: name };
  }
  return t.name === undefined ? undefined : { field: ['name'], template: t.name };
}
