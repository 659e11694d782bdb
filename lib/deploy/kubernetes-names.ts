/**
 * Every annotation vault-rollout writes or reads on Kubernetes objects, and every Event it creates, in one table
 * (the constants stay where the code uses them: workloads/annotations.ts, workloads/sync-kinds.ts, the admission
 * policy, the importer's Reloader reader). docs/reference/annotations-and-events.md is generated from it;
 * test/unit/docs/reference.test.ts fails when lib/ holds a `vault-rollout.io/` name or an Event reason missing here.
 */
import { RELOADER } from '../importer/reloader.ts';
import { ANNOTATIONS, EVENT_REASONS, EVENT_REPORTER } from '../workloads/annotations.ts';
import { SYNC_ANNOTATIONS } from '../workloads/sync-kinds.ts';
import { POLICY_ANNOTATIONS } from './admission-policy.ts';

export interface AnnotationUse {
  name: string;
  /** Who writes it (vault-rollout, or the workload's owner) and who reads it. */
  access: 'written' | 'read' | 'written and read';
  on: string;
  meaning: string;
}

export interface EventUse {
  reason: string;
  type: 'Normal' | 'Warning';
  name: string;
  on: string;
  meaning: string;
}

export const ANNOTATION_USES: readonly AnnotationUse[] = [
  {
    name: ANNOTATIONS.restartedAt,
    access: 'written',
    on: 'the pod template of a Deployment, StatefulSet, DaemonSet, CronJob (job template)',
    meaning:
      "The same annotation `kubectl rollout restart` writes: the newest change's time (UTC seconds), never the clock of the run, so a replay plans byte-identical patches.",
  },
  {
    name: ANNOTATIONS.versions,
    access: 'written and read',
    on: "the pod template (workloads), `metadata` (Argo Rollouts, custom resources, sync resources), and a workload's own `metadata` when reconcile records a version its pods already run",
    meaning:
      'The restart record: a JSON object of Vault path (with `#operation` for other than writes) → the newest version restarted for (or `time#id` where the feed gives no version). Exactly once per version: a change at or below the recorded version is `unchanged`. `status` reads it.',
  },
  {
    name: ANNOTATIONS.restartToken,
    access: 'written and read',
    on: 'as the versions record',
    meaning: 'A hash derived only from the changes of the restart; names its Events (`<name>.vr-<first 16>`).',
  },
  {
    name: ANNOTATIONS.watch,
    access: 'read',
    on: 'workloads (set by their owners)',
    meaning:
      'Opt-in discovery for `annotated: true` targets: comma- or newline-separated Vault paths or patterns the workload depends on.',
  },
  {
    name: SYNC_ANNOTATIONS.requestedAt,
    access: 'written and read',
    on: 'ExternalSecret, VaultStaticSecret (the nudge)',
    meaning: 'RFC 3339 time of the nudge: a sync counts only at or after it; the sync deadline counts from it.',
  },
  {
    name: SYNC_ANNOTATIONS.observed,
    access: 'written and read',
    on: 'ExternalSecret, VaultStaticSecret (the nudge)',
    meaning:
      "The operator's sync marker before the nudge (ESO `status.syncedResourceVersion`, VSO `status.secretMAC`).",
  },
  {
    name: POLICY_ANNOTATIONS.kinds,
    access: 'written and read',
    on: 'the ValidatingAdmissionPolicy `vault-rollout` (admission-policy)',
    meaning: 'JSON list of the kinds (`group/Kind`) the policy lets the identity restart; read by `doctor`.',
  },
  {
    name: POLICY_ANNOTATIONS.users,
    access: 'written and read',
    on: 'the ValidatingAdmissionPolicy',
    meaning: 'JSON list of the users the policy binds; read by `doctor`.',
  },
  {
    name: POLICY_ANNOTATIONS.groups,
    access: 'written and read',
    on: 'the ValidatingAdmissionPolicy',
    meaning: 'JSON list of the groups the policy binds; read by `doctor`.',
  },
  {
    name: POLICY_ANNOTATIONS.namespaces,
    access: 'written and read',
    on: 'the ValidatingAdmissionPolicy',
    meaning: 'JSON map `group/Kind` → the namespaces and globs its updates are allowed in; read by `doctor`.',
  },
  {
    name: RELOADER.auto,
    access: 'read',
    on: 'workloads (import only)',
    meaning: 'Stakater Reloader: restart on any Secret the pod template reads; imported as `restart: consumers`.',
  },
  {
    name: RELOADER.secretAuto,
    access: 'read',
    on: 'workloads (import only)',
    meaning: 'Reloader, Secrets only; imported like `reloader.stakater.com/auto`.',
  },
  {
    name: RELOADER.secretReload,
    access: 'read',
    on: 'workloads (import only)',
    meaning: "Reloader's named Secrets (each a Go regexp `^name$`).",
  },
  {
    name: RELOADER.search,
    access: 'read',
    on: 'workloads (import only)',
    meaning: "Reloader's search mode, with `reloader.stakater.com/match` on the Secret.",
  },
  {
    name: RELOADER.match,
    access: 'read',
    on: 'the Secret template of an ExternalSecret or VaultStaticSecret (import only)',
    meaning: "Reloader's search mode: this Secret is matched.",
  },
  {
    name: RELOADER.ignore,
    access: 'read',
    on: 'the Secret template of an ExternalSecret or VaultStaticSecret (import only)',
    meaning: 'Reloader ignores this Secret; so does import.',
  },
  {
    name: 'vault.hashicorp.com/agent-inject-secret-*',
    access: 'read',
    on: 'pod templates',
    meaning:
      'Vault Agent injector: which paths a pod renders (key-level restarts: a path named without a template is every key).',
  },
  {
    name: 'vault.hashicorp.com/agent-inject-template-*',
    access: 'read',
    on: 'pod templates',
    meaning: 'Vault Agent injector templates, read for `.Data.data.<key>` to find the keys a workload uses.',
  },
];

