/**
 * Reconcile: the safety net behind the change feeds, level-triggered like a Kubernetes controller. Vault's own
 * metadata says which version of every routed path is current; the clusters say what each workload records and
 * when its pods started; what is behind goes through the same plan and queue as a change from the feed, so the
 * worker, its waves and gates restart it. Nothing here restarts anything itself.
 *
 *   routes --(LIST metadata, bounded)--> paths --(GET metadata)--> one SecretChange per path (its current version)
 *     --> planRollouts (the route's `operations` decide whether a deleted or destroyed version counts)
 *     --> per cluster: LIST each kind per namespace, the record of each workload, LIST pods where needed
 *     --> behind: queue the change for that cluster | already running it: record it without a restart
 *
 * "Already running it": every live pod of the workload started after the version was created (or the workload runs
 * no pod now). Such a workload is never restarted: its record gets the version on the object's metadata
 * (recordOnlyPatch), which the worker counts too, so the queued change finds it `unchanged`. The first reconcile
 * of a fleet whose pods started after the current versions therefore restarts nothing.
 *
 * KV v1 keeps no versions and no metadata: reconcile cannot see its changes and says so for each such route.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import { kubeApiFor } from '../kube/kube-api.ts';
import type { KubeApi } from '../workloads/kube-port.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import { consumersAmong, type ConsumedObject } from '../workloads/consumers.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import { ANNOTATIONS, decideRestart, parseWatchAnnotation, readRecord, recordedWithoutRestart, recordKey, recordOnlyPatch, recordValue, type RecordedVersions } from '../plan/restart-record.ts';
import { DEFAULT_RETRY, realRetryEnv, withRetries, type RetryEnv, type RetryPolicy } from '../engine/retry.ts';
import { isSyncKind } from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { planRollouts, type ConsumersRolloutTarget, type Plan, type RolloutTarget, type SecretRef } from '../plan/planner.ts';
import { changeIdentity, queuedChange, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import { firstWaveMessages } from './intake.ts';
import { PatternIndex } from '../routing/path-pattern.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { WorkloadKinds, type ClusterConfig } from '../routing/schema.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { Operation, SecretChange } from '../sources/secret-change.ts';
import { DEFAULT_EXPANSION_LIMITS, expandPattern, type ExpansionLimits } from '../vault/expand-pattern.ts';
import type { KvMetadata, MetadataListing, VaultMetadataClient } from '../vault/metadata-client.ts';

export interface ReconcileLimits extends ExpansionLimits {
  /** Paths one reconcile reads metadata of, over every route. */
  maxPaths: number;
  /** Vault requests in flight at once. */
  vaultConcurrency: number;
  /** Kubernetes requests in flight per cluster. */
  kubeConcurrency: number;
}

export const DEFAULT_RECONCILE_LIMITS: ReconcileLimits = { ...DEFAULT_EXPANSION_LIMITS, maxPaths: 20_000, vaultConcurrency: 16, kubeConcurrency: 10 };

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

export interface WorkloadReport {
  cluster: string;
  namespace: string;
  kind: string;
  name: string;
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
  /** Halted rotations whose changes were behind somewhere and were not queued (`vault-rollout halts clear` resumes them). */
  halted: RotationHalt[];
  dryRun: boolean;
}

/** Vault stamps nanoseconds; Date.parse takes milliseconds at most. */
const parseTime = (time: string): number => Date.parse(time.replace(/(\.\d{3})\d+/, '$1'));

/**
 * The change that stands for a path's current state: a write of the current version, or its delete or destroy when
 * that version is deleted (deletion time passed) or destroyed. Undefined when the key holds no version.
 */
export function currentChange(meta: KvMetadata, kvVersionFrom: SecretChange['kvVersionFrom'], now: number): SecretChange | undefined {
  const version = meta.versions[meta.currentVersion];
  if (meta.currentVersion === 0 || version === undefined) return undefined;
  let operation: Operation = 'write';
  let time = version.createdTime;
  if (version.destroyed) {
    operation = 'destroy';
    time = meta.updatedTime || version.createdTime;
  } else if (version.deletionTime !== null && parseTime(version.deletionTime) <= now) {
    operation = 'delete';
    time = version.deletionTime;
  }
  const path = `${meta.mount}/${meta.key}`;
  return {
    namespace: meta.namespace,
    mount: meta.mount,
    key: meta.key,
    path,
    operation,
    version: meta.currentVersion,
    kvVersion: 2,
    kvVersionFrom,
    source: 'reconcile',
    via: 'direct',
    id: `reconcile:${qualify(meta.namespace, path)}@${meta.currentVersion}:${operation}`,
    time,
    record: `metadata of ${qualify(meta.namespace, path)}`,
  };
}

