/**
 * Plan -> restarts. Clusters are worked concurrently and isolated (a result per target, never an exception that
 * aborts the rest); within a cluster, requests share a concurrency limit and retry with backoff. Per workload:
 * read, decide from what it records (restart, unchanged, skip), patch conditionally on what was read — a JSON Patch
 * `test` of the record for pod-template kinds, else the resourceVersion (a failed test or a 409 means someone else
 * wrote it: read again and decide again) — then record an Event.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import { targetsByCluster, type RolloutTarget } from '../plan/planner.ts';
import { PatternIndex } from '../routing/path-pattern.ts';
import { maxUnavailableFor, rolloutTimeoutMs, type RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import { Admission, type SlotClaim } from '../slots/admission.ts';
import { LEASE_MARGIN_MS, slotHolder, slotScopes, type SlotStore } from '../slots/slot-store.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import { kubeApiFor, type KubeApi } from '../kube/kube-api.ts';
import { classifyKubeError, type KubeFailure } from '../workloads/kube-errors.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import { ANNOTATIONS, decideRestart, EVENT_REPORTER, HALT_EVENT_REASON, haltEventName, parseWatchAnnotation, readRecord, restartAnnotations } from '../plan/restart-record.ts';
import type { PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import { startFollower, type FollowedRollout, type FollowTarget } from './rollout-follower.ts';
import { DEFAULT_RETRY, realRetryEnv, withRetries, type RetryEnv, type RetryPolicy } from './retry.ts';
import { executeConsumersTarget } from './sync-step.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { resourceDescriptor, WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';

/** `deferred`: bounded by `rollout.maxUnavailable` and no slot free; not patched, tried again (see README). */
export const Outcomes = ['restarted', 'unchanged', 'skipped', 'dry-run', 'failed', 'deferred'] as const;
export type Outcome = (typeof Outcomes)[number];

export interface RolloutResult {
  cluster: string;
  namespace: string;
  kind: string;
  name: string;
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
  /** How long the call may spend following (a Lambda worker: its remaining time minus a margin). */
  budgetMs: number;
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
  requestTimeoutMs?: number;
  /** For measurements and Event times; not for anything a patch contains. */
  clock?: { now(): number; monotonic(): number };
  logger?: Logger;
  /** For tests: the API to use for an access (default: client-node). */
  apiFor?: (access: ClusterAccess) => KubeApi;
  /** Follow restarted (and unchanged) workloads until their rollout is complete, failed, past its deadline or the budget ends. */
  follow?: FollowSettings;
  /**
   * Where the slots of `rollout.maxUnavailable` live, shared by every worker (DynamoDB in Lambda, a SQLite file for
   * `serve`). Default: one in-memory SQLite store per process, so the bounds hold within this process only.
   */
  slots?: SlotStore;
  /** How often a call that has deferred targets asks the store again while following (other workers free slots). */
  slotPollMs?: number;
  /**
   * Read and follow only, never patch (a wave's gate, issue #12): a workload that would be restarted comes back
   * `skipped` with reason NOT_RESTARTED_YET — its cluster's message has not been worked yet.
   */
  observeOnly?: boolean;
}

/** The skip reason of a workload an observe-only call found not restarted for these changes yet. */
export const NOT_RESTARTED_YET = 'not restarted yet';

let processSlots: SlotStore | undefined;

const realClock = { now: Date.now, monotonic: () => performance.now() };

function descriptorOf(t: RolloutTarget): WorkloadDescriptor {
  if (t.type === 'resource') return resourceDescriptor(t.apiVersion, t.kind, t.patch, t.wait);
  if (t.type === 'workload') return WORKLOAD_KINDS[t.kind];
  // Consumers targets pass the descriptor of each object they restart (sync-step.ts); this is only their first step's.
  if (isSyncKind(t.kind)) return SYNC_KINDS[t.kind];
  throw new Error(`a ${t.kind} target has no descriptor of its own`);
}

/** Limiters outlive one execution so concurrent invocations in one process share a cluster's budget. */
const limiters = new Map<string, ConcurrencyLimiter>();
function limiterFor(cluster: string, limit: number): ConcurrencyLimiter {
  const key = `${cluster}\u0000${limit}`;
  let limiter = limiters.get(key);
  if (!limiter) limiters.set(key, (limiter = new ConcurrencyLimiter(limit)));
  return limiter;
}

