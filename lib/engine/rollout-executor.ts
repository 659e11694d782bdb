/**
 * Plan -> restarts. Clusters are worked concurrently and isolated (a result per target, never an exception that
 * aborts the rest); within a cluster, requests share a concurrency limit and retry with backoff. Per workload:
 * read, decide from what it records (restart, unchanged, skip), patch conditionally on what was read — a JSON Patch
 * `test` of the record for pod-template kinds, else the resourceVersion (a failed test or a 409 means someone else
 * wrote it: read again and decide again) — then record an Event.
 */
import { targetsByCluster, type RolloutTarget } from '../plan/planner.ts';
import { ANNOTATIONS, parseWatchAnnotation } from '../plan/restart-record.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { PatternIndex } from '../routing/path-pattern.ts';
import { maxUnavailableFor, type RoutingTable } from '../routing/routing-table.ts';
import { Admission } from '../slots/admission.ts';
import type { ClusterAccess } from '../workloads/kube-port.ts';
import type { KubeFailure } from '../workloads/kube-errors.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { failedResult, identity, limiterFor, realClock, targetName } from './cluster-run.ts';
import { followDone } from './follow-deferred.ts';
import { restartWorkload } from './restart.ts';
import { DEFAULT_RETRY, realRetryEnv, withRetries } from './retry.ts';
import { executeConsumersTarget, type ConsumersStepContext } from './sync-step.ts';
import type { ClusterRun, ExecutorOptions, RolloutResult, WorkloadDone } from './types.ts';

export { recordHalt } from './events.ts';
export { NOT_RESTARTED_YET, Outcomes } from './types.ts';
export type { ExecutorOptions, FollowSettings, Logger, Outcome, RolloutResult, WorkloadDone } from './types.ts';

export async function executeRollouts(
  table: RoutingTable,
  targets: readonly RolloutTarget[],
  options: ExecutorOptions,
): Promise<RolloutResult[]> {
  const byCluster = targetsByCluster(targets);
  const bounded =
    !options.dryRun && !options.observeOnly && targets.some((t) => maxUnavailableFor(table, t.routes) !== undefined);
  if (bounded && !options.slots)
    throw new Error('rollout.maxUnavailable bounds these targets and no slot store was given (ExecutorOptions.slots)');
  const slots = bounded ? (typeof options.slots === 'function' ? await options.slots() : options.slots) : undefined;
  const admission = slots
    ? new Admission(slots, (what, e) =>
        options.logger?.warn(what, { error: e instanceof Error ? `${e.name}: ${e.message}`.slice(0, 300) : String(e) }),
      )
    : undefined;
  // Durations count from here: how long after the call each target had its outcome.
  const started = (options.clock ?? realClock).monotonic();
  // One follow budget for the whole call: sync waits spend from it, the rollouts that follow get what is left.
  const followUntil = options.follow
    ? (options.clock ?? realClock).now() + Math.max(0, options.follow.budgetMs)
    : undefined;
  const settled = await Promise.allSettled(
    [...byCluster].map(([cluster, ts]) => executeCluster(table, cluster, ts, options, started, followUntil, admission)),
  );
  // Events wait until every cluster's patches are in: restarts first, their record second (and on a machine that
  // serves several clusters, one cluster's events never slow another's restarts).
  await Promise.all(settled.flatMap((s) => (s.status === 'fulfilled' ? s.value.map((d) => d.event?.()) : [])));
  const done = settled.flatMap((s, i): WorkloadDone[] => {
    if (s.status === 'fulfilled') return s.value;
    // executeCluster returns results for every failure it knows; this is the net under it.
    const [cluster, ts] = [...byCluster][i] ?? ['', []];
    return ts.map((t) => ({
      result: failedResult(
        t,
        cluster,
        targetName(t),
        { reason: 'error', retryable: false, detail: s.reason instanceof Error ? s.reason.message : String(s.reason) },
        0,
        0,
      ),
    }));
  });
  if (options.follow)
    await followDone(
      table,
      done,
      options,
      { ...options.follow, budgetMs: Math.max(0, (followUntil ?? 0) - (options.clock ?? realClock).now()) },
      admission,
    );
  return done.map((d) => d.result);
}