/** Runs `task` over `items`, at most `limit` at a time, results in input order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const limiter = new ConcurrencyLimiter(limit);
  return Promise.all(items.map((item) => limiter.run(() => task(item))));
}

/** Step 1 and 2: every routed path Vault holds, and its current state. */
async function readVault(deps: ReconcileDeps, limits: ReconcileLimits): Promise<Pick<ReconcileReport, 'routes' | 'paths' | 'pathErrors'> & { changes: SecretChange[] }> {
  const { table, vault } = deps;
  // One LIST per folder, however many routes share it.
  const listings = new Map<string, Promise<MetadataListing>>();
  const list = (namespace: string, mount: string, folder: string): Promise<MetadataListing> => {
    const key = `${namespace}\u0000${mount}\u0000${folder}`;
    let listing = listings.get(key);
    if (!listing) listings.set(key, (listing = vault.listMetadata(mount, folder, { namespace, limit: limits.maxKeys })));
    return listing;
  };
  const routes: RouteExpansionReport[] = [];
  const wanted = new Map<string, { namespace: string; mount: string; key: string }>();
  for (const route of table.routes) {
    const base = { route: route.name, namespace: route.namespace, pattern: route.pattern.source, paths: 0, lists: 0 };
    let expansion;
    try {
      expansion = await expandPattern(route.pattern, route.namespace, table.mounts, list, limits);
    } catch (e) {
      routes.push({ ...base, status: 'error', reason: e instanceof Error ? e.message : String(e) });
      continue;
    }
    if (expansion.kind === 'kv1') {
      routes.push({ ...base, status: 'kv1', mount: expansion.mount, reason: `${expansion.mount} is KV v1: it keeps no versions, so reconcile cannot see its changes (only the change feed can)` });
      continue;
    }
    if (expansion.kind === 'unexpandable') {
      routes.push({ ...base, status: 'unexpandable', reason: expansion.reason });
      continue;
    }
    let truncated = expansion.truncated;
    let paths = 0;
    for (const key of expansion.keys) {
      const id = `${route.namespace}\u0000${expansion.mount}\u0000${key}`;
      if (!wanted.has(id) && wanted.size >= limits.maxPaths) {
        truncated ??= `more than ${limits.maxPaths} paths in one reconcile`;
        break;
      }
      wanted.set(id, { namespace: route.namespace, mount: expansion.mount, key });
      paths++;
    }
    routes.push({ ...base, status: 'kv2', mount: expansion.mount, paths, lists: expansion.lists, ...(truncated ? { truncated } : {}), ...(expansion.ignored ? { reason: expansion.ignored } : {}) });
  }

  const now = deps.now();
  const pathErrors: ReconcileReport['pathErrors'] = [];
  const read = await mapLimited([...wanted.values()], limits.vaultConcurrency, async (p) => {
    try {
      return await vault.readMetadata(p.mount, p.key, { namespace: p.namespace });
    } catch (e) {
      pathErrors.push({ path: qualify(p.namespace, `${p.mount}/${p.key}`), error: e instanceof Error ? e.message : String(e) });
      return undefined;
    }
  });
  const changes: SecretChange[] = [];
  for (const meta of read) {
    if (!meta) continue;
    const change = currentChange(meta, table.mounts.has(qualify(meta.namespace, meta.mount)) ? 'routes' : 'inferred', now);
    if (change) changes.push(change);
  }
  const paths = changes.map((c) => ({ path: qualify(c.namespace, c.path), version: c.version as number, operation: c.operation, time: c.time }));
  return { routes, paths, pathErrors, changes };
}

/** A target reconcile decides object by object: a workload, a custom resource, or an operator's resource (a consumers target of a sync kind). */
type DecidedTarget = RolloutTarget;

