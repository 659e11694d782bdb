/**
 * `vault-rollout status`, reading the listings: which LISTs status needs, and from what the clusters answered, the
 * objects a target names, their records, their halt Events and when their restart began. No network: the LISTs are
 * made elsewhere (lib/kube/fleet-reader.ts).
 */
import type { ConsumersRolloutTarget, RolloutTarget } from '../plan/planner.ts';
import { PatternIndex } from '../routing/path-pattern.ts';
import { isConsumersTarget, isResourceTarget, isSyncTarget, type RoutingTable } from '../routing/routing-table.ts';
import { WorkloadKinds } from '../routing/target-schema.ts';
import { placeholders } from '../routing/template.ts';
import { FIELD_MANAGER } from '../workloads/kube-port.ts';
import {
  ANNOTATIONS,
  EVENT_REPORTER,
  HALT_EVENT_REASON,
  haltEventName,
  parseWatchAnnotation,
  readRecord,
  recordedSkips,
  type KeySkip,
  type RecordedSkips,
  type RecordedVersions,
} from '../plan/restart-record.ts';
import { parseLabelSelector, selectorMatches } from '../workloads/label-selector.ts';
import { consumersAmong, type ConsumedObject } from '../workloads/consumers.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import {
  resourceDescriptor,
  WORKLOAD_KINDS,
  type KubeObject,
  type WorkloadDescriptor,
} from '../workloads/workload-kinds.ts';
import { listKey, type ClusterListing, type ListRequest } from './model.ts';
import { isPodList, podListsFor } from './pod-lists.ts';
import { recordedValue } from './running-pods.ts';

/**
 * A halted rotation is found where a wave's gate leaves it: a Warning `RotationHalted` Event on the workload that
 * failed the gate, named from the workload and its restart token (haltEventName in lib/plan/restart-record.ts), so
 * the Event of the restart the workload records now is found by name among one LIST of Events per namespace. An
 * identity that may not list Events (the vault-rollout role only creates them) cannot see halts: status says so.
 *
 * Anyone who may create Events in a namespace can create one with that name, so only an Event that names the
 * workload as its involved object and carries vault-rollout's identity (fromVaultRollout) counts. Every one of those
 * fields is set by the client that creates the Event: a tenant who forges all of them on purpose can still make
 * status withhold "safe to revoke" for a workload of its own namespace (never grant it). The halt state in
 * vault-rollout's own store is the record no tenant writes.
 */
export const EVENTS: ListRequest = { apiVersion: 'v1', kind: 'Event', namespace: '' };

export const clustersOf = (table: RoutingTable, only: ReadonlySet<string> | undefined, clusters: readonly string[]) =>
  clusters.filter((c) => !only || only.size === 0 || only.has(c));

/** Every LIST status needs: per cluster, each kind and namespace the routes target (all namespaces when templated). */
export function listRequests(table: RoutingTable, only?: ReadonlySet<string>): Map<string, ListRequest[]> {
  const byCluster = new Map<string, Map<string, ListRequest>>();
  for (const route of table.routes) {
    for (const { target, clusters, namespaces } of route.targets) {
      let kinds: Array<{ apiVersion: string; kind: string }>;
      let template: string | undefined;
      if (isResourceTarget(target)) {
        kinds = [{ apiVersion: target.resource.apiVersion, kind: target.resource.kind }];
        template = target.resource.namespace;
      } else if (isSyncTarget(target) || isConsumersTarget(target)) {
        // The consumers are found among every restartable kind of the namespace; a sync target records on its resource
        // too.
        kinds = WorkloadKinds.map((k) => ({ apiVersion: WORKLOAD_KINDS[k].apiVersion, kind: k }));
        if (isSyncTarget(target))
          kinds.push({ apiVersion: SYNC_KINDS[target.sync.kind].apiVersion, kind: target.sync.kind });
        template = target.namespace;
      } else {
        kinds = [{ apiVersion: WORKLOAD_KINDS[target.kind].apiVersion, kind: target.kind }];
        template = target.namespace;
      }
      let ns: string[];
      if (template === undefined) ns = [''];
      else if (placeholders(template).length === 0) ns = [template];
      // Rendered from the path: the bound's names when it lists only names, else every namespace.
      else if (namespaces && namespaces.globs.every((g) => g.kind === 'literal'))
        ns = namespaces.globs.map((g) => g.source);
      else ns = [''];
      for (const cluster of clustersOf(table, only, clusters)) {
        let lists = byCluster.get(cluster);
        if (!lists) byCluster.set(cluster, (lists = new Map()));
        for (const namespace of ns)
          for (const request of [
            ...kinds.map((k) => ({ ...k, namespace })),
            { ...EVENTS, namespace },
            ...podListsFor(kinds, namespace),
          ])
            lists.set(listKey(request), request);
      }
    }
  }
  // A LIST of every namespace covers the named ones of the same kind.
  const out = new Map<string, ListRequest[]>();
  for (const [cluster, lists] of [...byCluster].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const all = [...lists.values()];
    out.set(
      cluster,
      all.filter((r) => r.namespace === '' || !lists.has(listKey({ ...r, namespace: '' }))),
    );
  }
  return out;
}

