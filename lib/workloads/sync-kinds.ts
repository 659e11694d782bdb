/**
 * Operators as descriptors: how to nudge External Secrets Operator's ExternalSecret and the Vault Secrets Operator's
 * VaultStaticSecret into syncing now, how to tell from the resource alone that it synced after the nudge, which
 * Secret it writes, and which workloads the operator restarts itself. Pure, like workload-kinds.ts.
 *
 * The nudge is a merge patch of annotations only (the admission policy allows nothing else on these kinds): the
 * restart token and versions (derived from the change, so a replay decides `unchanged` and patches nothing), the
 * time of the nudge, and the operator's sync marker as it was before the nudge. "Synced after the nudge" is then a
 * pure function of the object, which the follower can evaluate on every watch event and a follow-up can evaluate
 * again without anything remembered.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import type { SyncKind, WorkloadKind } from '../routing/target-schema.ts';
import { ANNOTATIONS } from './annotations.ts';
import { conditions, type Condition, type Health } from './rollout-health.ts';
import type { KubeObject, WorkloadDescriptor } from './workload-kinds.ts';

export const SYNC_ANNOTATIONS = {
  /** RFC 3339 (ms) time of the nudge: a sync counts only at or after it. */
  requestedAt: 'vault-rollout.io/sync-requested-at',
  /** The operator's sync marker before the nudge (ESO status.syncedResourceVersion, VSO status.secretMAC). */
  observed: 'vault-rollout.io/sync-observed',
} as const;

/** How long an operator may take to write the Secret after the nudge, unless the route says (`sync.timeout`). */
export const DEFAULT_SYNC_TIMEOUT_MS = 5 * 60_000;

export interface SyncDescriptor extends WorkloadDescriptor {
  kind: SyncKind;
  /** The operator, for messages. */
  operator: string;
  /** The Secret the operator writes. */
  secretName(obj: KubeObject): string;
  /** Workloads the operator restarts itself after a sync (VSO rolloutRestartTargets): not restarted a second time. */
  restartedByOperator(obj: KubeObject): Array<{ kind: WorkloadKind; name: string }>;
}

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

const conditionsOf = (obj: KubeObject): Condition[] => conditions(rec(obj.status));

/** Kubernetes times have whole seconds: a time counts as "at or after the nudge" from the nudge's second on. */
const atOrAfter = (time: string | undefined, nudge: string | undefined): boolean => {
  const t = time === undefined ? NaN : Date.parse(time);
  const n = nudge === undefined ? NaN : Date.parse(nudge);
  return !Number.isNaN(t) && !Number.isNaN(n) && t >= Math.floor(n / 1000) * 1000;
};

const withoutRestartedAt = (annotations: Record<string, string>) =>
  Object.fromEntries(Object.entries(annotations).filter(([k]) => k !== ANNOTATIONS.restartedAt));

/** The nudge: annotations only. `now` and `object` are absent when the admission policy renders it for its keys. */
function nudgePatch(marker: (obj: KubeObject) => string) {
  return ({
    annotations,
    now,
    object,
  }: {
    annotations: Record<string, string>;
    now?: string;
    object?: KubeObject;
  }) => ({
    metadata: {
      annotations: {
        ...withoutRestartedAt(annotations),
        [SYNC_ANNOTATIONS.requestedAt]: now ?? '',
        [SYNC_ANNOTATIONS.observed]: object ? marker(object) : '',
      },
    },
  });
}

/** Go's `0`, `0s`, `0m0s`...: a zero refresh interval. */
const isZeroDuration = (d: string): boolean => d.trim() === '0' || /^(0+(\.0*)?(ns|us|µs|ms|s|m|h))+$/.test(d.trim());

const synced = (message: string): Health => ({ state: 'complete', message });
const waiting = (message: string): Health => ({ state: 'progressing', message });

/** What every operator's descriptor shares: a merge patch of its metadata annotations, recorded there too. */
function operatorKind(
  d: Pick<
    SyncDescriptor,
    'apiVersion' | 'kind' | 'operator' | 'refusal' | 'health' | 'secretName' | 'restartedByOperator'
  > & { marker: (obj: KubeObject) => string },
): SyncDescriptor {
  const { marker, ...rest } = d;
  return {
    ...rest,
    patchStrategy: PatchStrategy.MergePatch,
    recordedAnnotations: (obj) => obj.metadata?.annotations,
    restartPatch: nudgePatch(marker),
    refusalReason: 'sync refused',
  };
}