/**
 * What a consumers target stands for, as targets reconcile decides like any other: with a sync kind, the operator's
 * resource (it records the versions it was nudged for; never recorded means the operator syncs on its own, so it is
 * current, as for any custom resource); else each workload whose pod template references the Secret or
 * SecretProviderClass (its pods tell whether it runs the version). The worker, planning the queued change, nudges
 * and restarts the consumers in the right order.
 */
async function consumerTargets(t: ConsumersRolloutTarget, list: (d: WorkloadDescriptor, namespace: string) => Promise<KubeObject[]>): Promise<DecidedTarget[]> {
  if (isSyncKind(t.kind)) {
    return [t];
  }
  const consumed: ConsumedObject = t.kind === 'Secret' ? { secret: t.name } : { secretProviderClass: t.name };
  const perKind = await Promise.all(
    WorkloadKinds.map(async (kind) => {
      let objects: KubeObject[];
      try {
        objects = await list(WORKLOAD_KINDS[kind], t.namespace);
      } catch (e) {
        // A kind the cluster does not serve (no Argo Rollouts CRD) has no consumers.
        if (e instanceof Error && /not found/.test(e.message)) return [];
        throw e;
      }
      return consumersAmong(kind, objects, consumed).map((c): DecidedTarget => ({ ...t, type: 'workload', kind, name: c.name }));
    }),
  );
  return perKind.flat();
}

interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

/** Does a label set satisfy a workload's selector (matchLabels and the four matchExpressions operators)? */
export function selects(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const ok = e.operator === 'In' ? has && (e.values ?? []).includes(value as string) : e.operator === 'NotIn' ? !has || !(e.values ?? []).includes(value as string) : e.operator === 'Exists' ? has : e.operator === 'DoesNotExist' ? !has : false;
    if (!ok) return false;
  }
  return true;
}

interface PodView {
  labels: Record<string, string>;
  /** Epoch ms; undefined for a pod not started yet (it will read the current version). */
  startedAt: number | undefined;
}

/**
 * Do the workload's running pods all run a version created at `since`? True when every live pod started after it (or
 * none runs). A CronJob runs the current version from its next Job on: current unless a Job is active. A custom
 * resource has no pods of ours to look at: current when it records nothing for the path (an operator syncs on its
 * own; reconcile never patches what it never managed), behind when it records an older version.
 */
function podsRunVersion(target: DecidedTarget, object: KubeObject, pods: readonly PodView[] | undefined, since: number, neverRecorded: boolean): boolean {
  if (target.type !== 'workload') return neverRecorded;
  if (target.kind === 'CronJob') return (((object as { status?: { active?: unknown[] } }).status?.active) ?? []).length === 0;
  const selector = (object as { spec?: { selector?: LabelSelector } }).spec?.selector;
  return (pods ?? []).filter((p) => selects(selector, p.labels)).every((p) => p.startedAt === undefined || p.startedAt >= since);
}

interface Verdict {
  report: WorkloadReport;
  /** Paths (qualified) this workload is behind on: queue their changes in its cluster. */
  behind: string[];
}

