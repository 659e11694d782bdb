/**
 * One small descriptor per restartable kind: where its API lives, how a restart is patched, where the record is
 * read from, and whether the workload refuses restarts right now. The executor knows no kind by name.
 */
import { PatchStrategy } from '@kubernetes/client-node';
import type { WorkloadKind } from '../routing/target-schema.ts';
import type { JsonPatchOperation, KubeObject } from './kube-port.ts';
import { ANNOTATIONS } from './annotations.ts';
import {
  argoRolloutHealth,
  conditionHealth,
  daemonSetHealth,
  deploymentHealth,
  nothingToWaitFor,
  statefulSetHealth,
  type HealthRule,
  type WaitCondition,
} from './rollout-health.ts';

export type { KubeObject } from './kube-port.ts';

export interface RestartPatchInput {
  /** Annotations to set: restartedAt, restart token, versions. */
  annotations: Record<string, string>;
  /** RFC 3339 restart time (never in the future). */
  restartAt: string;
  /** The time of the patch (RFC 3339, ms) and the object as read: what an operator's nudge records (sync-kinds.ts). */
  now?: string;
  object?: KubeObject;
}

export interface WorkloadDescriptor {
  apiVersion: string;
  kind: string;
  patchStrategy: PatchStrategy;
  /** The annotations that hold the record (pod template annotations, or metadata for Rollouts). */
  recordedAnnotations(obj: KubeObject): Record<string, string> | undefined;
  /**
   * The restart patch, without identity (apiVersion, kind, name, namespace, resourceVersion are added by the caller).
   */
  restartPatch(input: RestartPatchInput): Record<string, unknown>;
  /**
   * The same restart as a JSON Patch guarded by a `test` of the record as read (the annotations map that holds it),
   * instead of by the resourceVersion read: a controller's status write between the read and the patch then costs
   * nothing, while a restart by anyone else (which changes the record) still fails the test (422) and is read again.
   * Undefined where the kind has none, or the object lacks the map's parent: then the resourceVersion guards.
   */
  guardedRestartPatch?(input: RestartPatchInput, read: KubeObject): JsonPatchOperation[] | undefined;
  /** Why the object refuses a restart now (e.g. a paused Deployment), or undefined. */
  refusal(obj: KubeObject): string | undefined;
  /** The result's reason for a refusal (default `paused`). */
  refusalReason?: string;
  /** Where the rollout stands, from the object alone (kubectl rollout status's rules; see rollout-health.ts). */
  health: HealthRule;
}

type Path = readonly string[];

function dig(obj: unknown, path: Path): unknown {
  let at = obj;
  for (const key of path) at = typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[key] : undefined;
  return at;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** RFC 6901: `~` and `/` in a key are escaped (an annotation key has a `/`). */
const escapePointer = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');
const pointer = (path: Path): string => path.map((k) => `/${escapePointer(k)}`).join('');

function nest(path: Path, leaf: unknown): Record<string, unknown> {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), leaf) as Record<string, unknown>;
}

/** Kinds restarted like `kubectl rollout restart`: new annotations on a pod template at `templatePath`. */
function podTemplateKind(
  apiVersion: string,
  kind: string,
  templatePath: Path,
  health: HealthRule,
  pausedPath?: Path,
): WorkloadDescriptor {
  const annotationsPath = [...templatePath, 'metadata', 'annotations'];
  return {
    apiVersion,
    kind,
    patchStrategy: PatchStrategy.StrategicMergePatch,
    recordedAnnotations: (obj) => dig(obj, annotationsPath) as Record<string, string> | undefined,
    restartPatch: ({ annotations }) => nest(annotationsPath, annotations),
    guardedRestartPatch: ({ annotations }, read) => {
      const existing = dig(read, annotationsPath);
      if (isRecord(existing)) {
        const at = pointer(annotationsPath);
        return [
          { op: 'test', path: at, value: existing },
          ...Object.entries(annotations).map(([key, value]): JsonPatchOperation => ({
            op: 'add',
            path: `${at}/${escapePointer(key)}`,
            value,
          })),
        ];
      }
      // No annotations yet: the template's metadata (its labels) as read guards the map's creation.
      const metadataPath = annotationsPath.slice(0, -1);
      const metadata = dig(read, metadataPath);
      if (existing !== undefined || !isRecord(metadata)) return undefined;
      return [
        { op: 'test', path: pointer(metadataPath), value: metadata },
        { op: 'add', path: pointer(annotationsPath), value: annotations },
      ];
    },
    refusal: (obj) =>
      pausedPath && dig(obj, pausedPath) === true
        ? `${kind} is paused (spec.paused: true); resume it to roll out`
        : undefined,
    health,
  };
}

