/**
 * Rollout health per kind: the rules `kubectl rollout status` applies (its per-kind status viewers in
 * kubectl/pkg/polymorphichelpers/rollout_status.go), as pure functions of one object read back from the cluster.
 * Level-triggered: nothing here remembers; the same object always gives the same answer.
 */

export const RolloutStates = ['complete', 'failed', 'timeout', 'progressing', 'none'] as const;
export type RolloutState = (typeof RolloutStates)[number];

/** Pods on the new template out of the desired count. */
export interface PodCounts {
  desired: number;
  /** Pods created from the new template (scheduled, for a DaemonSet). */
  updated: number;
  /** New pods that are Ready (Available, for Deployments and DaemonSets: Ready for minReadySeconds). */
  ready: number;
}

export interface Health {
  /** What the object says now; `timeout` is never returned here (deadlines are the follower's). */
  state: Exclude<RolloutState, 'timeout'>;
  /** What it waits for, why it failed, or why there is nothing to wait for. */
  message: string;
  pods?: PodCounts;
}

/** How a route's custom resource reports readiness: a status condition of this type becoming True. */
export interface WaitCondition {
  condition: string;
}

export type HealthRule = (obj: unknown) => Health;

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** A status condition as operators write it (any of the fields may be missing). */
export interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}
export const conditions = (status: Obj): Condition[] =>
  Array.isArray(status.conditions) ? (status.conditions as unknown[]).map((c) => rec(c) as Condition) : [];

function parts(obj: unknown) {
  const o = rec(obj);
  const metadata = rec(o.metadata);
  return { spec: rec(o.spec), status: rec(o.status), generation: num(metadata.generation) ?? 0 };
}

/** The API server defaults spec.replicas to 1; a missing field is read the same way. */
const replicasOf = (spec: Obj): number => num(spec.replicas) ?? 1;

const clamp = (n: number, max: number) => Math.max(0, Math.min(n, max));

export const deploymentHealth: HealthRule = (obj) => {
  const { spec, status, generation } = parts(obj);
  if ((num(status.observedGeneration) ?? 0) < generation)
    return { state: 'progressing', message: 'waiting for the Deployment controller to observe the new template' };
  const desired = replicasOf(spec);
  const updated = num(status.updatedReplicas) ?? 0;
  const available = num(status.availableReplicas) ?? 0;
  const replicas = num(status.replicas) ?? 0;
  // availableReplicas counts old pods too: take the old ones as available, so `ready` never overstates the new ones.
  const pods: PodCounts = {
    desired,
    updated,
    ready: clamp(Math.min(available - Math.max(0, replicas - updated), updated), desired),
  };
  const progressing = conditions(status).find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded')
    return {
      state: 'failed',
      message: `ProgressDeadlineExceeded${progressing.message ? ` (${progressing.message})` : ''}`,
      pods,
    };
  if (updated < desired) return { state: 'progressing', message: `${updated} of ${desired} new pods created`, pods };
  if (replicas > updated)
    return { state: 'progressing', message: `${replicas - updated} old pods pending termination`, pods };
  if (available < updated)
    return { state: 'progressing', message: `${updated - available} of ${updated} new pods not available`, pods };
  return { state: 'complete', message: `${updated} new pods available`, pods };
};

export const statefulSetHealth: HealthRule = (obj) => {
  const { spec, status, generation } = parts(obj);
  const strategy = rec(spec.updateStrategy);
  if (str(strategy.type) === 'OnDelete')
    return { state: 'none', message: 'updateStrategy OnDelete: pods get the new template only when they are deleted' };
  const observed = num(status.observedGeneration) ?? 0;
  if (observed === 0 || observed < generation)
    return { state: 'progressing', message: 'waiting for the StatefulSet controller to observe the new template' };
  const desired = replicasOf(spec);
  const ready = num(status.readyReplicas) ?? 0;
  const updated = num(status.updatedReplicas) ?? 0;
  const pods: PodCounts = { desired, updated, ready: clamp(Math.min(ready, updated), desired) };
  if (ready < desired)
    return { state: 'progressing', message: `${desired - ready} of ${desired} pods not Ready`, pods };
  const partition = num(rec(strategy.rollingUpdate).partition) ?? 0;
  if (partition > 0) {
    const wanted = Math.max(0, desired - partition);
    if (updated < wanted)
      return { state: 'progressing', message: `partitioned rollout: ${updated} of ${wanted} new pods updated`, pods };
    return {
      state: 'complete',
      message: `partitioned rollout complete: ${updated} new pods (partition ${partition})`,
      pods: { ...pods, desired: wanted },
    };
  }
  if (str(status.updateRevision) !== str(status.currentRevision))
    return {
      state: 'progressing',
      message: `${updated} of ${desired} pods at revision ${str(status.updateRevision) ?? '?'}`,
      pods,
    };
  return {
    state: 'complete',
    message: `${desired} pods at the new revision and Ready`,
    pods: { ...pods, updated: desired, ready: desired },
  };
};

