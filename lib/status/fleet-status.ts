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
import { shellQuote } from '../kernel/shell-quote.ts';
import { descriptorOf } from '../plan/target-descriptor.ts';
import { planRollouts } from '../plan/planner.ts';
import { compilePattern, PatternIndex, type CompiledPattern } from '../routing/path-pattern.ts';
import { rolloutTimeoutMs, type RoutingTable } from '../routing/routing-table.ts';
import { findMount, guessMount, underMount } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import type { RolloutState } from '../workloads/rollout-health.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import {
  consumerObjects,
  descriptorOfListed,
  haltedReason,
  isEventList,
  objectsOf,
  recordedFor,
  recordOf,
  restartedAt,
  skipOf,
  targetObjects,
} from './listings.ts';
import type { KeySkip } from '../plan/restart-record.ts';
import {
  DEFAULT_MAX_PATHS,
  type ClusterListing,
  type ConsumerState,
  type ConsumerStatus,
  type FleetStatus,
  type PathStatus,
  type StatusOptions,
  type VaultAnswer,
} from './model.ts';

export * from './model.ts';
export { fromVaultRollout, listRequests } from './listings.ts';

/** The Vault namespace, mount and key of a record key (`ns/mount/key`), using the table's namespaces and mounts. */
export function splitRecordedPath(
  table: RoutingTable,
  qualified: string,
): { vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 } | undefined {
  const namespaces = [...table.index.keys()]
    .filter((n) => n === '' || qualified.startsWith(`${n}/`))
    .sort((a, b) => b.length - a.length);
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
export function probeChange(
  p: { vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 },
  version: number | null,
): SecretChange {
  return {
    namespace: p.vaultNamespace,
    mount: p.mount,
    key: p.key,
    path: `${p.mount}/${p.key}`,
    operation: 'write',
    version,
    kvVersion: p.kvVersion,
    kvVersionFrom: 'routes',
    source: 'audit',
    via: 'direct',
    id: 'status',
    time: '',
    record: 'status',
  };
}

const isNewer = (a: number | string, b: number | string): boolean =>
  typeof a === 'number' && typeof b === 'number' ? a > b : String(a) > String(b);

/** The repair a person pastes: the path one shell-quoted word; none for a key no Vault path could be. */
function resetVersionCommand(path: string, current: number | string | null): string {
  if (vaultPathProblem(path) !== undefined) return 'vault-rollout reset-version (the key is no Vault path)';
  return `vault-rollout reset-version --path ${shellQuote(path)} --version ${shellQuote(String(current))}`;
}

function consumerStatus(
  table: RoutingTable,
  cluster: string,
  routes: readonly string[],
  descriptor: WorkloadDescriptor,
  obj: KubeObject,
  path: string,
  current: number | string | null,
  fromVault: boolean,
  routed: boolean,
  now: number,
  listing: ClusterListing | undefined,
): ConsumerStatus {
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
  else if (fromVault && typeof recorded === 'number' && typeof current === 'number' && recorded > current)
    state = 'poisoned';
  else if (typeof recorded !== typeof current) state = 'behind';
  else state = isNewer(current, recorded) ? 'behind' : 'current';
  if (state === 'behind')
    detail =
      recorded === null
        ? 'never restarted for this path'
        : `records ${JSON.stringify(recorded)}, current is ${JSON.stringify(current)}`;
  if (state === 'poisoned') {
    detail =
      `records version ${recorded}, above Vault's current_version ${current}: a forged or replayed change; ` +
      `repair with ${resetVersionCommand(path, current)}`;
  }
  const skip = unverifiedSkip(skipOf(obj, path), recorded, fromVault ? current : null);
  if (skip && state !== 'poisoned') {
    state = 'behind';
    detail = `skipped by keys (unverified): keys ${skip.skipped.join(', ')} unchanged in v${skip.v}, as a change claimed; not safe to revoke until reconcile confirms v${skip.v} with Vault`;
  }
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
    ...(skip ? { skippedByKeys: skip } : {}),
    routed,
    ok,
    detail: halted !== undefined && state === 'current' ? `halted: ${halted}` : detail,
  };
}

/**
 * A key-level skip that stands between the record and current: newer than the version recorded, and (when Vault
 * answered) not above Vault's current version — a skip of a version Vault never had changes nothing the pods run.
 */
function unverifiedSkip(
  skip: KeySkip | undefined,
  recorded: number | string | null,
  vaultCurrent: number | string | null,
): KeySkip | undefined {
  if (skip === undefined || typeof recorded === 'string' || (recorded !== null && skip.v <= recorded)) return undefined;
  return typeof vaultCurrent === 'number' && skip.v > vaultCurrent ? undefined : skip;
}

/**
 * The status of the selected paths. `vault` holds what Vault said per qualified path (absent from the map: not
 * asked, e.g. KV v1 or no --vault-addr).
 */
/**
 * The paths status reports: those recorded on any listed object that a route still matches, and a literal --path;
 * at most maxPaths of them, the rest named in `notes`.
 */
