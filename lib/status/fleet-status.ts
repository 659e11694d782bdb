/**
 * `vault-rollout status`, the pure part: from the routing table, what each cluster recorded (one LIST per kind and
 * namespace, read elsewhere) and Vault's current versions when it could be read, per path: who consumes it, which
 * version each consumer records, where its rollout stands. No clock but the one passed in, no network.
 *
 * Consumers of a path are the workloads the routing table would restart for it now (the plan of a write of the
 * path, matched against the listed objects: by name, by label selector, or by watch annotation), plus any other
 * listed workload that records the path (shown, not counted: no route targets it any more).
 *
 * What "current" means: Vault's current_version when Vault answered; otherwise the newest version any consumer
 * records (all that the clusters can say). KV v1 has no versions: the records hold change times, and status can
 * only compare those; neither status nor reconcile can see what Vault holds.
 */
import { descriptorOf } from '../plan/target-descriptor.ts';
import { planRollouts, type ConsumersRolloutTarget, type RolloutTarget } from '../plan/planner.ts';
import { compilePattern, PatternIndex, type CompiledPattern } from '../routing/path-pattern.ts';
import { isConsumersTarget, isResourceTarget, isSyncTarget, rolloutTimeoutMs, type RoutingTable } from '../routing/routing-table.ts';
import { WorkloadKinds } from '../routing/schema.ts';
import { placeholders } from '../routing/template.ts';
import { findMount, guessMount, underMount } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { FIELD_MANAGER } from '../workloads/kube-port.ts';
import { ANNOTATIONS, EVENT_REPORTER, HALT_EVENT_REASON, haltEventName, parseWatchAnnotation, readRecord, type RecordedVersions } from '../plan/restart-record.ts';
import { parseLabelSelector, selectorMatches } from '../workloads/label-selector.ts';
import { consumersAmong, type ConsumedObject } from '../workloads/consumers.ts';
import type { PodCounts, RolloutState } from '../workloads/rollout-health.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { resourceDescriptor, WORKLOAD_KINDS, type KubeObject, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';

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
const EVENTS: ListRequest = { apiVersion: 'v1', kind: 'Event', namespace: '' };

/** One LIST: a kind in a namespace ('' = every namespace) of one cluster. */
export interface ListRequest {
  apiVersion: string;
  kind: string;
  namespace: string;
}

export const listKey = (r: ListRequest): string => `${r.apiVersion}/${r.kind}/${r.namespace}`;

/** What one cluster answered: the objects per LIST, or why it could not be read. */
export interface ClusterListing {
  cluster: string;
  lists: Map<string, KubeObject[] | { error: string }>;
  error?: string;
}

export interface VaultVersion {
  currentVersion: number;
  /** created_time of the current version. */
  createdTime?: string;
  /** The current version was deleted or destroyed. */
  gone?: 'deleted' | 'destroyed';
}

export type VaultAnswer = VaultVersion | { error: string } | { absent: true };

export const ConsumerStates = ['current', 'behind', 'poisoned', 'unknown'] as const;
export type ConsumerState = (typeof ConsumerStates)[number];

export interface ConsumerStatus {
  cluster: string;
  namespace: string;
  kind: string;
  name: string;
  /** The version (or, KV v1, the change time) recorded for the path; null when none. */
  recorded: number | string | null;
  state: ConsumerState;
  rollout: RolloutState;
  pods?: PodCounts;
  /** Why a wave halted on it, when one did. */
  halted?: string;
  /** A route targets it now; false: it only records the path (shown, not counted). */
  routed: boolean;
  /** Current, rolled out and not halted. */
  ok: boolean;
  detail: string;
}

export interface PathStatus {
  /** Namespace-qualified `mount/key`, as the record keys it. */
  path: string;
  vaultNamespace: string;
  mount: string;
  key: string;
  kvVersion: 1 | 2;
  /** What current means for this path, and where it comes from. */
  current: number | string | null;
  currentFrom: 'vault' | 'records' | 'none';
  vault?: VaultAnswer;
  consumers: ConsumerStatus[];
  notes: string[];
  ok: boolean;
}

