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
import { planRollouts } from '../plan/planner.ts';
import { compilePattern, PatternIndex, type CompiledPattern } from '../routing/path-pattern.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { findMount, guessMount, underMount } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import { pathConsumers } from './consumer-rows.ts';
import { consumerStatus, isNewer, type ConsumerRow } from './consumer-status.ts';
import { withWindowWaits } from './window-status.ts';
import { descriptorOfListed, isSideList, recordedFor, recordOf } from './listings.ts';
import {
  DEFAULT_MAX_PATHS,
  type ClusterListing,
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
      if ('error' in objects || isSideList(key)) continue;
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
  const { paths: candidates, notes } = selectedPaths(table, listings, options);
  const paths = candidates.map((parts) => pathStatus(table, listings, parts, vault.get(parts.path), options));
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

type SelectedPath = ReturnType<typeof selectedPaths>['paths'][number];

/** The current version Vault gave for the path (or none), with the notes on what Vault said. */
function vaultCurrent(
  parts: SelectedPath,
  answer: VaultAnswer | undefined,
  notes: string[],
): { current: number | string | null; currentFrom: PathStatus['currentFrom'] } {
  if (parts.kvVersion === 1)
    notes.push(
      'KV v1 keeps no versions: status (and reconcile) cannot see what Vault holds; the records compare the times of the changes seen',
    );
  if (answer && 'currentVersion' in answer) {
    if (answer.gone) notes.push(`Vault's current version ${answer.currentVersion} is ${answer.gone}`);
    return { current: answer.currentVersion, currentFrom: 'vault' };
  }
  if (answer && 'error' in answer)
    notes.push(`Vault could not be read (so this path is not reported safe): ${answer.error}`);
  else if (answer && 'absent' in answer) notes.push('Vault has no such key (deleted with its metadata, or not KV v2)');
  return { current: null, currentFrom: 'none' };
}

/** Without Vault: the newest version a consumer records is the best the clusters can say. */
function newestRecorded(rows: readonly ConsumerRow[], path: string): number | string | null {
  let current: number | string | null = null;
  for (const r of rows) {
    const v = recordedFor(r.descriptor, r.obj, path);
    if (v !== null && (current === null || isNewer(v, current))) current = v;
  }
  return current;
}

/** The status of one path: its current version, each consumer's line, and whether it is safe to revoke. */
function pathStatus(
  table: RoutingTable,
  listings: readonly ClusterListing[],
  parts: SelectedPath,
  answer: VaultAnswer | undefined,
  options: StatusOptions & { now: number },
): PathStatus {
  const { path } = parts;
  const pathNotes: string[] = [];
  let { current, currentFrom } = vaultCurrent(parts, answer, pathNotes);
  // Consumers: what the table targets now, then whatever else records the path.
  const probe = probeChange(parts, typeof current === 'number' ? current : null);
  const plan = planRollouts(table, [probe]);
  for (const p of plan.problems) pathNotes.push(`route ${p.route}: ${p.error}`);
  const { rows, unread } = pathConsumers(plan, listings, options.clusters, path);
  if (current === null) {
    current = newestRecorded(rows, path);
    if (current !== null) currentFrom = 'records';
  }
  const byCluster = new Map(listings.map((l) => [l.cluster, l]));
  const at = { table, path, current, fromVault: currentFrom === 'vault', now: options.now };
  const consumers = withWindowWaits(
    [...rows.map((r) => consumerStatus(r, at, byCluster.get(r.cluster))), ...unread],
    table,
    [probe],
    plan,
    options.now,
  ).sort((a, b) => (a.cluster + a.namespace + a.kind + a.name < b.cluster + b.namespace + b.kind + b.name ? -1 : 1));
  const counted = consumers.filter((c) => c.routed);
  return {
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
  };
}