export async function executeRollouts(table: RoutingTable, targets: readonly RolloutTarget[], options: ExecutorOptions): Promise<RolloutResult[]> {
  const byCluster = targetsByCluster(targets);
  const bounded = !options.dryRun && !options.observeOnly && targets.some((t) => maxUnavailableFor(table, t.routes) !== undefined);
  // Loaded only when needed: a Lambda worker passes its DynamoDB store and never runs node:sqlite.
  const slots = bounded ? (options.slots ?? (processSlots ??= new (await import('../slots/sqlite-slot-store.ts')).SqliteSlotStore(':memory:'))) : undefined;
  const admission = slots ? new Admission(slots, (what, e) => options.logger?.warn(what, { error: e instanceof Error ? `${e.name}: ${e.message}`.slice(0, 300) : String(e) })) : undefined;
  // Durations count from here: how long after the call each target had its outcome.
  const started = (options.clock ?? realClock).monotonic();
  // One follow budget for the whole call: sync waits spend from it, the rollouts that follow get what is left.
  const followUntil = options.follow ? (options.clock ?? realClock).now() + Math.max(0, options.follow.budgetMs) : undefined;
  const settled = await Promise.allSettled([...byCluster].map(([cluster, ts]) => executeCluster(table, cluster, ts, options, started, followUntil, admission)));
  // Events wait until every cluster's patches are in: restarts first, their record second (and on a machine that
  // serves several clusters, one cluster's events never slow another's restarts).
  await Promise.all(settled.flatMap((s) => (s.status === 'fulfilled' ? s.value.map((d) => d.event?.()) : [])));
  const done = settled.flatMap((s, i): WorkloadDone[] => {
    if (s.status === 'fulfilled') return s.value;
    // executeCluster returns results for every failure it knows; this is the net under it.
    const [cluster, ts] = [...byCluster][i] ?? ['', []];
    return ts.map((t) => ({ result: failedResult(t, cluster, targetName(t), { reason: 'error', retryable: false, detail: s.reason instanceof Error ? s.reason.message : String(s.reason) }, 0, 0) }));
  });
  if (options.follow) await followDone(table, done, options, { ...options.follow, budgetMs: Math.max(0, (followUntil ?? 0) - (options.clock ?? realClock).now()) }, admission);
  return done.map((d) => d.result);
}

/**
 * Follows what was restarted (or found restarted already), then records one RolloutComplete/RolloutFailed Event
 * each. With `rollout.maxUnavailable`, a rollout that ends gives its slot back and the next deferred target starts,
 * all within the same budget; what is still deferred at its end comes back `deferred` for a later attempt.
 *
 * One follower for the whole call: a target started by a freed slot joins the watch of its (cluster, namespace,
 * kind) that is already open, so the cost of a slot cycle is the patch and the controller, not a LIST and a WATCH
 * per restart (a 1,000-Deployment namespace is ~1,000 objects per LIST).
 */
