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
} from '../plan/restart-record.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { maxUnavailableFor, rolloutTimeoutMs } from '../routing/routing-table.ts';
import type { SlotClaim } from '../slots/admission.ts';
import { LEASE_MARGIN_MS, slotHolder, slotScopes } from '../slots/slot-store.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { WorkloadKinds, type WorkloadKind } from '../routing/schema.ts';
import { identity, targetName } from './cluster-run.ts';
import { recordEvent } from './events.ts';
import { withRetries } from './retry.ts';
import {
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
});

export async function restartWorkload(
  run: ClusterRun,
  target: RolloutTarget,
  read: KubeObject,
  started: number,
  descriptor: WorkloadDescriptor = descriptorOf(target),
): Promise<WorkloadDone> {
  const name = read.metadata?.name ?? targetName(target);
  const done = (outcome: Outcome, reason: string, attempts: number, detail?: string): WorkloadDone => ({
    result: {
      ...identity(target, run.cluster, name, descriptor.kind),
      outcome,
      reason,
      ...(detail === undefined ? {} : { detail }),
      attempts,
      durationMs: run.clock.monotonic() - started,
    },
  });

  // Under rollout.maxUnavailable: the slot this restart takes before its patch (and gives back if it patches nothing).
  const bound = run.admission ? maxUnavailableFor(run.table, target.routes) : undefined;
  const slot: SlotClaim | undefined = bound
    ? {
        holder: slotHolder({
          cluster: run.cluster,
          namespace: target.namespace,
          kind: descriptor.kind,
          name,
          restartToken: target.restartToken,
        }),
        scopeKeys: slotScopes(run.cluster, bound).map((s) => s.key),
      }
    : undefined;
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
    const skips = run.options.overrideRecorded === true ? {} : recordedSkips(object);
    const decision = decideRestart(recorded, target, { override: run.options.overrideRecorded === true });
    if (decision.action === 'skip') {
      // A newer version restarted it since (the newest value wins): a slot this older restart held
      // belongs to a rollout that no longer runs, so it goes back now rather than at its lease's end.
      if (slot) await run.admission?.release(slot);
      return done('skipped', SUPERSEDED_REASON, attempts, decision.reason);
    }
    if (decision.action === 'unchanged')
      return withSlot({
        ...done('unchanged', 'already restarted for this version', attempts),
        follow: { run, target, descriptor, patchedAt: run.clock.now(), restarted: restartedFrom(object) },
      });
    // A gate's look: a target skipped by keys at this version has nothing to roll out.
    if (run.options.observeOnly)
      return skippedByKeysAt(target, skips)
        ? done('skipped', KEYS_UNCHANGED_REASON, attempts)
        : done('skipped', NOT_RESTARTED_YET, attempts);
    // Key-level restarts: none of the keys it uses changed and it stands at the version before. The skip
    // is recorded AS a skip (KeySkip, on the metadata beside reconcile's versions), never as a version: a later change
    // of this version that names a used key still restarts it, and status shows it unverified until reconcile
    // confirmed the version with Vault. No slot is taken, nothing is followed.
    const keyed = isWorkloadKind(descriptor.kind) ? withAgentKeys(target, descriptor.kind, object) : target;
    const keysUnchanged = keyLevelSkip(keyed, recorded, skips);
    if (keysUnchanged !== undefined) {
      const newSkips = keySkipsOf(keyed);
      // The same claim again (a redelivery): the skip is recorded already.
      const known = Object.entries(newSkips).every(
        ([path, skip]) => JSON.stringify(skips[path]) === JSON.stringify(skip),
      );
      if (run.options.dryRun || known) return giveBack(done('skipped', KEYS_UNCHANGED_REASON, attempts, keysUnchanged));
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
        attempts,
      );
      attempts = recordedNow.attempts;
      if (recordedNow.ok) return giveBack(done('skipped', KEYS_UNCHANGED_REASON, attempts, keysUnchanged));
      if (recordedNow.failure.reason !== 'conflict' || attempts >= run.retry.maxAttempts)
        return giveBack(done('failed', recordedNow.failure.reason, attempts, recordedNow.failure.detail));
      const again = await withRetries(
        () => run.limiter.run(() => run.api.read(descriptor, target.namespace, name)),
        run.retry,
        run.env,
        attempts + 1,
      );
      attempts = again.attempts;
      if (!again.ok) return giveBack(done('failed', again.failure.reason, attempts, again.failure.detail));
      object = again.value;
      continue;
    }
    if (slot && bound && !holding && run.options.dryRun !== true) {
      const ttlMs =
        (run.options.follow?.timeoutMs ?? rolloutTimeoutMs(run.table, run.cluster, target.routes)) + LEASE_MARGIN_MS;
      const admitted = await run.admission?.admit(run.cluster, slot.holder, bound, ttlMs);
      if (admitted && !admitted.admitted) {
        const current = object;
        return {
          ...done('deferred', 'waiting for a rollout slot', attempts, admitted.why),
          retry: () => restartWorkload(run, target, current, started, descriptor),
          blocked: () => run.admission?.knownFull(run.cluster, bound) === true,
        };
      }
      holding = true;
    }

    const now = run.clock.now();
    const nowIso = new Date(now).toISOString().replace(/\.\d{3}Z$/, 'Z');
    // restartAt may never be in the future (Argo would wait for it); restartedAt comes from the change itself.
    const restartAt =
      target.restartedAt !== null && Date.parse(target.restartedAt) <= now ? target.restartedAt : nowIso;
    const input = {
      annotations: restartAnnotations(target, decision.versions, nowIso),
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

    // One budget of attempts covers patches, retries and re-reads after conflicts.
    const patched = await withRetries(
      () =>
        run.limiter.run(() =>
          run.api.patch(descriptor, target.namespace, name, body, strategy, run.options.dryRun === true),
        ),
      run.retry,
      run.env,
      attempts,
    );
    attempts = patched.attempts;
    if (patched.ok) {
      if (run.options.dryRun) return done('dry-run', '', attempts);
      // (A guarded patch passed its test, so the record it adds differs from the one read: it changed the template.)
      if (!guarded && patched.value.metadata?.resourceVersion === readVersion)
        return withSlot({
          ...done('unchanged', 'the server found nothing to change', attempts),
          follow: { run, target, descriptor, patchedAt: now, restarted: restartedFrom(patched.value) },
        });
      const patchedObject = patched.value;
      return withSlot({
        ...done('restarted', '', attempts),
        event: () => recordEvent(run, target, descriptor, patchedObject, now),
        follow: { run, target, descriptor, patchedAt: now, restarted: restartedFrom(patchedObject) },
      });
    }
    // A guarded patch whose test failed is a 422 (the API server does not say which operation failed): read again.
    const conflict =
      patched.failure.reason === 'conflict' || (guarded !== undefined && patched.failure.reason === 'invalid');
    if (!conflict || attempts >= run.retry.maxAttempts)
      return giveBack(done('failed', patched.failure.reason, attempts, patched.failure.detail));
    // Someone wrote the object since we read it (perhaps another worker restarting it): read again, decide again.
    const reread = await withRetries(
      () => run.limiter.run(() => run.api.read(descriptor, target.namespace, name)),
      run.retry,
      run.env,
      attempts + 1,
    );
    attempts = reread.attempts;
    if (!reread.ok) return giveBack(done('failed', reread.failure.reason, attempts, reread.failure.detail));
    object = reread.value;
  }
}

/** A merge patch made conditional on the resourceVersion read (the server answers 409 when the object changed since). */
const withResourceVersion = (
  patch: Record<string, unknown>,
  resourceVersion: string | undefined,
): Record<string, unknown> => ({ ...patch, metadata: { ...((patch.metadata as object) ?? {}), resourceVersion } });