export const daemonSetHealth: HealthRule = (obj) => {
  const { spec, status, generation } = parts(obj);
  if (str(rec(spec.updateStrategy).type) === 'OnDelete')
    return { state: 'none', message: 'updateStrategy OnDelete: pods get the new template only when they are deleted' };
  if ((num(status.observedGeneration) ?? 0) < generation)
    return { state: 'progressing', message: 'waiting for the DaemonSet controller to observe the new template' };
  const desired = num(status.desiredNumberScheduled) ?? 0;
  const updated = num(status.updatedNumberScheduled) ?? 0;
  const available = num(status.numberAvailable) ?? 0;
  const pods: PodCounts = { desired, updated, ready: clamp(Math.min(available, updated), desired) };
  if (updated < desired) return { state: 'progressing', message: `${updated} of ${desired} new pods scheduled`, pods };
  if (available < desired)
    return { state: 'progressing', message: `${desired - available} of ${desired} new pods not available`, pods };
  return { state: 'complete', message: `${desired} new pods available`, pods };
};

/**
 * Argo Rollouts writes status.phase (Healthy, Progressing, Paused, Degraded) and, as a string, the generation it
 * observed; a restart is done when status.restartedAt reaches spec.restartAt.
 */
export const argoRolloutHealth: HealthRule = (obj) => {
  const { spec, status, generation } = parts(obj);
  const observed = status.observedGeneration;
  if (observed === undefined || String(observed) !== String(generation))
    return { state: 'progressing', message: 'waiting for the Argo Rollouts controller to observe the change' };
  const desired = replicasOf(spec);
  const updated = num(status.updatedReplicas) ?? 0;
  const ready = num(status.availableReplicas) ?? num(status.readyReplicas) ?? 0;
  const pods: PodCounts = { desired, updated, ready: clamp(Math.min(ready, updated), desired) };
  const phase = str(status.phase) ?? '';
  const why = str(status.message);
  if (phase === 'Degraded') return { state: 'failed', message: `Degraded${why ? ` (${why})` : ''}`, pods };
  const restartAt = str(spec.restartAt);
  const restartedAt = str(status.restartedAt);
  if (restartAt !== undefined && (restartedAt === undefined || Date.parse(restartedAt) < Date.parse(restartAt)))
    return { state: 'progressing', message: 'waiting for the pods to be restarted', pods };
  if (phase === 'Healthy') return { state: 'complete', message: 'Healthy', pods };
  return { state: 'progressing', message: `${phase || 'no phase yet'}${why ? ` (${why})` : ''}`, pods };
};

/** A CronJob's next Job takes the new template; there is nothing running to wait for. */
export const nothingToWaitFor =
  (why: string): HealthRule =>
  () => ({ state: 'none', message: why });

/**
 * A custom resource the route says how to wait for: the condition True (observed for the current generation when
 * the status says which it observed) is complete; anything else progresses until the deadline.
 */
export function conditionHealth(wait: WaitCondition): HealthRule {
  return (obj) => {
    const { status, generation } = parts(obj);
    const observed = num(status.observedGeneration);
    if (observed !== undefined && observed < generation)
      return { state: 'progressing', message: 'waiting for the operator to observe the change' };
    const c = conditions(status).find((x) => x.type === wait.condition);
    if (c?.status === 'True' && (num((c as Obj).observedGeneration) ?? generation) >= generation)
      return { state: 'complete', message: `${wait.condition}=True` };
    if (!c) return { state: 'progressing', message: `no ${wait.condition} condition yet` };
    return {
      state: 'progressing',
      message: `${wait.condition}=${c.status ?? '?'}${c.reason ? ` ${c.reason}` : ''}${c.message ? `: ${c.message}` : ''}`,
    };
  };
}
