/**
 * Reconcile's cluster side: for each target the plan puts in a cluster, read its objects and decide whether each
 * runs the current version (recorded, or its pods already on it), needs restarting, or only needs its record.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import { kubeApiFor } from '../kube/kube-api.ts';
import type { KubeApi } from '../workloads/kube-port.ts';
import { consumersAmong, type ConsumedObject } from '../workloads/consumers.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import {
  ANNOTATIONS,
  decideRestart,
  metadataRecord,
  parseWatchAnnotation,
  readRecord,
  recordedSkips,
  recordKey,
  recordOnlyPatch,
  recordValue,
  type MetadataRecord,
} from '../plan/restart-record.ts';
import { DEFAULT_RETRY, realRetryEnv, withRetries } from '../engine/retry.ts';
import { isSyncKind } from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import type { ConsumersRolloutTarget, RolloutTarget, SecretRef } from '../plan/planner.ts';
import { PatternIndex } from '../routing/path-pattern.ts';
import { WorkloadKinds } from '../routing/target-schema.ts';

import type { ReconcileDeps, ReconcileLimits, WorkloadReport, WorkloadState } from './reconcile-model.ts';
import { parseTime } from './reconcile-vault.ts';

/**
 * A target reconcile decides object by object: a workload, a custom resource, or an operator's resource (a consumers
 * target of a sync kind).
 */
type DecidedTarget = RolloutTarget;

/**
 * What a consumers target stands for, as targets reconcile decides like any other: with a sync kind, the operator's
 * resource (it records the versions it was nudged for; never recorded means the operator syncs on its own, so it is
 * current, as for any custom resource); else each workload whose pod template references the Secret or
 * SecretProviderClass (its pods tell whether it runs the version). The worker, planning the queued change, nudges
 * and restarts the consumers in the right order.
 */
async function consumerTargets(
  t: ConsumersRolloutTarget,
  list: (d: WorkloadDescriptor, namespace: string) => Promise<KubeObject[]>,
): Promise<DecidedTarget[]> {
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
      return consumersAmong(kind, objects, consumed).map((c): DecidedTarget => ({
        ...t,
        type: 'workload',
        kind,
        name: c.name,
      }));
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
    const ok =
      e.operator === 'In'
        ? has && (e.values ?? []).includes(value as string)
        : e.operator === 'NotIn'
          ? !has || !(e.values ?? []).includes(value as string)
          : e.operator === 'Exists'
            ? has
            : e.operator === 'DoesNotExist'
              ? !has
              : false;
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
function podsRunVersion(
  target: DecidedTarget,
  object: KubeObject,
  pods: readonly PodView[] | undefined,
  since: number,
  neverRecorded: boolean,
): boolean {
  if (target.type !== 'workload') return neverRecorded;
  if (target.kind === 'CronJob')
    return ((object as { status?: { active?: unknown[] } }).status?.active ?? []).length === 0;
  const selector = (object as { spec?: { selector?: LabelSelector } }).spec?.selector;
  return (pods ?? [])
    .filter((p) => selects(selector, p.labels))
    .every((p) => p.startedAt === undefined || p.startedAt >= since);
}

export interface Verdict {
  report: WorkloadReport;
  /** Paths (qualified) this workload is behind on: queue their changes in its cluster. */
  behind: string[];
}

/** One cluster as reconcile reads it: its API, through the limiter and retries, each LIST made at most once. */
interface ClusterReader {
  readonly deps: ReconcileDeps;
  readonly api: KubeApi;
  readonly cluster: string;
  readonly call: <T>(fn: () => Promise<T>) => Promise<T>;
  readonly listOnce: (key: string, fn: () => Promise<KubeObject[]>) => Promise<KubeObject[]>;
  readonly podsOf: (namespace: string) => Promise<PodView[]>;
}

/** A verdict of a target that could not be decided: failed, nothing queued. */
function failed(cluster: string, t: RolloutTarget, name: string, detail: string): Verdict {
  return {
    report: { cluster, namespace: t.namespace, kind: t.kind, name, state: 'failed', paths: t.paths, detail },
    behind: [],
  };
}

/** Step 3: one cluster's workloads, decided. */
export async function reconcileCluster(
  deps: ReconcileDeps,
  limits: ReconcileLimits,
  cluster: string,
  targets: readonly RolloutTarget[],
): Promise<Verdict[]> {
  const config = deps.table.clusters.get(cluster);
  let api: KubeApi;
  try {
    if (!config) throw new Error(`cluster ${cluster} is not in the routing table`);
    api = (deps.apiFor ?? ((a) => kubeApiFor(a)))(await deps.access(cluster, config));
  } catch (e) {
    const detail = `cluster access: ${e instanceof Error ? e.message : String(e)}`;
    return targets.map((t) => failed(cluster, t, t.name ?? '', detail));
  }
  const limiter = new ConcurrencyLimiter(config.concurrency ?? limits.kubeConcurrency);
  const reader = clusterReader(deps, api, cluster, limiter);
  const verdicts = await Promise.all(targets.map((planned) => decidePlanned(reader, planned)));
  return verdicts.flat();
}

function clusterReader(deps: ReconcileDeps, api: KubeApi, cluster: string, limiter: ConcurrencyLimiter): ClusterReader {
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
        .filter(
          (p) =>
            !(p.metadata as { deletionTimestamp?: string } | undefined)?.deletionTimestamp &&
            !['Succeeded', 'Failed'].includes((p as { status?: { phase?: string } }).status?.phase ?? ''),
        )
        .map((p) => {
          const start = (p as { status?: { startTime?: string } }).status?.startTime;
          return { labels: p.metadata?.labels ?? {}, startedAt: start === undefined ? undefined : Date.parse(start) };
        }),
    );
  return { deps, api, cluster, call, listOnce, podsOf };
}

