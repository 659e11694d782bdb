/** Reconcile's Vault side: expand each route's pattern over Vault's metadata and read each path's current state. */
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { Operation, SecretChange } from '../sources/secret-change.ts';
import { expandPattern } from '../vault/expand-pattern.ts';
import type { KvMetadata, MetadataListing } from '../vault/metadata-client.ts';

import type { ReconcileDeps, ReconcileLimits, ReconcileReport, RouteExpansionReport } from './reconcile-model.ts';

/** Vault stamps nanoseconds; Date.parse takes milliseconds at most. */
export const parseTime = (time: string): number => Date.parse(time.replace(/(\.\d{3})\d+/, '$1'));

/**
 * The change that stands for a path's current state: a write of the current version, or its delete or destroy when
 * that version is deleted (deletion time passed) or destroyed. Undefined when the key holds no version.
 */
export function currentChange(
  meta: KvMetadata,
  kvVersionFrom: SecretChange['kvVersionFrom'],
  now: number,
): SecretChange | undefined {
  const version = meta.versions[meta.currentVersion];
  if (meta.currentVersion === 0 || version === undefined) return undefined;
  let operation: Operation = 'write';
  let time = version.createdTime;
  if (version.destroyed) {
    operation = 'destroy';
    time = meta.updatedTime || version.createdTime;
  } else if (version.deletionTime !== null && parseTime(version.deletionTime) <= now) {
    operation = 'delete';
    time = version.deletionTime;
  }
  const path = `${meta.mount}/${meta.key}`;
  return {
    namespace: meta.namespace,
    mount: meta.mount,
    key: meta.key,
    path,
    operation,
    version: meta.currentVersion,
    kvVersion: 2,
    kvVersionFrom,
    source: 'reconcile',
    via: 'direct',
    id: `reconcile:${qualify(meta.namespace, path)}@${meta.currentVersion}:${operation}`,
    time,
    record: `metadata of ${qualify(meta.namespace, path)}`,
  };
}

/** Runs `task` over `items`, at most `limit` at a time, results in input order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const limiter = new ConcurrencyLimiter(limit);
  return Promise.all(items.map((item) => limiter.run(() => task(item))));
}

/** A path to read: its Vault namespace, mount and key. */
interface WantedPath {
  namespace: string;
  mount: string;
  key: string;
}

type Lister = (namespace: string, mount: string, folder: string) => Promise<MetadataListing>;
type CompiledRoute = ReconcileDeps['table']['routes'][number];

/** Step 1 and 2: every routed path Vault holds, and its current state. */
export async function readVault(
  deps: ReconcileDeps,
  limits: ReconcileLimits,
): Promise<Pick<ReconcileReport, 'routes' | 'paths' | 'pathErrors'> & { changes: SecretChange[] }> {
  const { table, vault } = deps;
  // One LIST per folder, however many routes share it.
  const listings = new Map<string, Promise<MetadataListing>>();
  const list: Lister = (namespace, mount, folder) => {
    const key = `${namespace}\u0000${mount}\u0000${folder}`;
    let listing = listings.get(key);
    if (!listing)
      listings.set(key, (listing = vault.listMetadata(mount, folder, { namespace, limit: limits.maxKeys })));
    return listing;
  };
  const routes: RouteExpansionReport[] = [];
  const wanted = new Map<string, WantedPath>();
  for (const route of table.routes) routes.push(await expandRoute(route, list, wanted, deps, limits));
  const { changes, pathErrors } = await readCurrent(deps, limits, [...wanted.values()]);
  const paths = changes.map((c) => ({
    path: qualify(c.namespace, c.path),
    version: c.version as number,
    operation: c.operation,
    time: c.time,
  }));
  return { routes, paths, pathErrors, changes };
}

/** Step 1 for one route: the keys its pattern matches in Vault, added to `wanted` up to maxPaths in all. */
async function expandRoute(
  route: CompiledRoute,
  list: Lister,
  wanted: Map<string, WantedPath>,
  deps: ReconcileDeps,
  limits: ReconcileLimits,
): Promise<RouteExpansionReport> {
  const base = { route: route.name, namespace: route.namespace, pattern: route.pattern.source, paths: 0, lists: 0 };
  let expansion;
  try {
    expansion = await expandPattern(route.pattern, route.namespace, deps.table.mounts, list, limits);
  } catch (e) {
    return { ...base, status: 'error', reason: e instanceof Error ? e.message : String(e) };
  }
  if (expansion.kind === 'kv1') {
    return {
      ...base,
      status: 'kv1',
      mount: expansion.mount,
      reason: `${expansion.mount} is KV v1: it keeps no versions, so reconcile cannot see its changes (only the change feed can)`,
    };
  }
  if (expansion.kind === 'unexpandable') return { ...base, status: 'unexpandable', reason: expansion.reason };
  let truncated = expansion.truncated;
  let paths = 0;
  for (const key of expansion.keys) {
    const id = `${route.namespace}\u0000${expansion.mount}\u0000${key}`;
    if (!wanted.has(id) && wanted.size >= limits.maxPaths) {
      truncated ??= `more than ${limits.maxPaths} paths in one reconcile`;
      break;
    }
    wanted.set(id, { namespace: route.namespace, mount: expansion.mount, key });
    paths++;
  }
  return {
    ...base,
    status: 'kv2',
    mount: expansion.mount,
    paths,
    lists: expansion.lists,
    ...(truncated ? { truncated } : {}),
    ...(expansion.ignored ? { reason: expansion.ignored } : {}),
  };
}

/** Step 2: each wanted path's metadata, as the change that stands for its current state. */
async function readCurrent(
  deps: ReconcileDeps,
  limits: ReconcileLimits,
  wanted: readonly WantedPath[],
): Promise<{ changes: SecretChange[]; pathErrors: ReconcileReport['pathErrors'] }> {
  const { table, vault } = deps;
  const now = deps.now();
  const pathErrors: ReconcileReport['pathErrors'] = [];
  const read = await mapLimited(wanted, limits.vaultConcurrency, async (p) => {
    try {
      return await vault.readMetadata(p.mount, p.key, { namespace: p.namespace });
    } catch (e) {
      pathErrors.push({
        path: qualify(p.namespace, `${p.mount}/${p.key}`),
        error: e instanceof Error ? e.message : String(e),
      });
      return undefined;
    }
  });
  const changes: SecretChange[] = [];
  for (const meta of read) {
    if (!meta) continue;
    const change = currentChange(
      meta,
      table.mounts.has(qualify(meta.namespace, meta.mount)) ? 'routes' : 'inferred',
      now,
    );
    if (change) changes.push(change);
  }
  return { changes, pathErrors };
}