export interface FleetStatus {
  paths: PathStatus[];
  /** Clusters or lists that could not be read, per cluster. */
  unreadable: Array<{ cluster: string; error: string }>;
  /** Paths left out by the bound, and other warnings. */
  notes: string[];
  ok: boolean;
}

export interface StatusOptions {
  /** Only paths matching this pattern (route pattern syntax, namespace-qualified). */
  path?: string;
  /** Only these clusters. */
  clusters?: ReadonlySet<string>;
  /** At most this many paths (default 10,000); the rest are named as left out. */
  maxPaths?: number;
}

export const DEFAULT_MAX_PATHS = 10_000;

const clustersOf = (table: RoutingTable, only: ReadonlySet<string> | undefined, clusters: readonly string[]) => clusters.filter((c) => !only || only.size === 0 || only.has(c));

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
        // The consumers are found among every restartable kind of the namespace; a sync target records on its resource too.
        kinds = WorkloadKinds.map((k) => ({ apiVersion: WORKLOAD_KINDS[k].apiVersion, kind: k }));
        if (isSyncTarget(target)) kinds.push({ apiVersion: SYNC_KINDS[target.sync.kind].apiVersion, kind: target.sync.kind });
        template = target.namespace;
      } else {
        kinds = [{ apiVersion: WORKLOAD_KINDS[target.kind].apiVersion, kind: target.kind }];
        template = target.namespace;
      }
      let ns: string[];
      if (template === undefined) ns = [''];
      else if (placeholders(template).length === 0) ns = [template];
      // Rendered from the path: the bound's names when it lists only names, else every namespace.
      else if (namespaces && namespaces.globs.every((g) => g.kind === 'literal')) ns = namespaces.globs.map((g) => g.source);
      else ns = [''];
      for (const cluster of clustersOf(table, only, clusters)) {
        let lists = byCluster.get(cluster);
        if (!lists) byCluster.set(cluster, (lists = new Map()));
        for (const namespace of ns) for (const kind of [...kinds, EVENTS]) lists.set(listKey({ ...kind, namespace }), { ...kind, namespace });
      }
    }
  }
  // A LIST of every namespace covers the named ones of the same kind.
  const out = new Map<string, ListRequest[]>();
  for (const [cluster, lists] of [...byCluster].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const all = [...lists.values()];
    out.set(cluster, all.filter((r) => r.namespace === '' || !lists.has(listKey({ ...r, namespace: '' }))));
  }
  return out;
}

/** The objects of a kind in a namespace, from whichever LIST holds them. */
function objectsOf(listing: ClusterListing, apiVersion: string, kind: string, namespace: string): KubeObject[] | { error: string } | undefined {
  const exact = listing.lists.get(listKey({ apiVersion, kind, namespace }));
  if (exact !== undefined) return exact;
  const all = listing.lists.get(listKey({ apiVersion, kind, namespace: '' }));
  if (all === undefined || 'error' in all) return all;
  return all.filter((o) => (o.metadata?.namespace ?? '') === namespace);
}

/** The Vault namespace, mount and key of a record key (`ns/mount/key`), using the table's namespaces and mounts. */
export function splitRecordedPath(table: RoutingTable, qualified: string): { vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 } | undefined {
  const namespaces = [...table.index.keys()].filter((n) => n === '' || qualified.startsWith(`${n}/`)).sort((a, b) => b.length - a.length);
  for (const vaultNamespace of namespaces) {
    const path = vaultNamespace === '' ? qualified : qualified.slice(vaultNamespace.length + 1);
    const found = findMount(table.mounts, vaultNamespace, path);
    const mount = found?.mount ?? guessMount(table.mounts, vaultNamespace, path);
    const key = underMount(path, mount);
    if (!key) continue;
    return { vaultNamespace, mount, key, kvVersion: found?.kvVersion ?? 2 };
  }
  return undefined;
}

