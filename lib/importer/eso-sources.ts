/**
 * What External Secrets Operator objects declare: their Vault stores (and whom they serve) and the paths each
 * ExternalSecret copies.
 */
import { parseLabelSelector, selectorMatches, type LabelSelector } from '../workloads/label-selector.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import { compileGoRegexp } from './go-regexp.ts';

/** Everything listed from one cluster. Kinds that are not installed (or not readable) are named in `missing`. */
import {
  arr,
  keyProblem,
  nameOf,
  namespaceOf,
  rec,
  str,
  stringMap,
  trimSlashes,
  vaultNamespace,
  type ClusterInventory,
  type Extracted,
  type Unmapped,
  type VaultSource,
} from './import-sources.ts';

interface VaultStore {
  server: string | undefined;
  /** The store's path: the KV mount, or undefined when every key starts with its mount. */
  mount: string | undefined;
  kvVersion: 1 | 2;
  vaultNamespace: string | undefined;
}

/** The store an ExternalSecret (or one of its entries) reads from: a Vault KV store, or why not. */
function storeOf(inv: ClusterInventory, namespace: string, ref: Record<string, unknown>): VaultStore | string {
  const kind = str(ref.kind) ?? 'SecretStore';
  const name = str(ref.name);
  if (name === undefined) return 'the store reference has no name';
  const store =
    kind === 'ClusterSecretStore'
      ? inv.clusterSecretStores.find((s) => nameOf(s) === name)
      : inv.secretStores.find((s) => nameOf(s) === name && namespaceOf(s) === namespace);
  if (!store) {
    // A kind that could not be listed (not installed, or forbidden to a namespaced importer) is not a missing store.
    const unread = inv.missing.find((m) => m.startsWith(`${kind} `));
    return unread ? `${kind} ${name} could not be read: ${unread}` : `${kind} ${name} was not found`;
  }
  if (kind === 'ClusterSecretStore') {
    const refused = storeRefuses(inv, store, namespace);
    if (refused !== undefined) return refused;
  }
  const provider = rec(rec(store.spec).provider);
  const vault = provider.vault;
  if (vault === undefined)
    return `${kind} ${name} is not a Vault store (provider: ${Object.keys(provider).join(', ') || 'none'})`;
  const v = rec(vault);
  const version = str(v.version) ?? 'v2';
  if (version !== 'v1' && version !== 'v2') return `${kind} ${name} has KV version ${version}`;
  const mount = trimSlashes(str(v.path) ?? '');
  return {
    server: str(v.server),
    mount: mount === '' ? undefined : mount,
    kvVersion: version === 'v1' ? 1 : 2,
    vaultNamespace: vaultNamespace(v.namespace),
  };
}

/** Does any ClusterSecretStore of the cluster admit namespaces by label (so the Namespaces' labels must be read)? */
export const needsNamespaceLabels = (inv: Pick<ClusterInventory, 'clusterSecretStores'>): boolean =>
  inv.clusterSecretStores.some((s) =>
    arr(rec(s.spec).conditions).some(
      (c) => rec(c).namespaceSelector !== undefined && rec(c).namespaceSelector !== null,
    ),
  );

/**
 * A metav1.LabelSelector object (matchLabels, matchExpressions) as the selector lib/workloads/label-selector.ts reads.
 */
function labelSelectorOf(v: unknown): LabelSelector {
  const selector = rec(v);
  const clauses = Object.entries(stringMap(selector.matchLabels)).map(([k, value]) => `${k}=${value}`);
  for (const e of arr(selector.matchExpressions)) {
    const key = str(rec(e).key) ?? '';
    const values = arr(rec(e).values).filter((x): x is string => typeof x === 'string');
    const operator = str(rec(e).operator);
    if ((operator === 'In' || operator === 'NotIn') && values.length === 0)
      return { error: `matchExpressions ${key} ${operator} has no values` };
    if (operator === 'In' || operator === 'NotIn')
      clauses.push(`${key} ${operator.toLowerCase()} (${values.join(',')})`);
    else if (operator === 'Exists') clauses.push(key);
    else if (operator === 'DoesNotExist') clauses.push(`!${key}`);
    else
      return {
        error: `matchExpressions ${key}: operator ${operator ?? '(none)'} is not In, NotIn, Exists or DoesNotExist`,
      };
  }
  return parseLabelSelector(clauses.join(','));
}