export const EVENT_USES: readonly EventUse[] = [
  {
    reason: EVENT_REASONS.secretRotated,
    type: 'Normal',
    name: '`<object>.vr-<first 16 of the restart token>`',
    on: 'each object restarted, or each sync resource nudged',
    meaning: '"Restarted by vault-rollout for Vault secret PATH version N (routes: …)" or "Sync requested …".',
  },
  {
    name: '`<object>.vr-<token>.rollout`',
    reason: EVENT_REASONS.rolloutComplete,
    type: 'Normal',
    on: 'a followed workload',
    meaning: 'Its rollout completed (time and new pods Ready).',
  },
  {
    name: '`<object>.vr-<token>.rollout`',
    reason: EVENT_REASONS.rolloutFailed,
    type: 'Warning',
    on: 'a followed workload',
    meaning: 'Its rollout failed or passed its deadline, with the reason.',
  },
  {
    name: '`<object>.vr-<token>.halted`',
    reason: EVENT_REASONS.halted,
    type: 'Warning',
    on: "the workload that failed a wave's gate",
    meaning:
      'The rotation is halted: the route, the secrets and versions, the wave, why, and the clusters not restarted. `status` finds it by name.',
  },
  {
    name: '`<object>.vr-<first 16 of the rotation>.cleared-<time>`',
    reason: EVENT_REASONS.haltCleared,
    type: 'Normal',
    on: "the workload that failed a wave's gate",
    meaning:
      "`vault-rollout halts clear --routes FILE` cleared the halt: the rotation, its secrets and wave, who cleared it (the operating system's user), on which host, when. The rotation store keeps the same.",
  },
];

/**
 * `source.component`, `reportingComponent`, `reportingInstance` and the field manager of every Event vault-rollout
 * creates.
 */
export const EVENT_REPORTER_NAME = EVENT_REPORTER;