/** The change status asks the planner about: a write of the path at its current version. */
function probeChange(p: { vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 }, version: number | null): SecretChange {
  return { namespace: p.vaultNamespace, mount: p.mount, key: p.key, path: `${p.mount}/${p.key}`, operation: 'write', version, kvVersion: p.kvVersion, kvVersionFrom: 'routes', source: 'audit', via: 'direct', id: 'status', time: '', record: 'status' };
}

/**
 * The objects a consumers target stands for: the operator's resource it nudges (which records the versions too) and
 * every workload whose pod template references the Secret or SecretProviderClass, found among the listed ones.
 */
function consumerObjects(target: ConsumersRolloutTarget, listing: ClusterListing): Array<{ descriptor: WorkloadDescriptor; obj: KubeObject }> | { error: string } {
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
    for (const c of consumersAmong(kind, objects, consumed)) out.push({ descriptor: WORKLOAD_KINDS[kind], obj: c.object });
  }
  return out;
}

/** The descriptor of a listed object: its kind's, or a custom resource's (the listings hold only kinds routes restart). */
function descriptorOfListed(obj: KubeObject): WorkloadDescriptor {
  if (obj.kind && obj.kind in WORKLOAD_KINDS) return WORKLOAD_KINDS[obj.kind as keyof typeof WORKLOAD_KINDS];
  if (obj.kind && isSyncKind(obj.kind)) return SYNC_KINDS[obj.kind];
  return resourceDescriptor(obj.apiVersion ?? '', obj.kind ?? '', {});
}

const isEventList = (key: string): boolean => key.startsWith(`${EVENTS.apiVersion}/${EVENTS.kind}/`);

/** The record of a listed object (readRecord: where vault-rollout writes it, restarts and reconcile's alike). */
const parsedRecords = new WeakMap<KubeObject, RecordedVersions>();
function recordOf(descriptor: WorkloadDescriptor, obj: KubeObject): RecordedVersions {
  // Parsed once per object: every path asks every listed object.
  let versions = parsedRecords.get(obj);
  if (!versions) parsedRecords.set(obj, (versions = readRecord(descriptor, obj)));
  return versions;
}

/** The newest of the path's record keys that mean "this version is running": writes and undeletes. */
function recordedFor(descriptor: WorkloadDescriptor, obj: KubeObject, path: string): number | string | null {
  const versions = recordOf(descriptor, obj);
  const values = [versions[path], versions[`${path}#undelete`]].filter((v): v is number | string => v !== undefined);
  if (values.length === 0) return null;
  return values.reduce((a, b) => (typeof a === 'number' && typeof b === 'number' ? Math.max(a, b) : String(b) > String(a) ? b : a));
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
const involves = (event: KubeObject, name: string): boolean => (event as EventFields).involvedObject?.name === name;

/**
 * An Event vault-rollout created: its source, reporting component and instance are vault-rollout's (EVENT_REPORTER,
 * as the executor writes them) and the API server recorded vault-rollout's field manager creating it. A tenant's
 * `kubectl create` of a look-alike carries none of them by accident (see the residual above).
 */
export function fromVaultRollout(event: KubeObject): boolean {
  const e = event as EventFields;
  return e.source?.component === EVENT_REPORTER && e.reportingComponent === EVENT_REPORTER && e.reportingInstance === EVENT_REPORTER && (e.metadata?.managedFields ?? []).some((f) => f.manager === FIELD_MANAGER);
}

function haltedReason(descriptor: WorkloadDescriptor, obj: KubeObject, listing: ClusterListing | undefined): string | undefined {
  const token = descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartToken];
  const name = obj.metadata?.name;
  if (!listing || token === undefined || name === undefined) return undefined;
  const events = objectsOf(listing, EVENTS.apiVersion, EVENTS.kind, obj.metadata?.namespace ?? '');
  if (events === undefined || 'error' in events) return undefined;
  const event = events.find((e) => e.metadata?.name === haltEventName(name, token) && (e as { reason?: string }).reason === HALT_EVENT_REASON && involves(e, name) && fromVaultRollout(e));
  if (!event) return undefined;
  return String((event as { message?: unknown }).message ?? 'halted').slice(0, 300) || 'halted';
}

