/**
 * The consumers of one path for `vault-rollout status` (lib/status/fleet-status.ts), among the listed objects: what
 * the table targets now, each once, and the targets that could not be read; then whatever else records the path.
 */
import type { ConsumersRolloutTarget, Plan, RolloutTarget } from '../plan/planner.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import type { ConsumerRow } from './consumer-status.ts';
import { consumerObjects, descriptorOfListed, isSideList, objectsOf, recordedFor, targetObjects } from './listings.ts';
import type { ClusterListing, ConsumerStatus } from './model.ts';

/** The consumers found so far: each object once, and the targets that could not be read (as consumer lines). */
export interface PathConsumers {
  readonly rows: ConsumerRow[];
  readonly unread: ConsumerStatus[];
  readonly seen: Set<string>;
}

/** One row per object: an object targeted twice (or targeted and recording) is one consumer. */
function addRow(found: PathConsumers, row: ConsumerRow): void {
  const { cluster, descriptor, obj } = row;
  const id = `${cluster}/${descriptor.apiVersion}/${descriptor.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
  if (found.seen.has(id)) return;
  found.seen.add(id);
  found.rows.push(row);
}

/** A targeted consumer status cannot speak for: not readable, or not found. */
function unreadLine(target: RolloutTarget, kind: string, name: string, detail: string): ConsumerStatus {
  return {
    cluster: target.cluster,
    namespace: target.namespace,
    kind,
    name,
    recorded: null,
    state: 'unknown',
    rollout: 'none',
    routed: true,
    ok: false,
    detail,
  };
}

/** A consumers target: the operator's resource and the workloads that reference its Secret. */
function addConsumersTarget(
  found: PathConsumers,
  target: ConsumersRolloutTarget,
  listing: ClusterListing | undefined,
): void {
  const objects = listing ? consumerObjects(target, listing) : { error: 'not listed' };
  if ('error' in objects) {
    found.unread.push(unreadLine(target, target.kind, target.name, `cannot read: ${listing?.error ?? objects.error}`));
    return;
  }
  for (const { descriptor, obj } of objects)
    addRow(found, { routes: target.routes, cluster: target.cluster, descriptor, obj, routed: true });
}

/** A workload or resource target: the objects it names, selects or that opt in by annotation. */
function addNamedTarget(
  found: PathConsumers,
  target: Exclude<RolloutTarget, ConsumersRolloutTarget>,
  listing: ClusterListing | undefined,
): void {
  const descriptor = descriptorOf(target);
  const objects = listing ? objectsOf(listing, descriptor.apiVersion, descriptor.kind, target.namespace) : undefined;
  if (objects === undefined || 'error' in objects) {
    const why = listing?.error ?? (objects && 'error' in objects ? objects.error : 'not listed');
    const name = target.type === 'resource' ? target.name : (target.name ?? '*');
    found.unread.push(unreadLine(target, descriptor.kind, name, `cannot read: ${why}`));
    return;
  }
  const matched = targetObjects(target, objects);
  if (matched.length === 0 && (target.type === 'resource' || target.name !== undefined)) {
    const name = target.type === 'resource' ? target.name : (target.name ?? '');
    found.unread.push(unreadLine(target, descriptor.kind, name, 'not found in the cluster'));
  }
  for (const obj of matched)
    addRow(found, { routes: target.routes, cluster: target.cluster, descriptor, obj, routed: true });
}

/** Listed objects that record the path though no route targets them any more: shown, not counted. */
function addRecordingObjects(found: PathConsumers, listings: readonly ClusterListing[], path: string): void {
  for (const listing of listings) {
    for (const [key, objects] of listing.lists) {
      if ('error' in objects || isSideList(key)) continue;
      for (const obj of objects) {
        const descriptor = descriptorOfListed(obj);
        if (recordedFor(descriptor, obj, path) === null) continue;
        addRow(found, { routes: [], cluster: listing.cluster, descriptor, obj, routed: false });
      }
    }
  }
}

/** The consumers of a path: what the plan of a write of it targets now (in `only`'s clusters), then what records it. */
export function pathConsumers(
  plan: Plan,
  listings: readonly ClusterListing[],
  only: ReadonlySet<string> | undefined,
  path: string,
): PathConsumers {
  const found: PathConsumers = { rows: [], unread: [], seen: new Set() };
  const byCluster = new Map(listings.map((l) => [l.cluster, l]));
  for (const target of plan.targets) {
    if (only && only.size > 0 && !only.has(target.cluster)) continue;
    const listing = byCluster.get(target.cluster);
    if (target.type === 'consumers') addConsumersTarget(found, target, listing);
    else addNamedTarget(found, target, listing);
  }
  addRecordingObjects(found, listings, path);
  return found;
}