/** Step 3: one cluster's workloads, decided. */
async function reconcileCluster(deps: ReconcileDeps, limits: ReconcileLimits, cluster: string, targets: readonly RolloutTarget[]): Promise<Verdict[]> {
  const config = deps.table.clusters.get(cluster);
  const fail = (t: RolloutTarget, name: string, detail: string): Verdict => ({ report: { cluster, namespace: t.namespace, kind: t.kind, name, state: 'failed', paths: t.paths, detail }, behind: [] });
  let api: KubeApi;
  try {
    if (!config) throw new Error(`cluster ${cluster} is not in the routing table`);
    api = (deps.apiFor ?? ((a) => kubeApiFor(a)))(await deps.access(cluster, config));
  } catch (e) {
    return targets.map((t) => fail(t, t.name ?? '', `cluster access: ${e instanceof Error ? e.message : String(e)}`));
  }
  const limiter = new ConcurrencyLimiter(config.concurrency ?? limits.kubeConcurrency);
  const retry = deps.retry ?? DEFAULT_RETRY;
  const env = deps.retryEnv ?? realRetryEnv;
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    const out = await withRetries(() => limiter.run(fn), retry, env);
    if (!out.ok) throw new Error(`${out.failure.reason}${out.failure.detail ? `: ${out.failure.detail}` : ''}`);
    return out.value;
  };
  // One LIST per kind and namespace (and per selector), one LIST of pods per namespace, each at most once.
  const lists = new Map<string, Promise<KubeObject[]>>();
  const listOnce = (key: string, fn: () => Promise<KubeObject[]>) => {
    let list = lists.get(key);
    if (!list) lists.set(key, (list = call(fn)));
    return list;
  };
  const podsOf = (namespace: string): Promise<PodView[]> =>
    listOnce(`pods\u0000${namespace}`, () => api.list({ apiVersion: 'v1', kind: 'Pod' }, namespace)).then((pods) =>
      pods
        .filter((p) => !(p.metadata as { deletionTimestamp?: string } | undefined)?.deletionTimestamp && !['Succeeded', 'Failed'].includes((p as { status?: { phase?: string } }).status?.phase ?? ''))
        .map((p) => {
          const start = (p as { status?: { startTime?: string } }).status?.startTime;
          return { labels: p.metadata?.labels ?? {}, startedAt: start === undefined ? undefined : Date.parse(start) };
        }),
    );

  const verdicts = await Promise.all(
    targets.map(async (planned): Promise<Verdict[]> => {
      if (planned.type === 'consumers') {
        let decided: DecidedTarget[];
        try {
          decided = await consumerTargets(planned, (d, namespace) => listOnce(`${d.apiVersion}/${d.kind}\u0000${namespace}`, () => api.list(d, namespace)));
        } catch (e) {
          return [fail(planned, planned.name, `cannot find the consumers of ${planned.kind} ${planned.name} in ${planned.namespace}: ${e instanceof Error ? e.message : String(e)}`)];
        }
        return (await Promise.all(decided.map((t) => decideTarget(t)))).flat();
      }
      return decideTarget(planned);
    }),
  );
  return verdicts.flat();

  async function decideTarget(t: DecidedTarget): Promise<Verdict[]> {
      const descriptor = descriptorOf(t);
      let objects: KubeObject[];
      try {
        const all = await (t.type === 'workload' && t.selector !== undefined ? listOnce(`${descriptor.apiVersion}/${descriptor.kind}\u0000${t.namespace}\u0000${t.selector}`, () => api.list(descriptor, t.namespace, t.selector)) : listOnce(`${descriptor.apiVersion}/${descriptor.kind}\u0000${t.namespace}`, () => api.list(descriptor, t.namespace)));
        const name = t.name;
        objects = name !== undefined ? all.filter((o) => o.metadata?.name === name) : t.type === 'workload' && t.annotated ? all.filter((o) => watchesAny(o, t.paths)) : all;
      } catch (e) {
        return [fail(t, t.name ?? '', `cannot list ${descriptor.kind} in ${t.namespace}: ${e instanceof Error ? e.message : String(e)}`)];
      }
      // A target naming nothing that exists: nothing runs an old version there; the worker reports it when a change comes.
      return Promise.all(objects.map((object) => decideWorkload(deps, api, cluster, t, descriptor, object, podsOf, call)));
  }
}

function watchesAny(object: KubeObject, paths: readonly string[]): boolean {
  const { patterns } = parseWatchAnnotation(object.metadata?.annotations?.[ANNOTATIONS.watch]);
  const index = new PatternIndex();
  patterns.forEach((p, i) => index.add(i, p));
  return paths.some((p) => index.match(p).size > 0);
}