/** One cluster's targets: its access, then the name and selector targets and the consumers targets side by side. */
async function executeCluster(
  table: RoutingTable,
  cluster: string,
  targets: RolloutTarget[],
  options: ExecutorOptions,
  started: number,
  followUntil: number | undefined,
  admission: Admission | undefined,
): Promise<WorkloadDone[]> {
  const run = await clusterRun(table, cluster, targets, options, started, admission);
  if (Array.isArray(run)) return run;
  const consumers = targets
    .filter((t) => t.type === 'consumers')
    .map((t) => executeConsumersTarget(consumersStep(run, followUntil), t));
  const groups = await Promise.all(
    readGroups(targets.filter((t) => t.type !== 'consumers')).map((group) => expandGroup(run, group)),
  );
  const restarted = await Promise.all(
    groups
      .flat()
      .map((w) => (w.kind === 'result' ? { result: w.result } : restartWorkload(run, w.target, w.object, w.started))),
  );
  return [...restarted, ...(await Promise.all(consumers)).flat()];
}

/**
 * The cluster's share of the call (its API, limiter and retry budget); without access to the cluster, every target
 * fails with the reason instead.
 */
async function clusterRun(
  table: RoutingTable,
  cluster: string,
  targets: readonly RolloutTarget[],
  options: ExecutorOptions,
  started: number,
  admission: Admission | undefined,
): Promise<ClusterRun | WorkloadDone[]> {
  const clock = options.clock ?? realClock;
  const config = table.clusters.get(cluster);
  let access: ClusterAccess;
  try {
    if (!config) throw new Error(`cluster ${cluster} is not in the routing table`);
    access = await options.access(cluster, config);
  } catch (e) {
    const failure: KubeFailure = {
      reason: 'credentials',
      retryable: false,
      detail: e instanceof Error ? e.message : String(e),
    };
    return targets.map((t) => ({
      result: failedResult(t, cluster, targetName(t), failure, 0, clock.monotonic() - started),
    }));
  }
  const api = options.apiFor(access);
  return {
    table,
    admission,
    cluster,
    api,
    limiter: limiterFor(cluster, config.concurrency ?? options.defaultConcurrency ?? 10),
    options,
    retry: options.retry ?? DEFAULT_RETRY,
    env: options.retryEnv ?? realRetryEnv,
    clock,
    started,
  };
}

/** What a consumers target's steps use of the cluster's run: reads and lists under its limiter, and the restart. */
function consumersStep(run: ClusterRun, followUntil: number | undefined): ConsumersStepContext {
  const { options } = run;
  return {
    cluster: run.cluster,
    api: run.api,
    dryRun: options.dryRun === true,
    clock: run.clock,
    started: run.started,
    read: (descriptor, namespace, name) =>
      withRetries(() => run.limiter.run(() => run.api.read(descriptor, namespace, name)), run.retry, run.env),
    list: (kind, namespace) =>
      withRetries(() => run.limiter.run(() => run.api.list(kind, namespace)), run.retry, run.env),
    restart: (target, descriptor, object) => restartWorkload(run, target, object, run.started, descriptor),
    ...(followUntil === undefined ? {} : { followUntil }),
    ...(options.follow?.since === undefined ? {} : { since: options.follow.since }),
  };
}

/** Name targets of one namespace and kind are read with one LIST when there are several of them. */
interface ReadGroup {
  namespace: string;
  descriptor: WorkloadDescriptor;
  targets: RolloutTarget[];
  mode: 'get' | 'list-names' | 'selector' | 'annotated';
}

function readGroups(targets: readonly RolloutTarget[]): ReadGroup[] {
  const byName = new Map<string, ReadGroup>();
  const groups: ReadGroup[] = [];
  for (const t of targets) {
    const descriptor = descriptorOf(t);
    if (t.type === 'workload' && t.selector !== undefined)
      groups.push({ namespace: t.namespace, descriptor, targets: [t], mode: 'selector' });
    else if (t.type === 'workload' && t.annotated)
      groups.push({ namespace: t.namespace, descriptor, targets: [t], mode: 'annotated' });
    else {
      const key = `${t.namespace}\u0000${descriptor.apiVersion}\u0000${descriptor.kind}`;
      const group = byName.get(key);
      if (group) group.targets.push(t);
      else byName.set(key, { namespace: t.namespace, descriptor, targets: [t], mode: 'get' });
    }
  }
  for (const g of byName.values()) groups.push(g.targets.length > 1 ? { ...g, mode: 'list-names' } : g);
  return groups;
}

