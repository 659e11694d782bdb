/**
 * The Events vault-rollout records on the objects it restarts: SecretRotated, RolloutComplete/Failed, RotationHalted,
 * RotationHaltCleared.
 */
import type { RolloutTarget } from '../plan/planner.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { EVENT_REPORTER, HALT_EVENT_REASON, haltEventName } from '../plan/restart-record.ts';
import { EVENT_REASONS } from '../workloads/annotations.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterAccess } from '../workloads/kube-port.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import type { HaltClearance } from '../rotations/rotation-store.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { limiterFor, realClock } from './cluster-run.ts';
import { DEFAULT_RETRY, realRetryEnv } from './retry.ts';
import type { ClusterRun, ExecutorOptions, RolloutResult } from './types.ts';

/** An Event on the restarted object; its name is derived from the restart, so a repeat does not duplicate it. */
export async function recordEvent(
  run: ClusterRun,
  target: RolloutTarget,
  descriptor: WorkloadDescriptor,
  object: KubeObject,
  now: number,
): Promise<void> {
  const name = object.metadata?.name ?? '';
  const secrets = describeSecrets(target);
  const time = new Date(now).toISOString();
  await createEvent(run, {
    name: `${name}.vr-${target.restartToken.slice(0, 16)}`,
    namespace: target.namespace,
    involvedObject: {
      apiVersion: descriptor.apiVersion,
      kind: descriptor.kind,
      name,
      namespace: target.namespace,
      uid: object.metadata?.uid,
      resourceVersion: object.metadata?.resourceVersion,
    },
    reason: EVENT_REASONS.secretRotated,
    message: `${isSyncKind(descriptor.kind) ? 'Sync requested' : 'Restarted'} by vault-rollout for Vault secret ${secrets} (routes: ${target.routes.join(', ')})`,
    type: 'Normal',
    time,
  });
}

/**
 * One Event when a followed rollout ends complete or failed. Named from the restart token like SecretRotated's, with
 * one name for both outcomes: a re-delivered message records nothing twice. Paths and versions, never values.
 */
export async function recordRolloutEvent(
  run: ClusterRun,
  target: RolloutTarget,
  descriptor: WorkloadDescriptor,
  result: RolloutResult,
): Promise<void> {
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
    involvedObject: {
      apiVersion: descriptor.apiVersion,
      kind: descriptor.kind,
      name: result.name,
      namespace: target.namespace,
    },
    reason: complete ? EVENT_REASONS.rolloutComplete : EVENT_REASONS.rolloutFailed,
    message,
    type: complete ? 'Normal' : 'Warning',
    time,
  });
}

/** The secrets of a restart as Events name them: paths and versions, never values. */
const describeSecrets = (target: RolloutTarget): string =>
  target.secrets
    .map((s) => (s.version === null ? `${s.path} (${s.operation})` : `${s.path} version ${s.version}`))
    .join(', ');

/**
 * A halted rotation, made visible where it happened: a Warning `RotationHalted` Event on the workload that failed
 * the gate, named from its restart (haltEventName), so a repeat records nothing twice and a reader holding the
 * workload's restart token finds it by name. Not an annotation: the admission policy lets the vault-rollout identity
 * write only what a restart writes. Best effort: the halt itself is already decided and logged.
 */
export async function recordHalt(
  table: RoutingTable,
  target: RolloutTarget,
  name: string,
  options: ExecutorOptions,
  message: string,
): Promise<void> {
  const config = table.clusters.get(target.cluster);
  if (!config) return;
  const clock = options.clock ?? realClock;
  let access: ClusterAccess;
  try {
    access = await options.access(target.cluster, config);
  } catch (e) {
    options.logger?.warn('could not record the halt in the cluster', {
      cluster: target.cluster,
      error: e instanceof Error ? e.name : String(e),
    });
    return;
  }
  const run: ClusterRun = {
    cluster: target.cluster,
    api: options.apiFor(access),
    limiter: limiterFor(target.cluster, config.concurrency ?? options.defaultConcurrency ?? 10),
    options,
    retry: options.retry ?? DEFAULT_RETRY,
    env: options.retryEnv ?? realRetryEnv,
    clock,
    started: clock.monotonic(),
    table,
    admission: undefined,
  };
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

/**
 * The trail `vault-rollout halts clear` leaves in the cluster: a Normal `RotationHaltCleared` Event on the workload
 * that failed the gate, saying who cleared the halt, from which host and when (the store keeps the same). Named from
 * the rotation and the time of the clear, so each clear has its own and a retry of one is a 409.
 */
export function haltClearedEvent(c: HaltClearance): KubeObject & Record<string, unknown> {
  const { namespace, kind, name } = c.failing;
  const workload = (WORKLOAD_KINDS as Record<string, WorkloadDescriptor | undefined>)[kind];
  const apiVersion = workload?.apiVersion ?? (isSyncKind(kind) ? SYNC_KINDS[kind].apiVersion : undefined);
  const stamp = Date.parse(c.clearedAt).toString(36);
  const what = `${c.secrets.join(', ')}; wave ${c.wave} of ${c.waves}`;
  return eventBody({
    name: `${name.slice(0, 200)}.vr-${c.rotation.slice(0, 16)}.cleared-${stamp}`,
    namespace,
    involvedObject: { ...(apiVersion ? { apiVersion } : {}), kind, name, namespace },
    reason: EVENT_REASONS.haltCleared,
    message: `Halt of rotation ${c.rotation} (${what}) cleared by ${c.user} on ${c.host} at ${c.clearedAt}`,
    type: 'Normal',
    time: c.clearedAt,
  });
}

/** A core/v1 Event as vault-rollout writes it: its identity in source and reporting fields (EVENT_REPORTER). */
function eventBody(e: EventInput): KubeObject & Record<string, unknown> {
  return {
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
}

/** Creates a core/v1 Event; its name is derived from the restart, so a repeat is a 409 and is left as it is. */
async function createEvent(run: ClusterRun, e: EventInput): Promise<void> {
  const event = eventBody(e);
  try {
    await run.limiter.run(() => run.api.create(event));
  } catch (err) {
    const failure = classifyKubeError(err);
    if (failure.reason !== 'conflict')
      run.options.logger?.warn(`could not record the ${e.reason} event`, {
        cluster: run.cluster,
        namespace: e.namespace,
        name: e.involvedObject.name,
        reason: failure.reason,
      });
  }
}