async function decideWorkload(deps: ReconcileDeps, api: KubeApi, cluster: string, t: DecidedTarget, descriptor: WorkloadDescriptor, object: KubeObject, podsOf: (ns: string) => Promise<PodView[]>, call: <T>(fn: () => Promise<T>) => Promise<T>): Promise<Verdict> {
  const name = object.metadata?.name ?? '';
  const report = (state: WorkloadState, paths: string[], detail?: string): WorkloadReport => ({ cluster, namespace: t.namespace, kind: t.kind, name, state, paths, ...(detail ? { detail } : {}) });
  const metadataRecord = recordedWithoutRestart(object);
  const recorded = readRecord(descriptor, object);
  const behind: SecretRef[] = t.secrets.filter((s) => decideRestart(recorded, { secrets: [s] }).action === 'restart');
  if (behind.length === 0) return { report: report('current', []), behind: [] };

  const since = Math.max(...behind.map((s) => parseTime(s.time)).filter((n) => !Number.isNaN(n)));
  const neverRecorded = behind.every((s) => recorded[recordKey(s)] === undefined);
  let pods: PodView[] | undefined;
  if (t.type === 'workload' && t.kind !== 'CronJob') {
    try {
      pods = await podsOf(t.namespace);
    } catch (e) {
      return { report: report('failed', behind.map((s) => s.path), `cannot list pods in ${t.namespace}: ${e instanceof Error ? e.message : String(e)}`), behind: [] };
    }
  }
  const paths = behind.map((s) => s.path);
  if (!Number.isFinite(since) || !podsRunVersion(t, object, pods, since, neverRecorded)) return { report: report('behind', paths), behind: paths };

  // Its pods already run these versions: record them where the worker will see them, and restart nothing.
  if (deps.dryRun) return { report: report('recorded', paths, 'dry run: would record without a restart'), behind: [] };
  const versions: RecordedVersions = { ...metadataRecord };
  for (const s of behind) versions[recordKey(s)] = recordValue(s);
  const body = { ...recordOnlyPatch(versions) } as { metadata: Record<string, unknown> };
  body.metadata.resourceVersion = object.metadata?.resourceVersion;
  try {
    // A merge patch on the metadata alone, conditional on the version read: a concurrent restart is not overwritten.
    await call(() => api.patch(descriptor, t.namespace, name, body, PatchStrategy.MergePatch, false));
  } catch (e) {
    // Not recorded: queueing its change would restart a workload that runs the version already, so nothing is queued.
    return { report: report('failed', paths, `cannot record without a restart: ${e instanceof Error ? e.message : String(e)} (the next reconcile tries again)`), behind: [] };
  }
  return { report: report('recorded', paths), behind: [] };
}

export async function reconcile(deps: ReconcileDeps): Promise<ReconcileReport> {
  const limits = { ...DEFAULT_RECONCILE_LIMITS, ...deps.limits };
  const vault = await readVault(deps, limits);
  const plan = planRollouts(deps.table, vault.changes);
  const byCluster = new Map<string, RolloutTarget[]>();
  for (const t of plan.targets) byCluster.set(t.cluster, [...(byCluster.get(t.cluster) ?? []), t]);
  const verdicts = (await Promise.all([...byCluster].map(([cluster, targets]) => reconcileCluster(deps, limits, cluster, targets).then((v) => v.map((x) => ({ cluster, ...x })))))).flat();

  // The changes some workload is behind on, less those of a halted rotation, go through the same wave logic as the
  // intake (firstWaveMessages): per rotation, its first wave's clusters where something is behind, and the gate that
  // releases the next wave once the first is healthy. Later waves are never queued here. The worker plans them again
  // and restarts what is behind; what reconcile recorded it finds unchanged.
  const acceptedAt = new Date(deps.now()).toISOString();
  const behindIn = new Map<string, Set<string>>();
  for (const v of verdicts) for (const path of v.behind) behindIn.set(path, (behindIn.get(path) ?? new Set()).add(v.cluster));
  const behindChanges = vault.changes.filter((c) => behindIn.has(qualify(c.namespace, c.path)));
  const halts = deps.rotations && behindChanges.length > 0 ? await deps.rotations.haltsOf(behindChanges.map((c) => changeIdentity(queuedChange(c)))) : [];
  const haltedIds = new Set(halts.flatMap((h) => h.changes));
  const queued = behindChanges.filter((c) => !haltedIds.has(changeIdentity(queuedChange(c))));
  const messages = firstWaveMessages(deps.table, queued, planRollouts(deps.table, queued), acceptedAt, (cluster, changes) => changes.some((c) => behindIn.get(qualify(c.namespace, c.path))?.has(cluster) === true));
  const changes = queued.length;
  if (!deps.dryRun && messages.length > 0) await deps.queue.send(messages);
  return {
    routes: vault.routes,
    paths: vault.paths,
    pathErrors: vault.pathErrors,
    plan,
    workloads: verdicts.map((v) => v.report).sort((a, b) => `${a.cluster}/${a.namespace}/${a.kind}/${a.name}`.localeCompare(`${b.cluster}/${b.namespace}/${b.kind}/${b.name}`)),
    queued: { messages: deps.dryRun ? 0 : messages.length, changes: deps.dryRun ? 0 : changes },
    halted: halts,
    dryRun: deps.dryRun === true,
  };
}