/** The objects of a kind in a namespace, from whichever LIST holds them. */
export function objectsOf(
  listing: ClusterListing,
  apiVersion: string,
  kind: string,
  namespace: string,
): KubeObject[] | { error: string } | undefined {
  const exact = listing.lists.get(listKey({ apiVersion, kind, namespace }));
  if (exact !== undefined) return exact;
  const all = listing.lists.get(listKey({ apiVersion, kind, namespace: '' }));
  if (all === undefined || 'error' in all) return all;
  return all.filter((o) => (o.metadata?.namespace ?? '') === namespace);
}

/**
 * The objects a consumers target stands for: the operator's resource it nudges (which records the versions too) and
 * every workload whose pod template references the Secret or SecretProviderClass, found among the listed ones.
 */
export function consumerObjects(
  target: ConsumersRolloutTarget,
  listing: ClusterListing,
): Array<{ descriptor: WorkloadDescriptor; obj: KubeObject }> | { error: string } {
  const out: Array<{ descriptor: WorkloadDescriptor; obj: KubeObject }> = [];
  let consumed: ConsumedObject;
  if (isSyncKind(target.kind)) {
    const sync = SYNC_KINDS[target.kind];
    const objects = objectsOf(listing, sync.apiVersion, sync.kind, target.namespace);
    if (objects === undefined || 'error' in objects) return { error: objects?.error ?? 'not listed' };
    const resource = objects.find((o) => o.metadata?.name === target.name);
    if (!resource) return out;
    out.push({ descriptor: sync, obj: resource });
    if (target.restart === 'none') return out;
    consumed = { secret: sync.secretName(resource) };
  } else consumed = target.kind === 'Secret' ? { secret: target.name } : { secretProviderClass: target.name };
  for (const kind of WorkloadKinds) {
    const objects = objectsOf(listing, WORKLOAD_KINDS[kind].apiVersion, kind, target.namespace);
    if (objects === undefined || 'error' in objects) continue;
    for (const c of consumersAmong(kind, objects, consumed))
      out.push({ descriptor: WORKLOAD_KINDS[kind], obj: c.object });
  }
  return out;
}

/**
 * The descriptor of a listed object: its kind's, or a custom resource's (the listings hold only kinds routes restart).
 */
export function descriptorOfListed(obj: KubeObject): WorkloadDescriptor {
  if (obj.kind && obj.kind in WORKLOAD_KINDS) return WORKLOAD_KINDS[obj.kind as keyof typeof WORKLOAD_KINDS];
  if (obj.kind && isSyncKind(obj.kind)) return SYNC_KINDS[obj.kind];
  return resourceDescriptor(obj.apiVersion ?? '', obj.kind ?? '', {});
}

export const isEventList = (key: string): boolean => key.startsWith(`${EVENTS.apiVersion}/${EVENTS.kind}/`);

/** A LIST of Events, pods or revisions: what status reads beside the workloads, never for their records. */
export const isSideList = (key: string): boolean => isEventList(key) || isPodList(key);

/** The record of a listed object (readRecord: where vault-rollout writes it, restarts and reconcile's alike). */
export const parsedRecords = new WeakMap<KubeObject, RecordedVersions>();
export function recordOf(descriptor: WorkloadDescriptor, obj: KubeObject): RecordedVersions {
  // Parsed once per object: every path asks every listed object.
  let versions = parsedRecords.get(obj);
  if (!versions) parsedRecords.set(obj, (versions = readRecord(descriptor, obj)));
  return versions;
}

