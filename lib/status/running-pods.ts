/**
 * "Safe to revoke" counted in pods: per workload, the pods running now on a revision whose pod template records the
 * version the workload records for the path, and the older ones still running. A workload's own status can say
 * complete while an old pod still runs the old credential: a StatefulSet with `OnDelete` (its pods change only when
 * deleted), an old pod stuck terminating behind a finalizer (no longer counted in its ReplicaSet's status), a
 * paused rollout. Only zero older pods is safe.
 *
 * Which revision a pod runs comes from metadata alone: its controller's ownerReference and the label its controller
 * sets (`pod-template-hash`, `controller-revision-hash`, `rollouts-pod-template-hash`), then the ReplicaSet's or
 * ControllerRevision's pod template annotations, where a restart wrote vault-rollout's record. An Argo Rollout
 * restarted by `spec.restartAt` keeps its revision: its pods created before that time are the older ones.
 */
import { ANNOTATIONS, parseRecordedVersions, type RecordedVersions } from '../plan/restart-record.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import type { ClusterListing, RunningPods } from './model.ts';
import { podListOf, POD_SOURCES } from './pod-lists.ts';

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});

interface OwnerReference {
  kind?: string;
  name?: string;
  uid?: string;
  controller?: boolean;
}

/** The controller that owns an object (the ownerReference marked controller), if any. */
function controllerOf(obj: KubeObject): OwnerReference | undefined {
  const refs = (obj.metadata as { ownerReferences?: unknown } | undefined)?.ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  return (refs as OwnerReference[]).find((r) => rec(r).controller === true);
}

const ownedBy = (obj: KubeObject, owner: KubeObject): boolean => {
  const ref = controllerOf(obj);
  if (ref?.kind !== owner.kind || ref?.name !== owner.metadata?.name) return false;
  const uid = owner.metadata?.uid;
  return uid === undefined || ref?.uid === undefined || ref.uid === uid;
};

/**
 * The newest of the path's record keys that mean "this version is running": writes and undeletes. An undelete records
 * its `time#id` (restart-record.ts recordValue), which names no version: it counts only when no write is recorded.
 */
export function recordedValue(versions: RecordedVersions, path: string): number | string | undefined {
  const undelete = versions[`${path}#undelete`];
  const values = [
    versions[path],
    typeof undelete === 'number' || versions[path] === undefined ? undelete : undefined,
  ].filter((v): v is number | string => v !== undefined);
  if (values.length === 0) return undefined;
  return values.reduce((a, b) =>
    typeof a === 'number' && typeof b === 'number' ? Math.max(a, b) : String(b) > String(a) ? b : a,
  );
}

/** The pod template annotations of a revision: a ReplicaSet's template, or a ControllerRevision's data. */
function revisionAnnotations(revision: KubeObject): Record<string, string> | undefined {
  const template =
    revision.kind === 'ControllerRevision'
      ? rec(rec(rec((revision as { data?: unknown }).data).spec).template)
      : undefined;
  const t = template ?? rec(rec(revision.spec).template);
  return rec(t.metadata).annotations as Record<string, string> | undefined;
}

const isNewer = (a: number | string, b: number | string): boolean =>
  typeof a === 'number' && typeof b === 'number' ? a > b : String(a) > String(b);

/** A pod still running or about to: not Succeeded or Failed (a terminating pod still runs until it is gone). */
const running = (pod: KubeObject): boolean => !['Succeeded', 'Failed'].includes(String(rec(pod.status).phase ?? ''));

/**
 * A LIST indexed by controller (`namespace/kind/name` of the ownerReference marked controller), built once per
 * listed array: every consumer of every path looks its pods up, so counting stays linear in the pods listed.
 */
const indexes = new WeakMap<readonly KubeObject[], Map<string, KubeObject[]>>();
function byController(objects: readonly KubeObject[], key: string): KubeObject[] {
  let index = indexes.get(objects);
  if (!index) {
    index = new Map();
    for (const o of objects) {
      const ref = controllerOf(o);
      if (ref?.kind === undefined || ref.name === undefined) continue;
      const k = `${o.metadata?.namespace ?? ''}/${ref.kind}/${ref.name}`;
      const found = index.get(k);
      if (found) found.push(o);
      else index.set(k, [o]);
    }
    indexes.set(objects, index);
  }
  return index.get(key) ?? [];
}