/**
 * ESO's shouldProcessSecret for a ClusterSecretStore (v0.20): no `spec.conditions` serves every namespace; otherwise,
 * condition by condition, its `namespaceSelector` on the Namespace's labels, its `namespaces` by name (ESO matches
 * them as the `kubernetes.io/metadata.name` label, which the API server sets to the name) and its `namespaceRegexes`
 * as unanchored Go regexps; the first that matches serves it, the first selector ESO cannot read refuses it. Returns
 * why the store does not serve `namespace` (or why import cannot tell), or undefined when it does.
 */
function storeRefuses(inv: ClusterInventory, store: KubeObject, namespace: string): string | undefined {
  const conditions = arr(rec(store.spec).conditions);
  if (conditions.length === 0) return undefined;
  const what = `ClusterSecretStore ${nameOf(store)}`;
  const ns = inv.namespaces.find((n) => nameOf(n) === namespace);
  let undecided: string | undefined;
  for (const [i, c] of conditions.entries()) {
    const condition = rec(c);
    if (condition.namespaceSelector !== undefined && condition.namespaceSelector !== null) {
      const selector = labelSelectorOf(condition.namespaceSelector);
      if ('error' in selector)
        return undecided ?? `${what}: conditions[${i}].namespaceSelector: ${selector.error}; ESO refuses the store`;
      if (selector.requirements.length === 0) return undefined; // {} selects every namespace
      if (ns === undefined)
        undecided ??= `${what} admits namespaces by label (conditions[${i}].namespaceSelector) and the labels of namespace ${namespace} could not be read (list Namespaces)`;
      else if (selectorMatches(selector, ns.metadata?.labels)) return undefined;
    }
    if (arr(condition.namespaces).includes(namespace)) return undefined;
    for (const [j, pattern] of arr(condition.namespaceRegexes).entries()) {
      const re = compileGoRegexp(typeof pattern === 'string' ? pattern : '');
      if ('error' in re)
        undecided ??= `${what}: conditions[${i}].namespaceRegexes[${j}] ${JSON.stringify(String(pattern).slice(0, 80))} is not a regexp Go compiles, so import cannot tell what ESO serves: ${re.error}`;
      else if (re.test(namespace)) return undefined;
    }
  }
  return undecided ?? `${what} does not serve namespace ${namespace} (spec.conditions): ESO does not sync it`;
}

/**
 * ESO's own path rule for a remote key (the Vault provider's buildPath): with a store path, a key that already starts
 * with it (and, on KV v2, with data/ after it) is taken as relative to it; without one, the first segment is the mount.
 */
function esoPath(store: VaultStore, remoteKey: string): { mount: string; key: string } | string {
  let key = trimSlashes(remoteKey);
  if (store.mount !== undefined) {
    if (key.startsWith(`${store.mount}/`)) {
      key = key.slice(store.mount.length + 1);
      if (store.kvVersion === 2 && key.startsWith('data/')) key = key.slice('data/'.length);
    }
    return { mount: store.mount, key };
  }
  const [mount, ...rest] = key.split('/');
  if (!mount || rest.length === 0) return `the store has no path and the key "${remoteKey}" names no mount`;
  if (store.kvVersion === 2 && rest[0] === 'data') rest.shift();
  return { mount, key: rest.join('/') };
}

/** Why ESO never refreshes this ExternalSecret's Secret, so no rotation could reach it; undefined when it does. */
function refreshProblem(spec: Record<string, unknown>): string | undefined {
  const policy = str(spec.refreshPolicy);
  if (policy === 'CreatedOnce') return 'refreshPolicy: CreatedOnce: ESO never updates the Secret after creating it';
  if (
    (policy === undefined || policy === 'Periodic') &&
    (spec.refreshInterval === '0' || spec.refreshInterval === '0s' || spec.refreshInterval === 0)
  )
    return 'refreshInterval: 0 with a periodic refresh: ESO never refreshes it (use refreshPolicy: OnChange)';
  return undefined;
}