export const externalSecret: SyncDescriptor = operatorKind({
  apiVersion: 'external-secrets.io/v1',
  kind: 'ExternalSecret',
  operator: 'External Secrets Operator',
  marker: (obj) => str(obj.status?.syncedResourceVersion) ?? '',
  refusal: (obj) => {
    const policy = str(obj.spec?.refreshPolicy);
    if (policy === 'CreatedOnce')
      return 'refreshPolicy CreatedOnce: ESO syncs this ExternalSecret only when it is created, so a nudge cannot bring the new value; use refreshPolicy OnChange (or Periodic)';
    const interval = str(obj.spec?.refreshInterval);
    if ((policy === undefined || policy === 'Periodic') && interval !== undefined && isZeroDuration(interval)) {
      return `refreshPolicy Periodic with refreshInterval ${interval}: ESO ignores annotation changes, so a nudge cannot make it sync; use refreshPolicy: OnChange`;
    }
    return undefined;
  },
  health: (o) => {
    const obj = o as KubeObject;
    const nudge = obj.metadata?.annotations?.[SYNC_ANNOTATIONS.requestedAt];
    if (!nudge) return waiting('not nudged yet');
    const ready = conditionsOf(obj).find((c) => c.type === 'Ready');
    const refreshTime = str(obj.status?.refreshTime);
    const before = obj.metadata?.annotations?.[SYNC_ANNOTATIONS.observed];
    const syncedVersion = str(obj.status?.syncedResourceVersion);
    if (ready?.status === 'False' && ready.reason === 'SecretSyncedError') {
      const message = `ESO reports SecretSyncedError: ${ready.message ?? '(no message)'}`;
      // An error from before the nudge may clear on the retry the nudge causes: it fails only once it is newer.
      return atOrAfter(ready.lastTransitionTime, nudge)
        ? { state: 'failed', message }
        : waiting(`${message} (from before the nudge; waiting for the retry)`);
    }
    const refreshed = atOrAfter(refreshTime, nudge);
    const markerMoved = before === undefined || before === '' || syncedVersion !== before;
    if (ready?.status === 'True' && ready.reason === 'SecretSynced' && refreshed && markerMoved)
      return synced(`ESO synced the Secret at ${refreshTime ?? '?'} (nudged ${nudge})`);
    return waiting(
      `waiting for ESO to refresh (refreshTime ${refreshTime ?? 'none'}, nudged ${nudge}; Ready=${ready?.status ?? '?'}${ready?.reason ? ` ${ready.reason}` : ''})`,
    );
  },
  secretName: (obj) => str(rec(obj.spec?.target).name) || (obj.metadata?.name ?? ''),
  restartedByOperator: () => [],
});

/** VSO's rolloutRestartTargets kinds, as vault-rollout names them. */
const VSO_KINDS: Readonly<Record<string, WorkloadKind>> = {
  Deployment: 'Deployment',
  StatefulSet: 'StatefulSet',
  DaemonSet: 'DaemonSet',
  'argo.Rollout': 'Rollout',
};

export const vaultStaticSecret: SyncDescriptor = operatorKind({
  apiVersion: 'secrets.hashicorp.com/v1beta1',
  kind: 'VaultStaticSecret',
  operator: 'Vault Secrets Operator',
  marker: (obj) => str(obj.status?.secretMAC) ?? '',
  refusal: () => undefined,
  health: (o) => {
    const obj = o as KubeObject;
    const nudge = obj.metadata?.annotations?.[SYNC_ANNOTATIONS.requestedAt];
    if (!nudge) return waiting('not nudged yet');
    const sync = conditionsOf(obj).find((c) => c.type === 'SecretSynced');
    if (sync?.status === 'False' && atOrAfter(sync.lastTransitionTime, nudge))
      return {
        state: 'failed',
        message: `VSO reports ${sync.reason ?? 'SecretSynced=False'}: ${sync.message ?? '(no message)'}`,
      };
    const before = obj.metadata?.annotations?.[SYNC_ANNOTATIONS.observed];
    const mac = str(obj.status?.secretMAC);
    // The MAC moves with the data VSO wrote; a sync of unchanged data moves only the condition.
    const macMoved = before !== undefined && before !== '' && mac !== undefined && mac !== before;
    const conditionMoved = sync?.status === 'True' && atOrAfter(sync.lastTransitionTime, nudge);
    if ((macMoved && sync?.status !== 'False') || conditionMoved)
      return synced(
        `VSO synced the Secret${macMoved ? ' (new data)' : ''} at ${sync?.lastTransitionTime ?? '?'} (nudged ${nudge})`,
      );
    return waiting(
      `waiting for VSO to sync (SecretSynced ${sync?.status ?? 'none'} since ${sync?.lastTransitionTime ?? '?'}, nudged ${nudge})`,
    );
  },
  secretName: (obj) => str(rec(obj.spec?.destination).name) ?? '',
  restartedByOperator: (obj) => {
    // VSO ignores rolloutRestartTargets when it does not compute the data's HMAC.
    if (obj.spec?.hmacSecretData === false) return [];
    const targets = Array.isArray(obj.spec?.rolloutRestartTargets)
      ? (obj.spec.rolloutRestartTargets as unknown[]).map(rec)
      : [];
    return targets.flatMap((t) => {
      const kind = VSO_KINDS[str(t.kind) ?? ''];
      const name = str(t.name);
      return kind && name ? [{ kind, name }] : [];
    });
  },
});

export const SYNC_KINDS: Readonly<Record<SyncKind, SyncDescriptor>> = {
  ExternalSecret: externalSecret,
  VaultStaticSecret: vaultStaticSecret,
};

export const isSyncKind = (kind: string): kind is SyncKind => kind in SYNC_KINDS;