export const WORKLOAD_KINDS: Readonly<Record<WorkloadKind, WorkloadDescriptor>> = {
  Deployment: podTemplateKind('apps/v1', 'Deployment', ['spec', 'template'], deploymentHealth, ['spec', 'paused']),
  StatefulSet: podTemplateKind('apps/v1', 'StatefulSet', ['spec', 'template'], statefulSetHealth),
  DaemonSet: podTemplateKind('apps/v1', 'DaemonSet', ['spec', 'template'], daemonSetHealth),
  CronJob: podTemplateKind(
    'batch/v1',
    'CronJob',
    ['spec', 'jobTemplate', 'spec', 'template'],
    nothingToWaitFor('a CronJob runs the new template from its next Job on; nothing runs now to wait for'),
  ),
  // Argo Rollouts restarts pods in place when spec.restartAt passes; a template change would be a new revision.
  Rollout: argoRollout('restartAt'),
};

/**
 * An Argo Rollout, restarted one of two ways (lib/routing/rollout-restart-by.ts). The record stays on the Rollout's
 * metadata either way, so every reader (restart decisions, reconcile, status) reads one place:
 * - `restartAt`: `spec.restartAt`; the controller replaces the pods of the same revision, with no analysis;
 * - `template`: the same annotations on the pod template too, a new revision the controller rolls out through the
 *   Rollout's strategy (canary steps, analysis), whose ReplicaSet carries the record status counts pods by.
 */
function argoRollout(restartBy: 'restartAt' | 'template'): WorkloadDescriptor {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    patchStrategy: PatchStrategy.MergePatch,
    recordedAnnotations: (obj) => obj.metadata?.annotations,
    restartPatch: ({ annotations, restartAt }) =>
      restartBy === 'template'
        ? {
            metadata: { annotations: withoutRestartedAt(annotations) },
            spec: { template: { metadata: { annotations } } },
          }
        : { metadata: { annotations: withoutRestartedAt(annotations) }, spec: { restartAt } },
    refusal: (obj) =>
      dig(obj, ['spec', 'paused']) === true
        ? 'Rollout is paused (spec.paused: true); promote or resume it first'
        : undefined,
    health: argoRolloutHealth,
  };
}

/** The descriptor of an Argo Rollout restarted by a new revision of its pod template (`restartBy: template`). */
export const ROLLOUT_BY_TEMPLATE: WorkloadDescriptor = argoRollout('template');

const withoutRestartedAt = (annotations: Record<string, string>) =>
  Object.fromEntries(Object.entries(annotations).filter(([k]) => k !== ANNOTATIONS.restartedAt));

/** Operators' custom resources: the route's merge-patch template, with the record in metadata annotations. */
export function resourceDescriptor(
  apiVersion: string,
  kind: string,
  template: Record<string, unknown>,
  wait?: WaitCondition,
): WorkloadDescriptor {
  return {
    apiVersion,
    kind,
    patchStrategy: PatchStrategy.MergePatch,
    recordedAnnotations: (obj) => obj.metadata?.annotations,
    restartPatch: ({ annotations }) => {
      const metadata = (template.metadata ?? {}) as Record<string, unknown>;
      return {
        ...template,
        metadata: {
          ...metadata,
          annotations: { ...((metadata.annotations ?? {}) as object), ...withoutRestartedAt(annotations) },
        },
      };
    },
    refusal: () => undefined,
    // Without a condition to wait for, an operator's resource says nothing vault-rollout could read as done.
    health: wait
      ? conditionHealth(wait)
      : nothingToWaitFor(
          `${kind} has no readiness rule: name a status condition in the route (wait: { condition: Ready })`,
        ),
  };
}