/** One remote reference of an ExternalSecret: where it is written, its key, pinned version and store. */
interface RemoteEntry {
  what: string;
  key: unknown;
  version?: unknown;
  sourceRef?: unknown;
}

/** The remote references of `data` and `dataFrom[].extract`; what has no one KV path is skipped with why. */
function remoteEntries(spec: Record<string, unknown>, skip: (reason: string) => void): RemoteEntry[] {
  const entries: RemoteEntry[] = [];
  arr(spec.data).forEach((d, i) =>
    entries.push({
      what: `data[${i}]`,
      key: rec(rec(d).remoteRef).key,
      version: rec(rec(d).remoteRef).version,
      sourceRef: rec(d).sourceRef,
    }),
  );
  arr(spec.dataFrom).forEach((d, i) => {
    const from = rec(d);
    if (from.find !== undefined)
      return skip(
        `dataFrom[${i}].find searches Vault by path or name regexp: no one KV path to route (list the keys under data or dataFrom.extract)`,
      );
    if (rec(from.sourceRef).generatorRef !== undefined)
      return skip(`dataFrom[${i}] uses a generator: generated values have no KV path`);
    if (from.extract !== undefined)
      entries.push({
        what: `dataFrom[${i}].extract`,
        key: rec(from.extract).key,
        version: rec(from.extract).version,
        sourceRef: from.sourceRef,
      });
  });
  return entries;
}

/** The Vault store and KV path of one remote reference, or why it has none a route could name. */
function entryPath(
  inv: ClusterInventory,
  ns: string,
  entry: RemoteEntry,
  defaultStore: Record<string, unknown>,
): { store: VaultStore; path: { mount: string; key: string } } | string {
  const storeRef = rec(rec(entry.sourceRef).storeRef);
  const store = storeOf(inv, ns, storeRef.name !== undefined ? storeRef : defaultStore);
  if (typeof store === 'string') return `${entry.what}: ${store}`;
  const remoteKey = str(entry.key);
  if (remoteKey === undefined) return `${entry.what}: no key`;
  if (entry.version !== undefined && entry.version !== '')
    return `${entry.what}: pinned to version ${String(entry.version)}: a new version in Vault changes nothing`;
  const problem = keyProblem(trimSlashes(remoteKey));
  if (problem) return `${entry.what}: ${problem}`;
  const path = esoPath(store, remoteKey);
  if (typeof path === 'string') return `${entry.what}: ${path}`;
  return { store, path };
}

/** ExternalSecrets (external-secrets.io) backed by a Vault store → sources, one per distinct key. */
export function esoSources(inv: ClusterInventory): Extracted {
  const sources: VaultSource[] = [];
  const unmapped: Unmapped[] = [];
  for (const es of inv.externalSecrets) {
    const spec = rec(es.spec);
    const ns = namespaceOf(es);
    const name = nameOf(es);
    const skip = (reason: string) =>
      unmapped.push({ cluster: inv.cluster, kind: 'ExternalSecret', namespace: ns, name, reason });
    const refresh = refreshProblem(spec);
    if (refresh !== undefined) {
      skip(refresh);
      continue;
    }
    const target = rec(spec.target);
    const secret = str(target.name) ?? name;
    const secretAnnotations = stringMap(rec(rec(rec(target.template).metadata).annotations));
    const seen = new Set<string>();
    for (const entry of remoteEntries(spec, skip)) {
      const found = entryPath(inv, ns, entry, rec(spec.secretStoreRef));
      if (typeof found === 'string') {
        skip(found);
        continue;
      }
      const { store, path } = found;
      const id = `${store.vaultNamespace ?? ''}|${path.mount}|${path.key}`;
      if (seen.has(id)) continue;
      seen.add(id);
      sources.push({
        cluster: inv.cluster,
        vaultNamespace: store.vaultNamespace,
        mount: path.mount,
        kvVersion: store.kvVersion,
        key: path.key,
        server: store.server,
        operator: { kind: 'ExternalSecret', namespace: ns, name },
        secret,
        secretAnnotations,
        operatorRestarts: [],
      });
    }
  }
  return { sources, unmapped };
}
