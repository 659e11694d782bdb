/**
 * One workload's restart: decide from its record, take a rollout slot when bounded, patch (guarded by the record or
 * the resourceVersion read), read again after a conflict.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import type { RolloutTarget } from '../plan/planner.ts';
import { keyLevelSkip, keySkipsOf, skippedByKeysAt, withAgentKeys } from '../plan/changed-keys.ts';
import {
  decideRestart,
  metadataRecord,
  readRecord,
  recordedSkips,
  recordOnlyPatch,
  restartAnnotations,
  type RestartDecision,
} from '../plan/restart-record.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { breakerFor } from '../plan/restart-breaker.ts';
import { NOTIFY_ONLY_REASON, notifyOnly } from '../plan/route-modes.ts';
import { maxUnavailableFor, rolloutTimeoutMs } from '../routing/routing-table.ts';
import type { SlotClaim } from '../slots/admission.ts';
import { LEASE_MARGIN_MS, slotHolder, slotScopes } from '../slots/slot-store.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { WorkloadKinds, type WorkloadKind } from '../routing/target-schema.ts';
import { identity, targetName } from './cluster-run.ts';
import { recordEvent } from './events.ts';
import { withRetries } from './retry.ts';
import {
  BREAKER_REASON,
  KEYS_UNCHANGED_REASON,
  NOT_RESTARTED_YET,
  SUPERSEDED_REASON,
  type ClusterRun,
  type Outcome,
  type Restarted,
  type WorkloadDone,
} from './types.ts';

const isWorkloadKind = (kind: string): kind is WorkloadKind => (WorkloadKinds as readonly string[]).includes(kind);

const restartedFrom = (o: KubeObject): Restarted => ({
  ...(o.metadata?.uid === undefined ? {} : { uid: o.metadata.uid }),
  ...(o.metadata?.generation === undefined ? {} : { generation: o.metadata.generation }),
  ...(o.metadata?.resourceVersion === undefined ? {} : { resourceVersion: o.metadata.resourceVersion }),
});

/** One restart under way: what it restarts, the slot it may take, and the attempts it has spent of its budget. */
interface Restart {
  run: ClusterRun;
  target: RolloutTarget;
  descriptor: WorkloadDescriptor;
  name: string;
  started: number;
  /** One budget of attempts covers patches, retries and re-reads after conflicts. */
  attempts: number;
  /**
   * Under rollout.maxUnavailable: the slot this restart takes before its patch (and gives back if it patches nothing).
   */
  slot: SlotClaim | undefined;
  bound: MaxUnavailable | undefined;
  holding: boolean;
}

type MaxUnavailable = NonNullable<ReturnType<typeof maxUnavailableFor>>;

/** A write lost to another writer: read the object again and decide again. */
const CONFLICT = Symbol('conflict');

/**
 * Decides from the workload's record, takes a rollout slot when bounded, patches, and after a conflict reads again
 * and decides again, within one budget of attempts.
 */
export async function restartWorkload(
  run: ClusterRun,
  target: RolloutTarget,
  read: KubeObject,
  started: number,
  descriptor: WorkloadDescriptor = descriptorOf(target),
): Promise<WorkloadDone> {
  const name = read.metadata?.name ?? targetName(target);
  const bound = run.admission ? maxUnavailableFor(run.table, target.routes) : undefined;
  const r: Restart = {
    run,
    target,
    descriptor,
    name,
    started,
    attempts: 1,
    slot: bound ? slotOf(run, target, descriptor, name, bound) : undefined,
    bound,
    holding: false,
  };
  let object = read;
  for (;;) {
    const step = await decideAndPatch(r, object);
    if (step !== CONFLICT) return step;
    // Someone wrote the object since we read it (perhaps another worker restarting it): read again, decide again.
    const again = await withRetries(
      () => run.limiter.run(() => run.api.read(descriptor, target.namespace, name)),
      run.retry,
      run.env,
      r.attempts + 1,
    );
    r.attempts = again.attempts;
    if (!again.ok) return giveBack(r, done(r, 'failed', again.failure.reason, again.failure.detail));
    object = again.value;
  }
}

/** The slot a bounded restart claims: its holder (the workload at this restart token) and the scopes it counts in. */
function slotOf(
  run: ClusterRun,
  target: RolloutTarget,
  descriptor: WorkloadDescriptor,
  name: string,
  bound: MaxUnavailable,
): SlotClaim {
  return {
    holder: slotHolder({
      cluster: run.cluster,
      namespace: target.namespace,
      kind: descriptor.kind,
      name,
      restartToken: target.restartToken,
    }),
    scopeKeys: slotScopes(run.cluster, bound).map((s) => s.key),
  };
}

