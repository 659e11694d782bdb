/**
 * `vault-rollout import`'s mapper: what the clusters declare (lib/importer/import-sources.ts) becomes one routing table
 * that does the same job in all of them. One route per Vault path; the same target seen in several clusters is one
 * target with a cluster list, or a label selector when exactly the clusters carrying a label have it. Pure and
 * deterministic (no clock): the same clusters give the same file.
 */
import { Document, isMap, isSeq, type YAMLMap } from 'yaml';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import type { WorkloadKind } from '../routing/target-schema.ts';
import { esoSources } from './eso-sources.ts';
import { reloaderRestarts, referencesSecret } from './reloader.ts';
import {
  vsoSources,
  type ClusterInventory,
  type NamedWorkload,
  type Unmapped,
  type VaultSource,
} from './import-sources.ts';

export const IMPORT_SOURCES = ['vso', 'eso', 'reloader'] as const;
export type ImportSource = (typeof IMPORT_SOURCES)[number];

export interface ImportCluster {
  name: string;
  /** The kubeconfig reference written into the table (a path relative to the output file). */
  kubeconfig: string;
  labels: Record<string, string>;
}

export interface ImportOptions {
  clusters: ImportCluster[];
  from: ReadonlySet<ImportSource>;
  /** Only sources reading this Vault address; required when the clusters read more than one. */
  vaultAddr?: string;
  /** The namespace VSO runs in (where its defaults live); VSO_OPERATOR_NAMESPACE when not given. */
  vsoOperatorNamespace?: string;
}

/**
 * Two imported objects read one mount with different KV versions. A table has one version per mount, so either
 * choice would silently break the other's routes (and the first object seen would decide, whoever wrote it): the
 * import fails and names both.
 */
export class KvVersionConflictError extends Error {
  override readonly name = 'KvVersionConflictError';
  readonly conflicts: string[];
  constructor(conflicts: string[]) {
    super(conflicts.join('\n'));
    this.conflicts = conflicts;
  }
}

/** A target without its clusters: what to do in one namespace of one cluster. */
export type ImportedTarget =
  | {
      namespace: string;
      sync: { kind: 'ExternalSecret' | 'VaultStaticSecret'; name: string };
      restart: 'consumers' | 'none';
    }
  | { namespace: string; consumers: { secret: string } }
  | { namespace: string; kind: WorkloadKind; name: string };

export interface ImportedRoute {
  name: string;
  match: { namespace?: string; path: string };
  targets: Array<{ clusters: string[] | Record<string, string> } & ImportedTarget>;
  /** Said beside the route in the file: where the table does more or less than the operators did. */
  notes: string[];
}

export interface ImportResult {
  clusters: Record<string, { kubeconfig: { file: string }; labels?: Record<string, string> }>;
  mounts: Record<string, 1 | 2>;
  routes: ImportedRoute[];
  unmapped: Unmapped[];
  /** The distinct Vault addresses the imported objects read (when they say it). */
  servers: string[];
}

const key = (r: NamedWorkload) => `${r.kind}/${r.name}`;
const workloadRef = (w: KubeObject): NamedWorkload => ({ kind: w.kind as WorkloadKind, name: w.metadata?.name ?? '' });
const sameServer = (a: string, b: string) => a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
const operatorSource = (s: VaultSource): ImportSource => (s.operator.kind === 'VaultStaticSecret' ? 'vso' : 'eso');

/** The targets one source asks for in its cluster, with notes where the table cannot say exactly the same. */
function targetsOf(
  source: VaultSource,
  workloads: KubeObject[],
  from: ReadonlySet<ImportSource>,
): { targets: ImportedTarget[]; notes: string[] } {
  const namespace = source.operator.namespace;
  const inNamespace = workloads.filter((w) => w.metadata?.namespace === namespace);
  const consumers = inNamespace.filter((w) => referencesSecret(w, source.secret)).map(workloadRef);
  const reloader = from.has('reloader')
    ? inNamespace.filter((w) => reloaderRestarts(w, source.secret, source.secretAnnotations)).map(workloadRef)
    : [];
  const operatorRestarts = new Set(source.operatorRestarts.map(key));
  const reloaderKeys = new Set(reloader.map(key));
  const consumerKeys = new Set(consumers.map(key));
  const where = `${source.cluster}/${namespace}`;
  const notes: string[] = [];
  const targets: ImportedTarget[] = [];
  // Reloader restarts a workload named in its reload list even when the pod template does not read the Secret;
  // `restart: consumers` would not find it, so it is named.
  const named = reloader.filter((r) => !consumerKeys.has(key(r)) && !operatorRestarts.has(key(r)));

  if (from.has(operatorSource(source))) {
    const restarts = reloader.length > 0 || operatorRestarts.size > 0;
    targets.push({
      namespace,
      sync: { kind: source.operator.kind, name: source.operator.name },
      restart: restarts ? 'consumers' : 'none',
    });
    const extra = consumers.filter((c) => !reloaderKeys.has(key(c)) && !operatorRestarts.has(key(c)));
    if (restarts && extra.length > 0)
      notes.push(
        `${where}: restart: consumers also restarts ${extra.map(key).join(', ')}, which read Secret ${source.secret} without a Reloader annotation`,
      );
    if (!restarts)
      notes.push(
        `${where}: ${source.operator.kind} ${source.operator.name}: nothing restarted on a sync today (no Reloader annotation, no rolloutRestartTargets), so the target only syncs`,
      );
  } else if (reloader.length > 0) {
    // The operator's sync is not imported: restart at once (the operator copies the new value on its own schedule).
    if (reloader.length === consumers.length && reloader.every((r) => consumerKeys.has(key(r))))
      targets.push({ namespace, consumers: { secret: source.secret } });
    else named.push(...reloader.filter((r) => consumerKeys.has(key(r))));
    notes.push(
      `${where}: ${source.operator.kind} ${source.operator.name} not imported (--from): these targets restart before the operator has copied the new value`,
    );
  }
  for (const r of named) targets.push({ namespace, kind: r.kind, name: r.name });
  if (named.length > 0 && from.has(operatorSource(source)))
    notes.push(
      `${where}: ${named.map(key).join(', ')} named by secret.reloader.stakater.com/reload without reading Secret ${source.secret}: restarted by name, not after the sync`,
    );
  return { targets, notes };
}