export function selectedPaths(
  table: RoutingTable,
  listings: readonly ClusterListing[],
  options: StatusOptions,
): {
  paths: Array<{ path: string; vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 }>;
  notes: string[];
} {
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
      for (const obj of objects)
        for (const recorded of Object.keys(recordOf(descriptorOfListed(obj), obj)))
          found.add(recorded.replace(/#[a-z]+$/, ''));
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
      if (refused++ === 0)
        example = `${JSON.stringify(path.length > 120 ? `${path.slice(0, 120)}…` : path)}: ${problem}`;
      continue;
    }
    const parts = splitRecordedPath(table, path);
    if (!parts) continue;
    // Only paths a route matches: a record the table no longer routes is nobody's rotation.
    if (planRollouts(table, [probeChange(parts, null)]).routed[0]?.length === 0) continue;
    paths.push({ path, ...parts });
  }
  const maxPaths = options.maxPaths ?? DEFAULT_MAX_PATHS;
  const notes =
    paths.length > maxPaths
      ? [`${paths.length - maxPaths} more paths left out (at most ${maxPaths}; narrow with --path)`]
      : [];
  if (refused > 0) notes.push(`ignored ${refused} recorded key(s) that are no Vault path, e.g. ${example}`);
  return { paths: paths.slice(0, maxPaths), notes };
}

/**
 * The status of the selected paths. `vault` holds what Vault said per qualified path (absent from the map: not
 * asked, e.g. KV v1 or no --vault-addr).
 */
export function fleetStatus(
  table: RoutingTable,
  listings: readonly ClusterListing[],
  vault: ReadonlyMap<string, VaultAnswer>,
  options: StatusOptions & { now: number },
): FleetStatus {
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
    if (parts.kvVersion === 1)
      pathNotes.push(
        'KV v1 keeps no versions: status (and reconcile) cannot see what Vault holds; the records compare the times of the changes seen',
      );
    if (answer && 'currentVersion' in answer) {
      current = answer.currentVersion;
      currentFrom = 'vault';
      if (answer.gone) pathNotes.push(`Vault's current version ${answer.currentVersion} is ${answer.gone}`);
    } else if (answer && 'error' in answer)
      pathNotes.push(`Vault could not be read (so this path is not reported safe): ${answer.error}`);
    else if (answer && 'absent' in answer)
      pathNotes.push('Vault has no such key (deleted with its metadata, or not KV v2)');

    // Consumers: what the table targets now, then whatever else records the path.
    const plan = planRollouts(table, [probeChange(parts, typeof current === 'number' ? current : null)]);
    for (const p of plan.problems) pathNotes.push(`route ${p.route}: ${p.error}`);
    const seen = new Set<string>();
    const rows: Array<{
      routes: string[];
      cluster: string;
      descriptor: WorkloadDescriptor;
      obj: KubeObject;
      routed: boolean;
    }> = [];
    const unread: ConsumerStatus[] = [];
    for (const target of plan.targets) {
      if (only && only.size > 0 && !only.has(target.cluster)) continue;
      const listing = byCluster.get(target.cluster);
      if (target.type === 'consumers') {
        const found = listing ? consumerObjects(target, listing) : { error: 'not listed' };
        if ('error' in found) {
          unread.push({
            cluster: target.cluster,
            namespace: target.namespace,
            kind: target.kind,
            name: target.name,
            recorded: null,
            state: 'unknown',
            rollout: 'none',
            routed: true,
            ok: false,
            detail: `cannot read: ${listing?.error ?? found.error}`,
          });
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
      const objects = listing
        ? objectsOf(listing, descriptor.apiVersion, descriptor.kind, target.namespace)
        : undefined;
      if (objects === undefined || 'error' in objects) {
        const why = listing?.error ?? (objects && 'error' in objects ? objects.error : 'not listed');
        unread.push({
          cluster: target.cluster,
          namespace: target.namespace,
          kind: descriptor.kind,
          name: target.type === 'resource' ? target.name : (target.name ?? '*'),
          recorded: null,
          state: 'unknown',
          rollout: 'none',
          routed: true,
          ok: false,
          detail: `cannot read: ${why}`,
        });
        continue;
      }
      const matched = targetObjects(target, objects);
      if (matched.length === 0 && (target.type === 'resource' || target.name !== undefined)) {
        unread.push({
          cluster: target.cluster,
          namespace: target.namespace,
          kind: descriptor.kind,
          name: target.type === 'resource' ? target.name : (target.name ?? ''),
          recorded: null,
          state: 'unknown',
          rollout: 'none',
          routed: true,
          ok: false,
          detail: 'not found in the cluster',
        });
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
      ...rows.map((r) =>
        consumerStatus(
          table,
          r.cluster,
          r.routes,
          r.descriptor,
          r.obj,
          path,
          current,
          currentFrom === 'vault',
          r.routed,
          options.now,
          byCluster.get(r.cluster),
        ),
      ),
      ...unread,
    ].sort((a, b) => (a.cluster + a.namespace + a.kind + a.name < b.cluster + b.namespace + b.kind + b.name ? -1 : 1));
    const counted = consumers.filter((c) => c.routed);
    paths.push({
      path,
      vaultNamespace: parts.vaultNamespace,
      mount: parts.mount,
      key: parts.key,
      kvVersion: parts.kvVersion,
      current,
      currentFrom,
      ...(answer ? { vault: answer } : {}),
      consumers,
      notes: pathNotes,
      ok: counted.every((c) => c.ok) && !(answer !== undefined && 'error' in answer),
    });
  }
  const unreadable = listings.flatMap((l) => [
    ...(l.error ? [{ cluster: l.cluster, error: l.error }] : []),
    ...[...l.lists.entries()]
      .filter((e): e is [string, { error: string }] => 'error' in e[1])
      .map(([key, v]) => ({ cluster: l.cluster, error: `${key}: ${v.error}` })),
  ]);
  // An unreadable list may hide records of paths not found; a literal --path already shows its unread consumers.
  const literal =
    options.path !== undefined &&
    compilePattern(options.path.replace(/^\/+/, '')).segments.every((s) => s.kind === 'literal');
  return { paths, unreadable, notes, ok: paths.every((p) => p.ok) && (literal || unreadable.length === 0) };
}