/** A planned target, decided: a consumers target through what it stands for. */
async function decidePlanned(reader: ClusterReader, planned: RolloutTarget): Promise<Verdict[]> {
  if (planned.type !== 'consumers') return decideTarget(reader, planned);
  const { api, listOnce } = reader;
  let decided: DecidedTarget[];
  try {
    decided = await consumerTargets(planned, (d, namespace) =>
      listOnce(`${d.apiVersion}/${d.kind}\u0000${namespace}`, () => api.list(d, namespace)),
    );
  } catch (e) {
    return [
      failed(
        reader.cluster,
        planned,
        planned.name,
        `cannot find the consumers of ${planned.kind} ${planned.name} in ${planned.namespace}: ${e instanceof Error ? e.message : String(e)}`,
      ),
    ];
  }
  return (await Promise.all(decided.map((t) => decideTarget(reader, t)))).flat();
}

async function decideTarget(reader: ClusterReader, t: DecidedTarget): Promise<Verdict[]> {
  const { api, listOnce } = reader;
  const descriptor = descriptorOf(t);
  let objects: KubeObject[];
  try {
    const all = await (t.type === 'workload' && t.selector !== undefined
      ? listOnce(`${descriptor.apiVersion}/${descriptor.kind}\u0000${t.namespace}\u0000${t.selector}`, () =>
          api.list(descriptor, t.namespace, t.selector),
        )
      : listOnce(`${descriptor.apiVersion}/${descriptor.kind}\u0000${t.namespace}`, () =>
          api.list(descriptor, t.namespace),
        ));
    const name = t.name;
    objects =
      name !== undefined
        ? all.filter((o) => o.metadata?.name === name)
        : t.type === 'workload' && t.annotated
          ? all.filter((o) => watchesAny(o, t.paths))
          : all;
  } catch (e) {
    const detail = `cannot list ${descriptor.kind} in ${t.namespace}: ${e instanceof Error ? e.message : String(e)}`;
    return [failed(reader.cluster, t, t.name ?? '', detail)];
  }
  // A target naming nothing that exists: nothing runs an old version there; the worker reports it when a change comes.
  return Promise.all(objects.map((object) => decideWorkload({ reader, t, descriptor, object })));
}

function watchesAny(object: KubeObject, paths: readonly string[]): boolean {
  const { patterns } = parseWatchAnnotation(object.metadata?.annotations?.[ANNOTATIONS.watch]);
  const index = new PatternIndex();
  patterns.forEach((p, i) => index.add(i, p));
  return paths.some((p) => index.match(p).size > 0);
}