const ROUTE_NAME_MAX = 80;

function routeName(source: Pick<VaultSource, 'vaultNamespace' | 'mount' | 'key'>, taken: Set<string>): string {
  const base =
    [source.vaultNamespace, source.mount, source.key]
      .filter((s) => s !== undefined)
      .join('-')
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, ROUTE_NAME_MAX)
      .replace(/-+$/, '') || 'route';
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}-${i}`;
  taken.add(name);
  return name;
}

/** A cluster list, or the label selector that names exactly these clusters (two or more). */
function clusterSelector(names: string[], clusters: ImportCluster[]): string[] | Record<string, string> {
  const sorted = [...names].sort();
  if (sorted.length < 2) return sorted;
  const labels = [...new Set(clusters.flatMap((c) => Object.entries(c.labels).map(([k, v]) => `${k}=${v}`)))].sort();
  for (const label of labels) {
    const [k, v] = label.split('=', 2) as [string, string];
    const having = clusters
      .filter((c) => c.labels[k] === v)
      .map((c) => c.name)
      .sort();
    if (having.length === sorted.length && having.every((n, i) => n === sorted[i])) return { [k]: v };
  }
  return sorted;
}

/** The sources of every inventory, as the options import them, and what of them was not imported (and why). */
function sourcesOf(inventories: ClusterInventory[], options: ImportOptions, unmapped: Unmapped[]): VaultSource[] {
  const sources: VaultSource[] = [];
  for (const inv of inventories) {
    // VSO's and ESO's objects are read whenever Reloader is imported: they say which Secret holds which Vault path.
    if (options.from.has('vso') || options.from.has('reloader')) {
      const vso = vsoSources(inv, options.vsoOperatorNamespace);
      sources.push(...vso.sources);
      if (options.from.has('vso')) unmapped.push(...vso.unmapped);
    }
    if (options.from.has('eso') || options.from.has('reloader')) {
      const eso = esoSources(inv);
      sources.push(...eso.sources);
      if (options.from.has('eso')) unmapped.push(...eso.unmapped);
    }
  }
  return sources;
}

/** One future route: the source that names its path, its targets with the clusters of each, and notes. */
interface PathEntry {
  source: VaultSource;
  targets: Map<string, { target: ImportedTarget; clusters: Set<string> }>;
  notes: string[];
}

/** The sources gathered by Vault path and by mount, as they are added. */
interface Gathered {
  readonly mounts: Record<string, 1 | 2>;
  /** Per mount, the first source seen reading it as KV v1 and as KV v2: two entries are a conflict. */
  readonly mountFirstSeen: Map<string, Map<1 | 2, VaultSource>>;
  readonly byPath: Map<string, PathEntry>;
}

/** Adds one source's targets under its path, and its mount's KV version; a source of another Vault is skipped. */
function gather(
  g: Gathered,
  source: VaultSource,
  inventories: ClusterInventory[],
  options: ImportOptions,
  unmapped: Unmapped[],
): void {
  if (options.vaultAddr !== undefined && source.server !== undefined && !sameServer(source.server, options.vaultAddr)) {
    const { kind, namespace, name } = source.operator;
    const reason = `reads Vault at ${source.server}, not --vault-addr ${options.vaultAddr}`;
    unmapped.push({ cluster: source.cluster, kind, namespace, name, reason });
    return;
  }
  const mountKey = source.vaultNamespace ? `${source.vaultNamespace}/${source.mount}` : source.mount;
  const workloads = inventories.find((i) => i.cluster === source.cluster)?.workloads ?? [];
  const { targets, notes } = targetsOf(source, workloads, options.from);
  if (targets.length === 0) return;
  const first = g.mountFirstSeen.get(mountKey) ?? new Map<1 | 2, VaultSource>();
  g.mountFirstSeen.set(mountKey, first);
  if (!first.has(source.kvVersion)) first.set(source.kvVersion, source);
  g.mounts[mountKey] = source.kvVersion;
  const pathKey = `${source.vaultNamespace ?? ''}|${source.mount}/${source.key}`;
  let entry = g.byPath.get(pathKey);
  if (!entry) g.byPath.set(pathKey, (entry = { source, targets: new Map(), notes: [] }));
  entry.notes.push(...notes);
  for (const target of targets) {
    const id = JSON.stringify(target);
    let t = entry.targets.get(id);
    if (!t) entry.targets.set(id, (t = { target, clusters: new Set() }));
    t.clusters.add(source.cluster);
  }
}

/** Refuses a mount read as KV v1 by one object and as KV v2 by another, naming both. */
function checkKvVersions(mountFirstSeen: Gathered['mountFirstSeen']): void {
  const conflicts = [...mountFirstSeen.entries()]
    .filter(([, seen]) => seen.size > 1)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([mount, seen]) => {
      const v1 = seen.get(1) as VaultSource;
      const v2 = seen.get(2) as VaultSource;
      return (
        `mount ${mount} is read as KV v1 by ${describeSource(v1)} and as KV v2 by ${describeSource(v2)}; a mount has one KV version: ` +
        `fix the object that is wrong (VaultStaticSecret spec.type kv-v1|kv-v2, or the store's spec.provider.vault.version v1|v2; \`vault secrets list -detailed\` shows the mount's version), ` +
        `or leave its namespace or cluster out of the import (--namespace, --cluster)`
      );
    });
  if (conflicts.length > 0) throw new KvVersionConflictError(conflicts);
}

/** Maps every cluster's inventory to one routing table. */
export function importRoutes(inventories: ClusterInventory[], options: ImportOptions): ImportResult {
  const unmapped: Unmapped[] = [];
  const sources = sourcesOf(inventories, options, unmapped);
  const servers = [...new Set(sources.map((s) => s.server?.replace(/\/+$/, '')).filter((s) => s !== undefined))].sort();
  const g: Gathered = { mounts: {}, mountFirstSeen: new Map(), byPath: new Map() };
  for (const source of sources) gather(g, source, inventories, options, unmapped);
  checkKvVersions(g.mountFirstSeen);

  const taken = new Set<string>();
  const routes: ImportedRoute[] = [...g.byPath.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, { source, targets, notes }]) => ({
      name: routeName(source, taken),
      match: {
        ...(source.vaultNamespace ? { namespace: source.vaultNamespace } : {}),
        path: `${source.mount}/${source.key}`,
      },
      targets: [...targets.values()]
        .map(({ target, clusters }) => ({ clusters: clusterSelector([...clusters], options.clusters), ...target }))
        .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
      notes: [...new Set(notes)].sort(),
    }));

  const clusters = Object.fromEntries(
    [...options.clusters]
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((c) => [
        c.name,
        { kubeconfig: { file: c.kubeconfig }, ...(Object.keys(c.labels).length > 0 ? { labels: c.labels } : {}) },
      ]),
  );
  const sortedMounts = Object.fromEntries(Object.entries(g.mounts).sort(([a], [b]) => (a < b ? -1 : 1)));
  return { clusters, mounts: sortedMounts, routes, unmapped: sortUnmapped(unmapped), servers };
}

const describeSource = (s: VaultSource): string =>
  `${s.cluster}: ${s.operator.kind} ${s.operator.namespace}/${s.operator.name}`;

const sortUnmapped = (u: Unmapped[]) =>
  [...u].sort((a, b) =>
    `${a.cluster}/${a.namespace}/${a.kind}/${a.name}/${a.reason}` <
    `${b.cluster}/${b.namespace}/${b.kind}/${b.name}/${b.reason}`
      ? -1
      : 1,
  );

export const describeUnmapped = (u: Unmapped): string =>
  `${u.cluster}: ${u.kind} ${u.namespace ? `${u.namespace}/` : ''}${u.name}: ${u.reason}`;

/** The routing table as YAML, with what was not imported (and why) as comments at its end. */
export function renderImport(result: ImportResult, header: string[]): string {
  const doc = new Document({
    clusters: result.clusters,
    vault: { mounts: result.mounts },
    routes: result.routes.map(({ name, match, targets }) => ({ name, match, targets })),
  });
  doc.commentBefore = header.map((l) => ` ${l}`).join('\n');
  const routes = doc.get('routes');
  if (isSeq(routes)) {
    result.routes.forEach((route, i) => {
      const node = routes.items[i];
      if (route.notes.length > 0 && isMap(node))
        (node as YAMLMap).commentBefore = route.notes.map((n) => ` note: ${n}`).join('\n');
    });
  }
  if (result.unmapped.length > 0)
    doc.comment = [' Not imported:', ...result.unmapped.map((u) => `   ${describeUnmapped(u)}`)].join('\n');
  return doc.toString({ lineWidth: 0 });
}