/** The result so far, with the attempts spent and the time since the restart started. */
function done(r: Restart, outcome: Outcome, reason: string, detail?: string): WorkloadDone {
  return {
    result: {
      ...identity(r.target, r.run.cluster, r.name, r.descriptor.kind),
      outcome,
      reason,
      ...(detail === undefined ? {} : { detail }),
      attempts: r.attempts,
      durationMs: r.run.clock.monotonic() - r.started,
    },
  };
}

/** A result that holds its slot: given back when its rollout ends. */
const withSlot = (r: Restart, d: WorkloadDone): WorkloadDone => (r.slot ? { ...d, slot: r.slot } : d);

/** A result that patched nothing gives back the slot it took. */
async function giveBack(r: Restart, d: WorkloadDone): Promise<WorkloadDone> {
  if (r.slot && r.holding) await r.run.admission?.release(r.slot);
  return d;
}

/** One pass over the object as read: the decision, then the key-level skip or the slot and the patch. */
async function decideAndPatch(r: Restart, object: KubeObject): Promise<WorkloadDone | typeof CONFLICT> {
  const { run, target, descriptor } = r;
  const refusal = descriptor.refusal(object);
  if (refusal) return giveBack(r, done(r, 'skipped', descriptor.refusalReason ?? 'paused', refusal));
  // What reconcile recorded on the metadata (pods already on that version) counts too, unless the record is reset.
  const recorded = readRecord(descriptor, object, { restartsOnly: run.options.overrideRecorded === true });
  const skips = run.options.overrideRecorded === true ? {} : recordedSkips(object);
  const decision = decideRestart(recorded, target, { override: run.options.overrideRecorded === true });
  if (decision.action === 'skip') {
    // A newer version restarted it since (the newest value wins): a slot this older restart held
    // belongs to a rollout that no longer runs, so it goes back now rather than at its lease's end.
    if (r.slot) await run.admission?.release(r.slot);
    return done(r, 'skipped', SUPERSEDED_REASON, decision.reason);
  }
  if (decision.action === 'unchanged')
    return withSlot(r, {
      ...done(r, 'unchanged', 'already restarted for this version'),
      follow: { run, target, descriptor, patchedAt: run.clock.now(), restarted: restartedFrom(object) },
    });
  const keyed = isWorkloadKind(descriptor.kind) ? withAgentKeys(target, descriptor.kind, object) : target;
  const keysUnchanged = keyLevelSkip(keyed, recorded, skips);
  // A notify route's target: decided like any other, then answered, never patched (not even a key-level record).
  if (notifyOnly(run.table, target.routes))
    return keysUnchanged === undefined
      ? done(r, 'skipped', NOTIFY_ONLY_REASON)
      : done(r, 'skipped', KEYS_UNCHANGED_REASON, keysUnchanged);
  // A gate's look: a target skipped by keys at this version has nothing to roll out.
  if (run.options.observeOnly)
    return done(r, 'skipped', skippedByKeysAt(target, skips) ? KEYS_UNCHANGED_REASON : NOT_RESTARTED_YET);
  // Key-level restarts: none of the keys it uses changed and it stands at the version before. The skip
  // is recorded AS a skip (KeySkip, on the metadata beside reconcile's versions), never as a version: a later change
  // of this version that names a used key still restarts it, and status shows it unverified until reconcile
  // confirmed the version with Vault. No slot is taken, nothing is followed.
  if (keysUnchanged !== undefined) return recordKeySkip(r, object, keySkipsOf(keyed), skips, keysUnchanged);
  const refused = await breakerRefusal(r);
  if (refused !== undefined) return giveBack(r, done(r, 'skipped', BREAKER_REASON, refused));
  const deferred = await takeSlot(r, object);
  if (deferred) return deferred;
  return patchRestart(r, object, decision.versions);
}

/**
 * `rollout.breaker`: why this restart would be one too many for its workload, or undefined when it may go (or no
 * breaker applies). Asked once per restart, before its slot and patch; a dry run asks nothing and counts nothing.
 */
async function breakerRefusal({ run, target, descriptor, name }: Restart): Promise<string | undefined> {
  const limit = run.options.breaker && !run.options.dryRun ? breakerFor(run.table, target.routes) : undefined;
  if (!limit || !run.options.breaker) return undefined;
  const workload = { cluster: run.cluster, namespace: target.namespace, kind: descriptor.kind, name };
  const verdict = await run.options.breaker(workload, target.restartToken, limit);
  return verdict.allowed ? undefined : verdict.why;
}