/** One object of a target being decided. */
interface ObjectAt {
  readonly reader: ClusterReader;
  readonly t: DecidedTarget;
  readonly descriptor: WorkloadDescriptor;
  readonly object: KubeObject;
}

function reportOf(o: ObjectAt, state: WorkloadState, paths: string[], detail?: string): WorkloadReport {
  return {
    cluster: o.reader.cluster,
    namespace: o.t.namespace,
    kind: o.t.kind,
    name: o.object.metadata?.name ?? '',
    state,
    paths,
    ...(detail ? { detail } : {}),
  };
}

async function decideWorkload(o: ObjectAt): Promise<Verdict> {
  const { t, descriptor, object } = o;
  const recorded = readRecord(descriptor, object);
  const skips = recordedSkips(object);
  const stale: SecretRef[] = t.secrets.filter((s) => decideRestart(recorded, { secrets: [s] }).action === 'restart');
  // A key-level skip of exactly the version Vault says is current: reconcile confirms it with Vault and records the
  // version (status then counts it safe). A skip of any other version proves nothing and stays unverified.
  const confirmed = stale.filter(
    (s) => s.operation === 'write' && s.version !== null && skips[recordKey(s)]?.v === s.version,
  );
  const behind = stale.filter((s) => !confirmed.includes(s));
  if (stale.length === 0) return { report: reportOf(o, 'current', []), behind: [] };
  if (behind.length === 0) return recordWithoutRestart(o, confirmed, 'a key-level skip confirmed with Vault');

  const since = Math.max(...behind.map((s) => parseTime(s.time)).filter((n) => !Number.isNaN(n)));
  const neverRecorded = behind.every((s) => recorded[recordKey(s)] === undefined);
  let pods: PodView[] | undefined;
  if (t.type === 'workload' && t.kind !== 'CronJob') {
    try {
      pods = await o.reader.podsOf(t.namespace);
    } catch (e) {
      const detail = `cannot list pods in ${t.namespace}: ${e instanceof Error ? e.message : String(e)}`;
      return {
        report: reportOf(
          o,
          'failed',
          behind.map((s) => s.path),
          detail,
        ),
        behind: [],
      };
    }
  }
  const paths = behind.map((s) => s.path);
  if (!Number.isFinite(since) || !podsRunVersion(t, object, pods, since, neverRecorded))
    return { report: reportOf(o, 'behind', paths), behind: paths };

  // Its pods already run these versions: record them where the worker will see them, and restart nothing.
  return recordWithoutRestart(o, [...behind, ...confirmed]);
}

/**
 * Records versions on the object's metadata without a restart (recordOnlyPatch), keeping what else is recorded
 * there (other versions, key-level skips of other paths).
 */
async function recordWithoutRestart(o: ObjectAt, secrets: readonly SecretRef[], why?: string): Promise<Verdict> {
  const { reader, t, descriptor, object } = o;
  const paths = secrets.map((s) => s.path);
  if (reader.deps.dryRun)
    return {
      report: reportOf(o, 'recorded', paths, `dry run: would record without a restart${why ? ` (${why})` : ''}`),
      behind: [],
    };
  const versions: MetadataRecord = { ...metadataRecord(object) };
  for (const s of secrets) versions[recordKey(s)] = recordValue(s);
  const body = { ...recordOnlyPatch(versions) } as { metadata: Record<string, unknown> };
  body.metadata.resourceVersion = object.metadata?.resourceVersion;
  try {
    // A merge patch on the metadata alone, conditional on the version read: a concurrent restart is not overwritten.
    await reader.call(() =>
      reader.api.patch(descriptor, t.namespace, object.metadata?.name ?? '', body, PatchStrategy.MergePatch, false),
    );
  } catch (e) {
    // Not recorded: queueing its change would restart a workload that runs the version already, so nothing is queued.
    return {
      report: reportOf(
        o,
        'failed',
        paths,
        `cannot record without a restart: ${e instanceof Error ? e.message : String(e)} (the next reconcile tries again)`,
      ),
      behind: [],
    };
  }
  return { report: reportOf(o, 'recorded', paths, why), behind: [] };
}