async function followDone(table: RoutingTable, done: WorkloadDone[], options: ExecutorOptions, follow: FollowSettings, admission: Admission | undefined): Promise<void> {
  const clock = options.clock ?? realClock;
  for (const d of done) follow.onProgress?.(d.result);
  // An unchanged target restarted by an earlier attempt: its deadline counts from its lease (taken just before its
  // patch) when it holds one, else from the message's first attempt.
  const claims = done.flatMap((d) => (d.slot && d.result.outcome === 'unchanged' ? d.slot.scopeKeys.slice(0, 1) : []));
  const leaseStarts = admission && claims.length > 0 ? await admission.leaseStarts([...new Set(claims)]) : new Map<string, number>();
  const released = new Set<WorkloadDone>();
  // Set by every release and every retry that ends: the loop below looks again before it waits (no wake is lost).
  let signalled = false;
  let wake: (() => void) | undefined;
  const signal = () => {
    signalled = true;
    wake?.();
  };
  const release = (d: WorkloadDone) => {
    if (!d.slot || !admission || released.has(d)) return;
    released.add(d);
    void admission.release(d.slot).then(signal);
  };
  const apply = (d: WorkloadDone, f: FollowedRollout) => {
    d.result = { ...d.result, rollout: f.rollout, ...(f.rolloutMs === undefined ? {} : { rolloutMs: f.rolloutMs }), ...(f.pods ? { pods: f.pods } : {}), rolloutReason: f.message };
  };
  const follower = startFollower({
    budgetMs: Math.max(0, follow.budgetMs),
    clock,
    onProgress: (id, f) => {
      const d = done[Number(id)];
      if (!d) return;
      apply(d, f);
      // Level-triggered: whichever attempt sees the rollout end gives the slot back.
      if (f.rollout !== 'progressing') release(d);
      follow.onProgress?.(d.result);
    },
  });
  const following: Array<Promise<void>> = [];
  const startFollowing = (i: number) => {
    const d = done[i];
    if (!d?.follow) return;
    const r = d.result;
    const f = d.follow;
    const leased = d.slot ? leaseStarts.get(d.slot.holder) : undefined;
    const startedAt = r.outcome === 'restarted' ? f.patchedAt : (leased ?? follow.since ?? clock.now());
    const target: FollowTarget = { id: String(i), cluster: r.cluster, api: f.run.api, descriptor: f.descriptor, namespace: r.namespace, name: r.name, restartToken: r.restartToken, startedAt, timeoutMs: follow.timeoutMs ?? rolloutTimeoutMs(table, r.cluster, r.routes), ...f.restarted };
    following.push(
      follower.follow(target).then(async (answer) => {
        apply(d, answer);
        if (answer.rollout === 'complete' || answer.rollout === 'failed') await recordRolloutEvent(f.run, f.target, f.descriptor, d.result);
      }),
    );
  };
  done.forEach((_, i) => startFollowing(i));
  if (admission) await startDeferred(done, admission, follow, options.slotPollMs ?? 2_000, startFollowing, {
    signal,
    takeSignal: () => {
      const was = signalled;
      signalled = false;
      return was;
    },
    waitFor: (ms) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => ((wake = undefined), resolve()), ms);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        };
      }),
  });
  // Nothing more joins: every watch ends with its last answer.
  follower.seal();
  await Promise.all(following);
  // Slots released while nothing waited any more: nothing to wake.
  wake = undefined;
}

/**
 * Deferred targets, in plan order: each freed slot starts the next one whose scopes have room, until none waits or
 * the budget ends. Admissions are decided one at a time (so a scope found full passes the rest over without a
 * call), but the patches that follow them run concurrently under the cluster's limiter: one slow PATCH does not
 * hold the next admission.
 */
async function startDeferred(
  done: WorkloadDone[],
  admission: Admission,
  follow: FollowSettings,
  pollMs: number,
  startFollowing: (i: number) => void,
  wakeup: { signal(): void; takeSignal(): boolean; waitFor(ms: number): Promise<void> },
): Promise<void> {
  // Clusters take turns (round robin, starting one further each pass): in plan order, the first cluster would take
  // every fleet slot that frees and the last would wait for the others to finish.
  let turn = 0;
  /** Targets whose retry is under way (admitted and patching, or being decided): never tried twice at once. */
  const inFlight = new Map<number, Promise<void>>();
  const deferredIndexes = (): number[] => {
    const byCluster = new Map<string, number[]>();
    done.forEach((d, i) => {
      if (!(d.result.outcome === 'deferred' && d.retry) || inFlight.has(i)) return;
      const queue = byCluster.get(d.result.cluster);
      if (queue) queue.push(i);
      else byCluster.set(d.result.cluster, [i]);
    });
    const queues = [...byCluster.values()];
    const start = queues.length > 0 ? turn++ % queues.length : 0;
    const ordered = [...queues.slice(start), ...queues.slice(0, start)];
    const out: number[] = [];
    for (let k = 0; out.length < done.length && ordered.some((q) => k < q.length); k++) for (const q of ordered) if (k < q.length) out.push(q[k] as number);
    return out;
  };
  // The budget's end is a timer, like the follower's deadlines: decided once, not by comparing clock readings.
  let over = false;
  const budgetTimer = setTimeout(() => ((over = true), wakeup.signal()), Math.max(0, follow.budgetMs));
  let polls = 0;
  for (;;) {
    const waiting = deferredIndexes();
    if ((waiting.length === 0 && inFlight.size === 0) || over) break;
    // Every wait ends at least once per poll interval: other workers may have freed slots meanwhile.
    if (polls++ > 0) admission.reopen();
    for (const i of waiting) {
      if (over) break;
      const d = done[i] as WorkloadDone;
      // Thousands may wait: those whose scope is known full are passed over without a call.
      if (d.blocked?.()) continue;
      const retried = (d.retry as () => Promise<WorkloadDone>)().then((next) => {
        done[i] = next;
        inFlight.delete(i);
        // Deferred again (another worker took the slot first): it waits for a release like the rest. Anything else
        // (restarted and followed, or failed and its slot given back) is worth another look now.
        if (next.result.outcome === 'deferred') return;
        follow.onProgress?.(next.result);
        if (next.event) void next.event();
        startFollowing(i);
        wakeup.signal();
      }, (e: unknown) => {
        // Only a bug gets here (restartWorkload answers with results): a result for it rather than a lost target.
        done[i] = { result: { ...d.result, outcome: 'failed', reason: 'error', detail: e instanceof Error ? e.message : String(e) } };
        inFlight.delete(i);
      });
      inFlight.set(i, retried);
      // Its admission is decided once the queue of admissions is idle: then `blocked` is current for the next one.
      await admission.idle();
    }
    if (over) break;
    // Until a slot is released, a retry ends, or it is time to ask the store again.
    if (!wakeup.takeSignal()) {
      await wakeup.waitFor(pollMs);
      wakeup.takeSignal();
    }
  }
  clearTimeout(budgetTimer);
  // Retries already admitted finish their patch (and join the follower): a slot taken is never left unfollowed.
  await Promise.all(inFlight.values());
}