const parsedSkips = new WeakMap<KubeObject, RecordedSkips>();
/** The key-level skip a listed object records for a path (restart-record.ts KeySkip), if any. */
export function skipOf(obj: KubeObject, path: string): KeySkip | undefined {
  let skips = parsedSkips.get(obj);
  if (!skips) parsedSkips.set(obj, (skips = recordedSkips(obj)));
  return skips[path];
}

/** The newest version the object records for the path as running (recordedValue), or null. */
export function recordedFor(descriptor: WorkloadDescriptor, obj: KubeObject, path: string): number | string | null {
  return recordedValue(recordOf(descriptor, obj), path) ?? null;
}

interface EventFields {
  involvedObject?: { name?: string };
  source?: { component?: string };
  reportingComponent?: string;
  reportingInstance?: string;
  metadata?: { managedFields?: Array<{ manager?: string }> };
}

/**
 * The Event is about the workload by name (in the namespace listed). Not by kind: a consumers target's halt names its
 * failing workload under the target's kind (recordHalt's descriptor), which may be the operator resource's.
 */
export const involves = (event: KubeObject, name: string): boolean =>
  (event as EventFields).involvedObject?.name === name;

/**
 * An Event vault-rollout created: its source, reporting component and instance are vault-rollout's (EVENT_REPORTER,
 * as the executor writes them) and the API server recorded vault-rollout's field manager creating it. A tenant's
 * `kubectl create` of a look-alike carries none of them by accident (see the residual above).
 */
export function fromVaultRollout(event: KubeObject): boolean {
  const e = event as EventFields;
  return (
    e.source?.component === EVENT_REPORTER &&
    e.reportingComponent === EVENT_REPORTER &&
    e.reportingInstance === EVENT_REPORTER &&
    (e.metadata?.managedFields ?? []).some((f) => f.manager === FIELD_MANAGER)
  );
}

export function haltedReason(
  descriptor: WorkloadDescriptor,
  obj: KubeObject,
  listing: ClusterListing | undefined,
): string | undefined {
  const token = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartToken];
  const name = obj.metadata?.name;
  if (!listing || token === undefined || name === undefined) return undefined;
  const events = objectsOf(listing, EVENTS.apiVersion, EVENTS.kind, obj.metadata?.namespace ?? '');
  if (events === undefined || 'error' in events) return undefined;
  const event = events.find(
    (e) =>
      e.metadata?.name === haltEventName(name, token) &&
      (e as { reason?: string }).reason === HALT_EVENT_REASON &&
      involves(e, name) &&
      fromVaultRollout(e),
  );
  if (!event) return undefined;
  return String((event as { message?: unknown }).message ?? 'halted').slice(0, 300) || 'halted';
}

/** When the restart of this object began, from its record (the follower's deadline counts from it). */
export function restartedAt(descriptor: WorkloadDescriptor, obj: KubeObject): number | undefined {
  const recorded = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartedAt];
  // A Rollout restarts by spec.restartAt, or (restartBy: template) by its pod template's annotation: the later one.
  const template = (obj.spec?.template as { metadata?: { annotations?: Record<string, string> } } | undefined)?.metadata
    ?.annotations?.[ANNOTATIONS.restartedAt];
  const times = (obj.kind === 'Rollout' ? [obj.spec?.restartAt as string | undefined, template] : [recorded])
    .map((at) => (at === undefined ? NaN : Date.parse(at)))
    .filter((ms) => !Number.isNaN(ms));
  return times.length === 0 ? undefined : Math.max(...times);
}

/** The objects a planned target names, among those listed. */
export function targetObjects(
  target: Exclude<RolloutTarget, ConsumersRolloutTarget>,
  objects: readonly KubeObject[],
): KubeObject[] {
  if (target.type === 'resource' || target.name !== undefined)
    return objects.filter((o) => o.metadata?.name === target.name);
  if (target.selector !== undefined) {
    const selector = parseLabelSelector(target.selector);
    return objects.filter((o) => selectorMatches(selector, o.metadata?.labels));
  }
  return objects.filter((o) => {
    const index = new PatternIndex();
    parseWatchAnnotation(o.metadata?.annotations?.[ANNOTATIONS.watch]).patterns.forEach((p, i) => index.add(i, p));
    return target.paths.some((p) => index.match(p).size > 0);
  });
}