/** Records the key-level skip on the metadata (once: a redelivery finds it recorded already). */
async function recordKeySkip(
  r: Restart,
  object: KubeObject,
  newSkips: ReturnType<typeof keySkipsOf>,
  skips: ReturnType<typeof recordedSkips>,
  why: string,
): Promise<WorkloadDone | typeof CONFLICT> {
  const { run, target, descriptor, name } = r;
  const known = Object.entries(newSkips).every(([path, skip]) => JSON.stringify(skips[path]) === JSON.stringify(skip));
  if (run.options.dryRun || known) return giveBack(r, done(r, 'skipped', KEYS_UNCHANGED_REASON, why));
  const recordBody = withResourceVersion(
    recordOnlyPatch({ ...metadataRecord(object), ...newSkips }),
    object.metadata?.resourceVersion,
  );
  const recordedNow = await withRetries(
    () =>
      run.limiter.run(() =>
        run.api.patch(descriptor, target.namespace, name, recordBody, PatchStrategy.MergePatch, false),
      ),
    run.retry,
    run.env,
    r.attempts,
  );
  r.attempts = recordedNow.attempts;
  if (recordedNow.ok) return giveBack(r, done(r, 'skipped', KEYS_UNCHANGED_REASON, why));
  if (recordedNow.failure.reason === 'conflict' && r.attempts < run.retry.maxAttempts) return CONFLICT;
  return giveBack(r, done(r, 'failed', recordedNow.failure.reason, recordedNow.failure.detail));
}

/**
 * Under rollout.maxUnavailable, takes a slot before the patch (once per restart; never for a dry run). No room:
 * the target comes back deferred, with how to try again and whether its scope is known full.
 */
async function takeSlot(r: Restart, object: KubeObject): Promise<WorkloadDone | undefined> {
  const { run, target, slot, bound } = r;
  if (!slot || !bound || r.holding || run.options.dryRun === true) return undefined;
  const ttlMs =
    (run.options.follow?.timeoutMs ?? rolloutTimeoutMs(run.table, run.cluster, target.routes)) + LEASE_MARGIN_MS;
  const admitted = await run.admission?.admit(run.cluster, slot.holder, bound, ttlMs);
  if (admitted && !admitted.admitted)
    return {
      ...done(r, 'deferred', 'waiting for a rollout slot', admitted.why),
      retry: () => restartWorkload(run, target, object, r.started, r.descriptor),
      blocked: () => run.admission?.knownFull(run.cluster, bound) === true,
    };
  r.holding = true;
  return undefined;
}

/** The restart patch, guarded against a write since the read; its result, or CONFLICT to read again. */
async function patchRestart(
  r: Restart,
  object: KubeObject,
  versions: Extract<RestartDecision, { action: 'restart' }>['versions'],
): Promise<WorkloadDone | typeof CONFLICT> {
  const { run, target, descriptor, name } = r;
  const now = run.clock.now();
  const nowIso = new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z');
  // restartAt may never be in the future (Argo would wait for it); restartedAt comes from the change itself.
  const restartAt = target.restartedAt !== null && Date.parse(target.restartedAt) <= now ? target.restartedAt : nowIso;
  const input = {
    annotations: restartAnnotations(target, versions, nowIso),
    restartAt,
    now: new Date(now).toISOString(),
    object,
  };
  // Guarded by the record as read where the kind can say so (a status write in between is no conflict), else by
  // the resourceVersion read.
  const guarded = descriptor.guardedRestartPatch?.(input, object);
  const readVersion = object.metadata?.resourceVersion;
  const body = guarded ?? withResourceVersion(descriptor.restartPatch(input), readVersion);
  const strategy = guarded ? PatchStrategy.JsonPatch : descriptor.patchStrategy;
  const patched = await withRetries(
    () =>
      run.limiter.run(() =>
        run.api.patch(descriptor, target.namespace, name, body, strategy, run.options.dryRun === true),
      ),
    run.retry,
    run.env,
    r.attempts,
  );
  r.attempts = patched.attempts;
  if (patched.ok) {
    if (run.options.dryRun) return done(r, 'dry-run', '');
    const follow = { run, target, descriptor, patchedAt: now, restarted: restartedFrom(patched.value) };
    // (A guarded patch passed its test, so the record it adds differs from the one read: it changed the template.)
    if (!guarded && patched.value.metadata?.resourceVersion === readVersion)
      return withSlot(r, { ...done(r, 'unchanged', 'the server found nothing to change'), follow });
    const patchedObject = patched.value;
    return withSlot(r, {
      ...done(r, 'restarted', ''),
      event: () => recordEvent(run, target, descriptor, patchedObject, now),
      follow,
    });
  }
  // A guarded patch whose test failed is a 422 (the API server does not say which operation failed): read again.
  const conflict =
    patched.failure.reason === 'conflict' || (guarded !== undefined && patched.failure.reason === 'invalid');
  if (conflict && r.attempts < run.retry.maxAttempts) return CONFLICT;
  return giveBack(r, done(r, 'failed', patched.failure.reason, patched.failure.detail));
}

/**
 * A merge patch made conditional on the resourceVersion read (the server answers 409 when the object changed since).
 */
const withResourceVersion = (
  patch: Record<string, unknown>,
  resourceVersion: string | undefined,
): Record<string, unknown> => ({ ...patch, metadata: { ...((patch.metadata as object) ?? {}), resourceVersion } });