const targetName = (t: RolloutTarget): string => (t.type !== 'workload' ? t.name : (t.name ?? (t.selector !== undefined ? `(selector ${t.selector})` : '(annotated)')));

function failedResult(t: RolloutTarget, cluster: string, name: string, failure: KubeFailure, attempts: number, durationMs: number): RolloutResult {
  return { ...identity(t, cluster, name), outcome: 'failed', reason: failure.reason, detail: failure.detail, attempts, durationMs };
}

function identity(t: RolloutTarget, cluster: string, name: string, kind: string = t.kind) {
  return { cluster, namespace: t.namespace, kind, name, routes: t.routes, paths: t.paths, restartToken: t.restartToken };
}

interface ClusterRun {
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

async function executeCluster(table: RoutingTable, cluster: string, targets: RolloutTarget[], options: ExecutorOptions, started: number, followUntil: number | undefined, admission: Admission | undefined): Promise<WorkloadDone[]> {
  const clock = options.clock ?? realClock;
  const config = table.clusters.get(cluster);
  let access: ClusterAccess;
  try {
    if (!config) throw new Error(`cluster ${cluster} is not in the routing table`);
    access = await options.access(cluster, config);
  } catch (e) {
    const failure: KubeFailure = { reason: 'credentials', retryable: false, detail: e instanceof Error ? e.message : String(e) };
    return targets.map((t) => ({ result: failedResult(t, cluster, targetName(t), failure, 0, clock.monotonic() - started) }));
  }
  const run: ClusterRun = {
    table,
    admission,
    cluster,
    api: (options.apiFor ?? ((a) => kubeApiFor(a, options.requestTimeoutMs)))(access),
    limiter: limiterFor(cluster, config.concurrency ?? options.defaultConcurrency ?? 10),
    options,
    retry: options.retry ?? DEFAULT_RETRY,
    env: options.retryEnv ?? realRetryEnv,
    clock,
    started,
  };
  const consumersTargets = targets.filter((t) => t.type === 'consumers');
  const consumers = consumersTargets.map((t) =>
    executeConsumersTarget(
      {
        cluster,
        api: run.api,
        dryRun: options.dryRun === true,
        clock,
        started,
        read: (descriptor, namespace, name) => withRetries(() => run.limiter.run(() => run.api.read(descriptor, namespace, name)), run.retry, run.env),
        list: (kind, namespace) => withRetries(() => run.limiter.run(() => run.api.list(kind, namespace)), run.retry, run.env),
        restart: (target, descriptor, object) => restartWorkload(run, target, object, started, descriptor),
        ...(followUntil === undefined ? {} : { followUntil }),
        ...(options.follow?.since === undefined ? {} : { since: options.follow.since }),
      },
      t,
    ),
  );
  const groups = await Promise.all(readGroups(targets.filter((t) => t.type !== 'consumers')).map((group) => expandGroup(run, group)));
  const restarted = await Promise.all(groups.flat().map((w) => (w.kind === 'result' ? { result: w.result } : restartWorkload(run, w.target, w.object, w.started))));
  return [...restarted, ...(await Promise.all(consumers)).flat()];
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
    if (t.type === 'workload' && t.selector !== undefined) groups.push({ namespace: t.namespace, descriptor, targets: [t], mode: 'selector' });
    else if (t.type === 'workload' && t.annotated) groups.push({ namespace: t.namespace, descriptor, targets: [t], mode: 'annotated' });
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

type Expanded = { kind: 'result'; result: RolloutResult } | { kind: 'workload'; target: RolloutTarget; object: KubeObject; started: number };

/** Reads the objects a group of targets names; a target that names nothing becomes a result right away. */
async function expandGroup(run: ClusterRun, group: ReadGroup): Promise<Expanded[]> {
  const { started } = run;
  const { api, limiter } = run;
  const kind = group.descriptor;
  const first = group.targets[0] as RolloutTarget;
  const read = await withRetries(
    () =>
      limiter.run(async (): Promise<KubeObject[]> => {
        if (group.mode === 'get') return [await api.read(kind, group.namespace, targetName(first))];
        if (group.mode === 'selector') return api.list(kind, group.namespace, first.type === 'workload' ? first.selector : undefined);
        return api.list(kind, group.namespace);
      }),
    run.retry,
    run.env,
  );
  if (!read.ok) return group.targets.map((t) => ({ kind: 'result', result: failedResult(t, run.cluster, targetName(t), read.failure, read.attempts, run.clock.monotonic() - started) }));

  if (group.mode === 'get' || group.mode === 'list-names') {
    const byName = new Map(read.value.map((o) => [o.metadata?.name ?? '', o]));
    return group.targets.map((t): Expanded => {
      const object = byName.get(targetName(t));
      if (object) return { kind: 'workload', target: t, object, started };
      const failure: KubeFailure = { reason: 'not found', retryable: false, detail: `${kind.kind} ${group.namespace}/${targetName(t)} does not exist` };
      return { kind: 'result', result: failedResult(t, run.cluster, targetName(t), failure, read.attempts, run.clock.monotonic() - started) };
    });
  }
  const ignored: string[] = [];
  const objects = group.mode === 'annotated' ? read.value.filter((o) => watches(run, group, o, first.paths, ignored)) : read.value;
  if (objects.length === 0) {
    const why =
      group.mode === 'annotated'
        ? `no ${kind.kind} in ${group.namespace} watches ${first.paths.join(', ')} (annotation ${ANNOTATIONS.watch})${ignored.length > 0 ? `; ignored: ${ignored.join('; ')}` : ''}`
        : `no ${kind.kind} in ${group.namespace} matches ${targetName(first)}`;
    return [{ kind: 'result', result: { ...identity(first, run.cluster, targetName(first)), outcome: 'skipped', reason: 'no workload matched', detail: why, attempts: read.attempts, durationMs: run.clock.monotonic() - started } }];
  }
  return objects.map((object) => ({ kind: 'workload', target: first, object, started }));
}

/**
 * Does the workload's `vault-rollout.io/watch` annotation list a pattern matching one of these paths? A pattern
 * that does not parse or is over its bounds watches nothing, and is logged naming the workload (and collected in
 * `ignored` for the result), never ignored silently.
 */
function watches(run: ClusterRun, group: ReadGroup, object: KubeObject, paths: readonly string[], ignored: string[]): boolean {
  const name = object.metadata?.name ?? '';
  const { patterns, problems } = parseWatchAnnotation(object.metadata?.annotations?.[ANNOTATIONS.watch]);
  if (problems.length > 0) {
    ignored.push(`${group.descriptor.kind} ${group.namespace}/${name}: ${problems.join(', ')}`);
    run.options.logger?.warn(`ignoring ${ANNOTATIONS.watch} patterns of a workload`, { cluster: run.cluster, namespace: group.namespace, kind: group.descriptor.kind, name, problems });
  }
  const index = new PatternIndex();
  patterns.forEach((p, i) => index.add(i, p));
  return paths.some((p) => index.match(p).size > 0);
}

/** The object a rollout belongs to (the patch's answer, or the object found restarted): older generations of it are stale. */
type Restarted = { uid?: string; generation?: number };
const restartedFrom = (o: KubeObject): Restarted => ({ ...(o.metadata?.uid === undefined ? {} : { uid: o.metadata.uid }), ...(o.metadata?.generation === undefined ? {} : { generation: o.metadata.generation }) });

export interface WorkloadDone {
  result: RolloutResult;
  /** Records the SecretRotated event, after every cluster's patches. */
  event?: () => Promise<void>;
  /** What following its rollout needs (restarted and unchanged workloads). */
  follow?: { run: ClusterRun; target: RolloutTarget; descriptor: WorkloadDescriptor; patchedAt: number; restarted?: Restarted };
  /** The slot it holds (or held) under `rollout.maxUnavailable`: given back when its rollout ends. */
  slot?: SlotClaim;
  /** A deferred target: tries again (reads, decides, takes a slot, patches). */
  retry?: () => Promise<WorkloadDone>;
  /** A deferred target: is a scope it needs known to be full right now (so trying again is pointless)? */
  blocked?: () => boolean;
}

async function restartWorkload(run: ClusterRun, target: RolloutTarget, read: KubeObject, started: number, descriptor: WorkloadDescriptor = descriptorOf(target)): Promise<WorkloadDone> {
  const name = read.metadata?.name ?? targetName(target);
  const done = (outcome: Outcome, reason: string, attempts: number, detail?: string): WorkloadDone => ({
    result: { ...identity(target, run.cluster, name, descriptor.kind), outcome, reason, ...(detail === undefined ? {} : { detail }), attempts, durationMs: run.clock.monotonic() - started },
  });

  // Under rollout.maxUnavailable: the slot this restart takes before its patch (and gives back if it patches nothing).
  const bound = run.admission ? maxUnavailableFor(run.table, target.routes) : undefined;
  const slot: SlotClaim | undefined = bound ? { holder: slotHolder({ cluster: run.cluster, namespace: target.namespace, kind: descriptor.kind, name, restartToken: target.restartToken }), scopeKeys: slotScopes(run.cluster, bound).map((s) => s.key) } : undefined;
  const withSlot = (d: WorkloadDone): WorkloadDone => (slot ? { ...d, slot } : d);
  const giveBack = async (d: WorkloadDone): Promise<WorkloadDone> => {
    if (slot && holding) await run.admission?.release(slot);
    return d;
  };
  let holding = false;

  let object = read;
  let attempts = 1;
  for (;;) {
    const refusal = descriptor.refusal(object);
    if (refusal) return giveBack(done('skipped', descriptor.refusalReason ?? 'paused', attempts, refusal));
    // What reconcile recorded on the metadata (pods already on that version) counts too, unless the record is reset.
    const recorded = readRecord(descriptor, object, { restartsOnly: run.options.overrideRecorded === true });
    const decision = decideRestart(recorded, target, { override: run.options.overrideRecorded === true });
    if (decision.action === 'skip') return giveBack(done('skipped', 'older version', attempts, decision.reason));
    if (decision.action === 'unchanged') return withSlot({ ...done('unchanged', 'already restarted for this version', attempts), follow: { run, target, descriptor, patchedAt: run.clock.now(), restarted: restartedFrom(object) } });
    if (run.options.observeOnly) return done('skipped', NOT_RESTARTED_YET, attempts);
    if (slot && bound && !holding && run.options.dryRun !== true) {
      const ttlMs = (run.options.follow?.timeoutMs ?? rolloutTimeoutMs(run.table, run.cluster, target.routes)) + LEASE_MARGIN_MS;
      const admitted = await run.admission?.admit(run.cluster, slot.holder, bound, ttlMs);
      if (admitted && !admitted.admitted) {
        const current = object;
        return { ...done('deferred', 'waiting for a rollout slot', attempts, admitted.why), retry: () => restartWorkload(run, target, current, started, descriptor), blocked: () => run.admission?.knownFull(run.cluster, bound) === true };
      }
      holding = true;
    }

    const now = run.clock.now();
    const nowIso = new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z');
    // restartAt may never be in the future (Argo would wait for it); restartedAt comes from the change itself.
    const restartAt = target.restartedAt !== null && Date.parse(target.restartedAt) <= now ? target.restartedAt : nowIso;
    const input = { annotations: restartAnnotations(target, decision.versions, nowIso), restartAt, now: new Date(now).toISOString(), object };
    // Guarded by the record as read where the kind can say so (a status write in between is no conflict), else by
    // the resourceVersion read.
    const guarded = descriptor.guardedRestartPatch?.(input, object);
    const readVersion = object.metadata?.resourceVersion;
    const body = guarded ?? withResourceVersion(descriptor.restartPatch(input), readVersion);
    const strategy = guarded ? PatchStrategy.JsonPatch : descriptor.patchStrategy;

    // One budget of attempts covers patches, retries and re-reads after conflicts.
    const patched = await withRetries(() => run.limiter.run(() => run.api.patch(descriptor, target.namespace, name, body, strategy, run.options.dryRun === true)), run.retry, run.env, attempts);
    attempts = patched.attempts;
    if (patched.ok) {
      if (run.options.dryRun) return done('dry-run', '', attempts);
      // (A guarded patch passed its test, so the record it adds differs from the one read: it changed the template.)
      if (!guarded && patched.value.metadata?.resourceVersion === readVersion) return withSlot({ ...done('unchanged', 'the server found nothing to change', attempts), follow: { run, target, descriptor, patchedAt: now, restarted: restartedFrom(patched.value) } });
      const patchedObject = patched.value;
      return withSlot({ ...done('restarted', '', attempts), event: () => recordEvent(run, target, descriptor, patchedObject, now), follow: { run, target, descriptor, patchedAt: now, restarted: restartedFrom(patchedObject) } });
    }
    // A guarded patch whose test failed is a 422 (the API server does not say which operation failed): read again.
    const conflict = patched.failure.reason === 'conflict' || (guarded !== undefined && patched.failure.reason === 'invalid');
    if (!conflict || attempts >= run.retry.maxAttempts) return giveBack(done('failed', patched.failure.reason, attempts, patched.failure.detail));
    // Someone wrote the object since we read it (perhaps another worker restarting it): read again, decide again.
    const reread = await withRetries(() => run.limiter.run(() => run.api.read(descriptor, target.namespace, name)), run.retry, run.env, attempts + 1);
    attempts = reread.attempts;
    if (!reread.ok) return giveBack(done('failed', reread.failure.reason, attempts, reread.failure.detail));
    object = reread.value;
  }
}

/** A merge patch made conditional on the resourceVersion read (the server answers 409 when the object changed since). */
const withResourceVersion = (patch: Record<string, unknown>, resourceVersion: string | undefined): Record<string, unknown> => ({ ...patch, metadata: { ...((patch.metadata as object) ?? {}), resourceVersion } });

/** An Event on the restarted object; its name is derived from the restart, so a repeat does not duplicate it. */
async function recordEvent(run: ClusterRun, target: RolloutTarget, descriptor: WorkloadDescriptor, object: KubeObject, now: number): Promise<void> {
  const name = object.metadata?.name ?? '';
  const secrets = describeSecrets(target);
  const time = new Date(now).toISOString();
  await createEvent(run, {
    name: `${name}.vr-${target.restartToken.slice(0, 16)}`,
    namespace: target.namespace,
    involvedObject: { apiVersion: descriptor.apiVersion, kind: descriptor.kind, name, namespace: target.namespace, uid: object.metadata?.uid, resourceVersion: object.metadata?.resourceVersion },
    reason: 'SecretRotated',
    message: `${isSyncKind(descriptor.kind) ? 'Sync requested' : 'Restarted'} by vault-rollout for Vault secret ${secrets} (routes: ${target.routes.join(', ')})`,
    type: 'Normal',
    time,
  });
}

/**
 * One Event when a followed rollout ends complete or failed. Named from the restart token like SecretRotated's, with
 * one name for both outcomes: a re-delivered message records nothing twice. Paths and versions, never values.
 */
async function recordRolloutEvent(run: ClusterRun, target: RolloutTarget, descriptor: WorkloadDescriptor, result: RolloutResult): Promise<void> {
  const complete = result.rollout === 'complete';
  const secrets = describeSecrets(target);
  const pods = result.pods ? ` (${result.pods.ready}/${result.pods.desired} new pods Ready)` : '';
  const time = new Date(run.clock.now()).toISOString();
  const message = complete
    ? `Rollout complete${result.rolloutMs === undefined ? '' : ` after ${Math.round(result.rolloutMs / 1000)} s`}${pods} for Vault secret ${secrets}`
    : `Rollout failed for Vault secret ${secrets}: ${result.rolloutReason ?? ''}`;
  await createEvent(run, {
    name: `${result.name}.vr-${target.restartToken.slice(0, 16)}.rollout`,
    namespace: target.namespace,
    involvedObject: { apiVersion: descriptor.apiVersion, kind: descriptor.kind, name: result.name, namespace: target.namespace },
    reason: complete ? 'RolloutComplete' : 'RolloutFailed',
    message,
    type: complete ? 'Normal' : 'Warning',
    time,
  });
}

/** The secrets of a restart as Events name them: paths and versions, never values. */
const describeSecrets = (target: RolloutTarget): string => target.secrets.map((s) => (s.version === null ? `${s.path} (${s.operation})` : `${s.path} version ${s.version}`)).join(', ');

/**
 * A halted rotation, made visible where it happened: a Warning `RotationHalted` Event on the workload that failed
 * the gate, named from its restart (haltEventName), so a repeat records nothing twice and a reader holding the
 * workload's restart token finds it by name. Not an annotation: the admission policy lets the vault-rollout identity
 * write only what a restart writes. Best effort: the halt itself is already decided and logged.
 */
export async function recordHalt(table: RoutingTable, target: RolloutTarget, name: string, options: ExecutorOptions, message: string): Promise<void> {
  const config = table.clusters.get(target.cluster);
  if (!config) return;
  const clock = options.clock ?? realClock;
  let access: ClusterAccess;
  try {
    access = await options.access(target.cluster, config);
  } catch (e) {
    options.logger?.warn('could not record the halt in the cluster', { cluster: target.cluster, error: e instanceof Error ? e.name : String(e) });
    return;
  }
  const run: ClusterRun = { cluster: target.cluster, api: (options.apiFor ?? ((a) => kubeApiFor(a, options.requestTimeoutMs)))(access), limiter: limiterFor(target.cluster, config.concurrency ?? options.defaultConcurrency ?? 10), options, retry: options.retry ?? DEFAULT_RETRY, env: options.retryEnv ?? realRetryEnv, clock, started: clock.monotonic(), table, admission: undefined };
  // A consumers target of a Secret has no object of its own to carry the Event: its halt is in the log and the result.
  if (target.type === 'consumers' && !isSyncKind(target.kind)) return;
  const descriptor = descriptorOf(target);
  await createEvent(run, {
    name: haltEventName(name, target.restartToken),
    namespace: target.namespace,
    involvedObject: { apiVersion: descriptor.apiVersion, kind: descriptor.kind, name, namespace: target.namespace },
    reason: HALT_EVENT_REASON,
    message,
    type: 'Warning',
    time: new Date(clock.now()).toISOString(),
  });
}

interface EventInput {
  name: string;
  namespace: string;
  involvedObject: Record<string, unknown>;
  reason: string;
  message: string;
  type: 'Normal' | 'Warning';
  time: string;
}

/** Creates a core/v1 Event; its name is derived from the restart, so a repeat is a 409 and is left as it is. */
async function createEvent(run: ClusterRun, e: EventInput): Promise<void> {
  const event = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: e.name, namespace: e.namespace },
    involvedObject: e.involvedObject,
    reason: e.reason,
    message: e.message.slice(0, 1000),
    type: e.type,
    source: { component: EVENT_REPORTER },
    reportingComponent: EVENT_REPORTER,
    reportingInstance: EVENT_REPORTER,
    firstTimestamp: e.time,
    lastTimestamp: e.time,
    count: 1,
  };
  try {
    await run.limiter.run(() => run.api.create(event));
  } catch (err) {
    const failure = classifyKubeError(err);
    if (failure.reason !== 'conflict') run.options.logger?.warn(`could not record the ${e.reason} event`, { cluster: run.cluster, namespace: e.namespace, name: e.involvedObject.name, reason: failure.reason });
  }
}