/** The workload's running pods, each with the revision it runs (undefined: not among the workload's own). */
function podsWithRevisions(
  workload: KubeObject,
  pods: readonly KubeObject[],
  revisions: readonly KubeObject[],
): Array<[KubeObject, KubeObject | undefined]> {
  const namespace = workload.metadata?.namespace ?? '';
  const name = workload.metadata?.name ?? '';
  const own = byController(revisions, `${namespace}/${workload.kind}/${name}`).filter((r) => ownedBy(r, workload));
  if (workload.kind === 'StatefulSet' || workload.kind === 'DaemonSet') {
    const ofPod = (pod: KubeObject) => {
      const hash = pod.metadata?.labels?.['controller-revision-hash'];
      return own.find((r) => r.metadata?.name === hash || r.metadata?.name === `${name}-${hash}`);
    };
    return byController(pods, `${namespace}/${workload.kind}/${name}`)
      .filter((p) => running(p) && ownedBy(p, workload))
      .map((p) => [p, ofPod(p)]);
  }
  return own.flatMap((r) =>
    byController(pods, `${namespace}/ReplicaSet/${r.metadata?.name ?? ''}`)
      .filter(running)
      .map((p): [KubeObject, KubeObject] => [p, r]),
  );
}

/**
 * The pods of one workload, counted by whether they run the version the workload records for the path. Undefined
 * for kinds without pods of their own, or when status did not list them (a listing built without those LISTs).
 */
export function runningPods(
  descriptor: WorkloadDescriptor,
  workload: KubeObject,
  listing: ClusterListing | undefined,
  path: string,
): RunningPods | undefined {
  const sources = POD_SOURCES[workload.kind ?? ''];
  if (!sources || !listing) return undefined;
  const namespace = workload.metadata?.namespace ?? '';
  const pods = podListOf(listing, sources.pods, namespace);
  const revisions = podListOf(listing, sources.revisions, namespace);
  // Indexed by namespace too: a LIST of every namespace is indexed once, whatever namespace asks.
  if (pods === undefined || revisions === undefined) return undefined;
  const unread = [pods, revisions].find((l): l is { error: string } => 'error' in l);
  if (unread || 'error' in pods || 'error' in revisions)
    return { onRecorded: 0, older: 0, unread: unread?.error ?? 'not listed' };
  // Rollouts keep the record on their metadata; the template's record is a template restart's (restart: template).
  const templateRecord =
    workload.kind === 'Rollout'
      ? rec(rec(rec(workload.spec).template).metadata).annotations
      : descriptor.recordedAnnotations(workload);
  const wanted = recordedValue(
    parseRecordedVersions((templateRecord as Record<string, string> | undefined)?.[ANNOTATIONS.versions]),
    path,
  );
  const restartAt = workload.kind === 'Rollout' ? Date.parse(String(rec(workload.spec).restartAt ?? '')) : NaN;
  const counts: RunningPods = { onRecorded: 0, older: 0 };
  for (const [pod, revision] of podsWithRevisions(workload, pods, revisions)) {
    const has = revision
      ? recordedValue(parseRecordedVersions(revisionAnnotations(revision)?.[ANNOTATIONS.versions]), path)
      : undefined;
    const created = Date.parse(String((pod.metadata as { creationTimestamp?: string } | undefined)?.creationTimestamp));
    const olderRevision =
      revision === undefined || (wanted !== undefined && (has === undefined || isNewer(wanted, has)));
    // Creation times have whole seconds; restartAt is never in the future, so a pod of that second counts as new.
    const beforeRestart = !Number.isNaN(restartAt) && created < Math.floor(restartAt / 1000) * 1000;
    if (olderRevision || beforeRestart) counts.older++;
    else counts.onRecorded++;
  }
  return counts;
}