type Expanded =
  | { kind: 'result'; result: RolloutResult }
  | { kind: 'workload'; target: RolloutTarget; object: KubeObject; started: number };

/** Reads the objects a group of targets names; a target that names nothing becomes a result right away. */
async function expandGroup(run: ClusterRun, group: ReadGroup): Promise<Expanded[]> {
  const { started } = run;
  const read = await readGroup(run, group);
  if (!read.ok)
    return group.targets.map((t) => ({
      kind: 'result',
      result: failedResult(t, run.cluster, targetName(t), read.failure, read.attempts, run.clock.monotonic() - started),
    }));
  if (group.mode === 'get' || group.mode === 'list-names') return byName(run, group, read.value, read.attempts);
  const first = group.targets[0] as RolloutTarget;
  const ignored: string[] = [];
  const objects =
    group.mode === 'annotated' ? read.value.filter((o) => watches(run, group, o, first.paths, ignored)) : read.value;
  if (objects.length > 0) return objects.map((object) => ({ kind: 'workload', target: first, object, started }));
  const kind = group.descriptor.kind;
  const why =
    group.mode === 'annotated'
      ? `no ${kind} in ${group.namespace} watches ${first.paths.join(', ')} (annotation ${ANNOTATIONS.watch})${ignored.length > 0 ? `; ignored: ${ignored.join('; ')}` : ''}`
      : `no ${kind} in ${group.namespace} matches ${targetName(first)}`;
  return [
    {
      kind: 'result',
      result: {
        ...identity(first, run.cluster, targetName(first)),
        outcome: 'skipped',
        reason: 'no workload matched',
        detail: why,
        attempts: read.attempts,
        durationMs: run.clock.monotonic() - started,
      },
    },
  ];
}

/** One request for the group: a GET by name, a LIST by selector, or a LIST of the namespace's objects of the kind. */
function readGroup(run: ClusterRun, group: ReadGroup) {
  const { api, limiter } = run;
  const kind = group.descriptor;
  const first = group.targets[0] as RolloutTarget;
  return withRetries(
    () =>
      limiter.run(async (): Promise<KubeObject[]> => {
        if (group.mode === 'get') return [await api.read(kind, group.namespace, targetName(first))];
        if (group.mode === 'selector')
          return api.list(kind, group.namespace, first.type === 'workload' ? first.selector : undefined);
        return api.list(kind, group.namespace);
      }),
    run.retry,
    run.env,
  );
}

/** Named targets matched to the objects read; a name not among them fails as not found. */
function byName(run: ClusterRun, group: ReadGroup, objects: readonly KubeObject[], attempts: number): Expanded[] {
  const named = new Map(objects.map((o) => [o.metadata?.name ?? '', o]));
  return group.targets.map((t): Expanded => {
    const object = named.get(targetName(t));
    if (object) return { kind: 'workload', target: t, object, started: run.started };
    const failure: KubeFailure = {
      reason: 'not found',
      retryable: false,
      detail: `${group.descriptor.kind} ${group.namespace}/${targetName(t)} does not exist`,
    };
    return {
      kind: 'result',
      result: failedResult(t, run.cluster, targetName(t), failure, attempts, run.clock.monotonic() - run.started),
    };
  });
}

/**
 * Does the workload's `vault-rollout.io/watch` annotation list a pattern matching one of these paths? A pattern
 * that does not parse or is over its bounds watches nothing, and is logged naming the workload (and collected in
 * `ignored` for the result), never ignored silently.
 */
function watches(
  run: ClusterRun,
  group: ReadGroup,
  object: KubeObject,
  paths: readonly string[],
  ignored: string[],
): boolean {
  const name = object.metadata?.name ?? '';
  const { patterns, problems } = parseWatchAnnotation(object.metadata?.annotations?.[ANNOTATIONS.watch]);
  if (problems.length > 0) {
    ignored.push(`${group.descriptor.kind} ${group.namespace}/${name}: ${problems.join(', ')}`);
    run.options.logger?.warn(`ignoring ${ANNOTATIONS.watch} patterns of a workload`, {
      cluster: run.cluster,
      namespace: group.namespace,
      kind: group.descriptor.kind,
      name,
      problems,
    });
  }
  const index = new PatternIndex();
  patterns.forEach((p, i) => index.add(i, p));
  return paths.some((p) => index.match(p).size > 0);
}