/** When the restart of this object began, from its record (the follower's deadline counts from it). */
function restartedAt(descriptor: WorkloadDescriptor, obj: KubeObject): number | undefined {
  const at = obj.kind === 'Rollout' ? (obj.spec?.restartAt as string | undefined) : descriptor.recordedAnnotations(obj)?.[ANNOTATIONS.restartedAt];
  const ms = at === undefined ? NaN : Date.parse(at);
  return Number.isNaN(ms) ? undefined : ms;
}

const isNewer = (a: number | string, b: number | string): boolean => (typeof a === 'number' && typeof b === 'number' ? a > b : String(a) > String(b));

function consumerStatus(table: RoutingTable, cluster: string, routes: readonly string[], descriptor: WorkloadDescriptor, obj: KubeObject, path: string, current: number | string | null, fromVault: boolean, routed: boolean, now: number, listing: ClusterListing | undefined): ConsumerStatus {
  const recorded = recordedFor(descriptor, obj, path);
  const health = descriptor.health(obj);
  let rollout: RolloutState = health.state;
  let detail = health.message;
  if (rollout === 'progressing') {
    const since = restartedAt(descriptor, obj);
    const deadline = rolloutTimeoutMs(table, cluster, routes);
    if (since !== undefined && now - since > deadline) {
      rollout = 'timeout';
      detail = `still progressing ${Math.round((now - since) / 60_000)} min after its restart (deadline ${Math.round(deadline / 60_000)} min): ${health.message}`;
    }
  }
  let state: ConsumerState;
  if (current === null) state = recorded === null ? 'unknown' : 'current';
  else if (recorded === null) state = 'behind';
  else if (fromVault && typeof recorded === 'number' && typeof current === 'number' && recorded > current) state = 'poisoned';
  else if (typeof recorded !== typeof current) state = 'behind';
  else state = isNewer(current, recorded) ? 'behind' : 'current';
  if (state === 'behind') detail = recorded === null ? 'never restarted for this path' : `records ${JSON.stringify(recorded)}, current is ${JSON.stringify(current)}`;
  if (state === 'poisoned') detail = `records version ${recorded}, above Vault's current_version ${current}: a forged or replayed change; repair with vault-rollout reset-version --path ${path} --version ${current}`;
  const halted = haltedReason(descriptor, obj, listing);
  const ok = state === 'current' && (rollout === 'complete' || rollout === 'none') && halted === undefined;
  return {
    cluster,
    namespace: obj.metadata?.namespace ?? '',
    kind: obj.kind ?? descriptor.kind,
    name: obj.metadata?.name ?? '',
    recorded,
    state,
    rollout,
    ...(health.pods ? { pods: health.pods } : {}),
    ...(halted !== undefined ? { halted } : {}),
    routed,
    ok,
    detail: halted !== undefined && state === 'current' ? `halted: ${halted}` : detail,
  };
}

/** The objects a planned target names, among those listed. */
function targetObjects(target: Exclude<RolloutTarget, ConsumersRolloutTarget>, objects: readonly KubeObject[]): KubeObject[] {
  if (target.type === 'resource' || target.name !== undefined) return objects.filter((o) => o.metadata?.name === target.name);
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

/**
 * The status of the selected paths. `vault` holds what Vault said per qualified path (absent from the map: not
 * asked, e.g. KV v1 or no --vault-addr).
 */
/**
 * The paths status reports: those recorded on any listed object that a route still matches, and a literal --path;
 * at most maxPaths of them, the rest named in `notes`.
 */
export function selectedPaths(table: RoutingTable, listings: readonly ClusterListing[], options: StatusOptions): { paths: Array<{ path: string; vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 }>; notes: string[] } {
  let filter: CompiledPattern | undefined;
  const literal = options.path?.replace(/^\/+/, '');
  if (literal !== undefined) filter = compilePattern(literal);
  const index = new PatternIndex();
  if (filter) index.add(0, filter);
  const found = new Set<string>();
  // Record keys only from the record of the kinds routes restart (readRecord), never from Events or other places.
  for (const listing of listings) {
    for (const [key, objects] of listing.lists) {
      if ('error' in objects || isEventList(key)) continue;
      for (const obj of objects) for (const recorded of Object.keys(recordOf(descriptorOfListed(obj), obj))) found.add(recorded.replace(/#[a-z]+$/, ''));
    }
  }
  if (filter && literal !== undefined && filter.segments.every((s) => s.kind === 'literal')) found.add(literal);
  const paths = [];
  // A key that is no Vault path (`..`, empty or control-character segments) is never asked about: Vault would be
  // asked for another path (lib/sources/vault-path.ts). Counted and named, escaped, in a note.
  let refused = 0;
  let example = '';
  for (const path of [...found].sort()) {
    if (filter && index.match(path).size === 0) continue;
    const problem = vaultPathProblem(path);
    if (problem !== undefined) {
      if (refused++ === 0) example = `${JSON.stringify(path.length > 120 ? `${path.slice(0, 120)}…` : path)}: ${problem}`;
      continue;
    }
    const parts = splitRecordedPath(table, path);
    if (!parts) continue;
    // Only paths a route matches: a record the table no longer routes is nobody's rotation.
    if (planRollouts(table, [probeChange(parts, null)]).routed[0]?.length === 0) continue;
    paths.push({ path, ...parts });
  }
  const maxPaths = options.maxPaths ?? DEFAULT_MAX_PATHS;
  const notes = paths.length > maxPaths ? [`${paths.length - maxPaths} more paths left out (at most ${maxPaths}; narrow with --path)`] : [];
  if (refused > 0) notes.push(`ignored ${refused} recorded key(s) that are no Vault path, e.g. ${example}`);
  return { paths: paths.slice(0, maxPaths), notes };
}

/**
 * The status of the selected paths. `vault` holds what Vault said per qualified path (absent from the map: not
 * asked, e.g. KV v1 or no --vault-addr).
 */
export function fleetStatus(table: RoutingTable, listings: readonly ClusterListing[], vault: ReadonlyMap<string, VaultAnswer>, options: StatusOptions & { now: number }): FleetStatus {
  const only = options.clusters;
  const { paths: candidates, notes } = selectedPaths(table, listings, options);
  const byCluster = new Map(listings.map((l) => [l.cluster, l]));
  const paths: PathStatus[] = [];
  for (const parts of candidates) {
    const { path } = parts;
    const answer = vault.get(path);
    const pathNotes: string[] = [];
    let current: number | string | null = null;
    let currentFrom: PathStatus['currentFrom'] = 'none';
    if (parts.kvVersion === 1) pathNotes.push('KV v1 keeps no versions: status (and reconcile) cannot see what Vault holds; the records compare the times of the changes seen');
    if (answer && 'currentVersion' in answer) {
      current = answer.currentVersion;
      currentFrom = 'vault';
      if (answer.gone) pathNotes.push(`Vault's current version ${answer.currentVersion} is ${answer.gone}`);
    } else if (answer && 'error' in answer) pathNotes.push(`Vault could not be read (so this path is not reported safe): ${answer.error}`);
    else if (answer && 'absent' in answer) pathNotes.push('Vault has no such key (deleted with its metadata, or not KV v2)');

    // Consumers: what the table targets now, then whatever else records the path.
    const plan = planRollouts(table, [probeChange(parts, typeof current === 'number' ? current : null)]);
    for (const p of plan.problems) pathNotes.push(`route ${p.route}: ${p.error}`);
    const seen = new Set<string>();
    const rows: Array<{ routes: string[]; cluster: string; descriptor: WorkloadDescriptor; obj: KubeObject; routed: boolean }> = [];
    const unread: ConsumerStatus[] = [];
    for (const target of plan.targets) {
      if (only && only.size > 0 && !only.has(target.cluster)) continue;
      const listing = byCluster.get(target.cluster);
      if (target.type === 'consumers') {
        const found = listing ? consumerObjects(target, listing) : { error: 'not listed' };
        if ('error' in found) {
          unread.push({ cluster: target.cluster, namespace: target.namespace, kind: target.kind, name: target.name, recorded: null, state: 'unknown', rollout: 'none', routed: true, ok: false, detail: `cannot read: ${listing?.error ?? found.error}` });
          continue;
        }
        for (const { descriptor, obj } of found) {
          const id = `${target.cluster}/${descriptor.apiVersion}/${descriptor.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
          if (seen.has(id)) continue;
          seen.add(id);
          rows.push({ routes: target.routes, cluster: target.cluster, descriptor, obj, routed: true });
        }
        continue;
      }
      const descriptor = descriptorOf(target);
      const objects = listing ? objectsOf(listing, descriptor.apiVersion, descriptor.kind, target.namespace) : undefined;
      if (objects === undefined || 'error' in objects) {
        const why = listing?.error ?? (objects && 'error' in objects ? objects.error : 'not listed');
        unread.push({ cluster: target.cluster, namespace: target.namespace, kind: descriptor.kind, name: target.type === 'resource' ? target.name : (target.name ?? '*'), recorded: null, state: 'unknown', rollout: 'none', routed: true, ok: false, detail: `cannot read: ${why}` });
        continue;
      }
      const matched = targetObjects(target, objects);
      if (matched.length === 0 && (target.type === 'resource' || target.name !== undefined)) {
        unread.push({ cluster: target.cluster, namespace: target.namespace, kind: descriptor.kind, name: target.type === 'resource' ? target.name : (target.name ?? ''), recorded: null, state: 'unknown', rollout: 'none', routed: true, ok: false, detail: 'not found in the cluster' });
      }
      for (const obj of matched) {
        const id = `${target.cluster}/${descriptor.apiVersion}/${descriptor.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
        if (seen.has(id)) continue;
        seen.add(id);
        rows.push({ routes: target.routes, cluster: target.cluster, descriptor, obj, routed: true });
      }
    }
    for (const listing of listings) {
      for (const [key, objects] of listing.lists) {
        if ('error' in objects || isEventList(key)) continue;
        for (const obj of objects) {
          const descriptor = descriptorOfListed(obj);
          const id = `${listing.cluster}/${descriptor.apiVersion}/${descriptor.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
          if (seen.has(id) || recordedFor(descriptor, obj, path) === null) continue;
          seen.add(id);
          rows.push({ routes: [], cluster: listing.cluster, descriptor, obj, routed: false });
        }
      }
    }
    if (current === null) {
      // Without Vault: the newest version a consumer records is the best the clusters can say.
      for (const r of rows) {
        const v = recordedFor(r.descriptor, r.obj, path);
        if (v !== null && (current === null || isNewer(v, current))) current = v;
      }
      if (current !== null) currentFrom = 'records';
    }
    const consumers = [
      ...rows.map((r) => consumerStatus(table, r.cluster, r.routes, r.descriptor, r.obj, path, current, currentFrom === 'vault', r.routed, options.now, byCluster.get(r.cluster))),
      ...unread,
    ].sort((a, b) => (a.cluster + a.namespace + a.kind + a.name < b.cluster + b.namespace + b.kind + b.name ? -1 : 1));
    const counted = consumers.filter((c) => c.routed);
    paths.push({ path, vaultNamespace: parts.vaultNamespace, mount: parts.mount, key: parts.key, kvVersion: parts.kvVersion, current, currentFrom, ...(answer ? { vault: answer } : {}), consumers, notes: pathNotes, ok: counted.every((c) => c.ok) && !(answer !== undefined && 'error' in answer) });
  }
  const unreadable = listings.flatMap((l) => [
    ...(l.error ? [{ cluster: l.cluster, error: l.error }] : []),
    ...[...l.lists.entries()].filter((e): e is [string, { error: string }] => 'error' in e[1]).map(([key, v]) => ({ cluster: l.cluster, error: `${key}: ${v.error}` })),
  ]);
  // An unreadable list may hide records of paths not found; a literal --path already shows its unread consumers.
  const literal = options.path !== undefined && compilePattern(options.path.replace(/^\/+/, '')).segments.every((s) => s.kind === 'literal');
  return { paths, unreadable, notes, ok: paths.every((p) => p.ok) && (literal || unreadable.length === 0) };
}
