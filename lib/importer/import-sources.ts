/**
 * What `vault-rollout import` reads from one cluster, and what each object means for a Vault change: which KV path a
 * VaultStaticSecret (VSO) or ExternalSecret (ESO) copies into which Secret, and which workloads a change of that
 * Secret restarts today (VSO's rolloutRestartTargets, Stakater Reloader's annotations). Pure: the objects come in,
 * sources and reasons come out; nothing here reads a Secret or its data.
 */
import { podSpecOf, referencesIn } from '../workloads/consumers.ts';
import { parseLabelSelector, selectorMatches, type LabelSelector } from '../workloads/label-selector.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import { WorkloadKinds, type WorkloadKind } from '../routing/schema.ts';
import { compileGoRegexp, type StepMeter } from './go-regexp.ts';

/** Everything listed from one cluster. Kinds that are not installed (or not readable) are named in `missing`. */
export interface ClusterInventory {
  cluster: string;
  vaultStaticSecrets: KubeObject[];
  vaultAuths: KubeObject[];
  vaultConnections: KubeObject[];
  /** Listed to say why they are not imported. */
  vaultDynamicSecrets: KubeObject[];
  vaultPkiSecrets: KubeObject[];
  externalSecrets: KubeObject[];
  secretStores: KubeObject[];
  clusterSecretStores: KubeObject[];
  /** Namespace objects, listed only when a ClusterSecretStore admits namespaces by label (spec.conditions). */
  namespaces: KubeObject[];
  /** Deployments, StatefulSets, DaemonSets, CronJobs and Argo Rollouts, each with its `kind` set. */
  workloads: KubeObject[];
  missing: string[];
}

export const emptyInventory = (cluster: string): ClusterInventory => ({
  cluster,
  vaultStaticSecrets: [],
  vaultAuths: [],
  vaultConnections: [],
  vaultDynamicSecrets: [],
  vaultPkiSecrets: [],
  externalSecrets: [],
  secretStores: [],
  clusterSecretStores: [],
  namespaces: [],
  workloads: [],
  missing: [],
});

export interface WorkloadRef {
  kind: WorkloadKind;
  name: string;
}

/** One Vault KV path that an operator object copies into a Kubernetes Secret. */
export interface VaultSource {
  cluster: string;
  /** Vault Enterprise namespace, without slashes; undefined = root. */
  vaultNamespace: string | undefined;
  mount: string;
  kvVersion: 1 | 2;
  /** The key under the mount, without data/. */
  key: string;
  /** The Vault address it reads, when the objects say it. */
  server: string | undefined;
  operator: { kind: 'VaultStaticSecret' | 'ExternalSecret'; namespace: string; name: string };
  /** The Secret the operator writes. */
  secret: string;
  /** Annotations the operator puts on that Secret (Reloader's match and ignore live there). */
  secretAnnotations: Record<string, string>;
  /** Workloads the operator restarts itself after a sync (VSO's rolloutRestartTargets). */
  operatorRestarts: WorkloadRef[];
}

/** An object that does not become a route, and why. */
export interface Unmapped {
  cluster: string;
  kind: string;
  namespace: string;
  name: string;
  reason: string;
}

export interface Extracted {
  sources: VaultSource[];
  unmapped: Unmapped[];
}

const MAX_KEY_LENGTH = 256;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const rec = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const stringMap = (v: unknown): Record<string, string> => Object.fromEntries(Object.entries(rec(v)).filter((e): e is [string, string] => typeof e[1] === 'string'));
const nameOf = (o: KubeObject) => o.metadata?.name ?? '';
const namespaceOf = (o: KubeObject) => o.metadata?.namespace ?? '';
const trimSlashes = (s: string) => s.replace(/^\/+|\/+$/g, '');
const vaultNamespace = (v: unknown): string | undefined => {
  const ns = trimSlashes(str(v) ?? '');
  return ns === '' || ns === 'root' ? undefined : ns;
};

/** Why a key cannot be a literal route path, or undefined when it can. */
function keyProblem(key: string): string | undefined {
  if (key.includes('{{') || key.includes('${')) return `the key "${key}" is a template; only a literal KV path can be routed`;
  if (/[*{}]/.test(key)) return `the key "${key}" holds *, { or }, which a route path reads as a pattern`;
  if (key === '' || key.split('/').some((s) => s === '')) return `the key "${key}" has an empty segment`;
  if (key.length > MAX_KEY_LENGTH) return `the key is longer than ${MAX_KEY_LENGTH} characters`;
  return undefined;
}

/**
 * The namespace VSO runs in when it is installed as its docs and chart examples do (`vault-secrets-operator-system`):
 * where its default VaultAuth and VaultConnection live. `import --vso-operator-namespace` says otherwise.
 */
export const VSO_OPERATOR_NAMESPACE = 'vault-secrets-operator-system';

/**
 * VSO's own rule for a reference (common.ParseResourceRef): `namespace/name` as written, `name` in the referring
 * object's namespace, and none at all the object named `default` in the operator's namespace, never a `default`
 * elsewhere (anyone who may create a VaultAuth in their own namespace could name it so).
 */
function findRef(objects: KubeObject[], ref: string | undefined, referrerNamespace: string, operatorNamespace: string): KubeObject | undefined {
  const parts = ref === undefined ? [operatorNamespace, 'default'] : ref.split('/');
  if (parts.length > 2) return undefined; // VSO: invalid name
  const [ns, name] = parts.length === 2 ? parts : [referrerNamespace, ref];
  return objects.find((o) => nameOf(o) === name && namespaceOf(o) === ns);
}

/**
 * VSO's isAllowedNamespace: a VaultAuth serves its own namespace; the default one in the operator's namespace serves
 * every namespace; any other only the namespaces of its `spec.allowedNamespaces` (`["*"]`: all).
 */
function authServes(auth: KubeObject, namespace: string, operatorNamespace: string): boolean {
  if (namespaceOf(auth) === namespace || (nameOf(auth) === 'default' && namespaceOf(auth) === operatorNamespace)) return true;
  const allowed = arr(rec(auth.spec).allowedNamespaces);
  return (allowed.length === 1 && allowed[0] === '*') || allowed.includes(namespace);
}

const VSO_RESTART_KINDS: Readonly<Record<string, WorkloadKind>> = { Deployment: 'Deployment', StatefulSet: 'StatefulSet', DaemonSet: 'DaemonSet', 'argo.Rollout': 'Rollout' };

/**
 * VaultStaticSecrets (secrets.hashicorp.com/v1beta1) → sources; dynamic and PKI secrets → why not. Defaults (no
 * vaultAuthRef, no vaultConnectionRef) resolve only in `operatorNamespace`, as VSO resolves them.
 */
export function vsoSources(inv: ClusterInventory, operatorNamespace: string = VSO_OPERATOR_NAMESPACE): Extracted {
  const sources: VaultSource[] = [];
  const unmapped: Unmapped[] = [];
  const skip = (o: KubeObject, kind: string, reason: string) => unmapped.push({ cluster: inv.cluster, kind, namespace: namespaceOf(o), name: nameOf(o), reason });
  for (const vss of inv.vaultStaticSecrets) {
    const spec = rec(vss.spec);
    const ns = namespaceOf(vss);
    const type = str(spec.type);
    if (type !== 'kv-v1' && type !== 'kv-v2') {
      skip(vss, 'VaultStaticSecret', `type ${type ?? '(none)'} is not kv-v1 or kv-v2`);
      continue;
    }
    const mount = trimSlashes(str(spec.mount) ?? '');
    const key = trimSlashes(str(spec.path) ?? '');
    if (mount === '') {
      skip(vss, 'VaultStaticSecret', 'spec.mount is empty');
      continue;
    }
    const problem = keyProblem(key);
    if (problem) {
      skip(vss, 'VaultStaticSecret', problem);
      continue;
    }
    if (spec.version !== undefined && spec.version !== 0) {
      skip(vss, 'VaultStaticSecret', `spec.version pins version ${String(spec.version)}: a new version in Vault changes nothing in the cluster`);
      continue;
    }
    const destination = rec(spec.destination);
    const secret = str(destination.name);
    if (secret === undefined) {
      skip(vss, 'VaultStaticSecret', 'spec.destination.name is empty');
      continue;
    }
    const auth = findRef(inv.vaultAuths, str(spec.vaultAuthRef), ns, operatorNamespace);
    if (auth && !authServes(auth, ns, operatorNamespace)) {
      skip(vss, 'VaultStaticSecret', `VaultAuth ${namespaceOf(auth)}/${nameOf(auth)} does not allow namespace ${ns} (spec.allowedNamespaces): VSO refuses to sync it`);
      continue;
    }
    const authSpec = rec(auth?.spec);
    const connection = findRef(inv.vaultConnections, str(authSpec.vaultConnectionRef), namespaceOf(auth ?? {}) || ns, operatorNamespace);
    const operatorRestarts: WorkloadRef[] = [];
    // VSO ignores rolloutRestartTargets when hmacSecretData is false (it cannot tell the data changed).
    for (const t of spec.hmacSecretData === false ? [] : arr(spec.rolloutRestartTargets)) {
      const kind = VSO_RESTART_KINDS[str(rec(t).kind) ?? ''];
      const name = str(rec(t).name);
      if (kind && name) operatorRestarts.push({ kind, name });
    }
    sources.push({
      cluster: inv.cluster,
      vaultNamespace: vaultNamespace(spec.namespace ?? authSpec.namespace),
      mount,
      kvVersion: type === 'kv-v1' ? 1 : 2,
      key,
      server: str(rec(connection?.spec).address),
      operator: { kind: 'VaultStaticSecret', namespace: ns, name: nameOf(vss) },
      secret,
      secretAnnotations: stringMap(destination.annotations),
      operatorRestarts,
    });
  }
  for (const o of inv.vaultDynamicSecrets) skip(o, 'VaultDynamicSecret', 'a dynamic secret: VSO renews its lease, no KV write announces a new value');
  for (const o of inv.vaultPkiSecrets) skip(o, 'VaultPKISecret', 'a PKI certificate: VSO renews it before expiry, no KV write announces a new one');
  return { sources, unmapped };
}

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
  const store = kind === 'ClusterSecretStore' ? inv.clusterSecretStores.find((s) => nameOf(s) === name) : inv.secretStores.find((s) => nameOf(s) === name && namespaceOf(s) === namespace);
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
  if (vault === undefined) return `${kind} ${name} is not a Vault store (provider: ${Object.keys(provider).join(', ') || 'none'})`;
  const v = rec(vault);
  const version = str(v.version) ?? 'v2';
  if (version !== 'v1' && version !== 'v2') return `${kind} ${name} has KV version ${version}`;
  const mount = trimSlashes(str(v.path) ?? '');
  return { server: str(v.server), mount: mount === '' ? undefined : mount, kvVersion: version === 'v1' ? 1 : 2, vaultNamespace: vaultNamespace(v.namespace) };
}

/** Does any ClusterSecretStore of the cluster admit namespaces by label (so the Namespaces' labels must be read)? */
export const needsNamespaceLabels = (inv: Pick<ClusterInventory, 'clusterSecretStores'>): boolean =>
  inv.clusterSecretStores.some((s) => arr(rec(s.spec).conditions).some((c) => rec(c).namespaceSelector !== undefined && rec(c).namespaceSelector !== null));

/** A metav1.LabelSelector object (matchLabels, matchExpressions) as the selector lib/workloads/label-selector.ts reads. */
function labelSelectorOf(v: unknown): LabelSelector {
  const selector = rec(v);
  const clauses = Object.entries(stringMap(selector.matchLabels)).map(([k, value]) => `${k}=${value}`);
  for (const e of arr(selector.matchExpressions)) {
    const key = str(rec(e).key) ?? '';
    const values = arr(rec(e).values).filter((x): x is string => typeof x === 'string');
    const operator = str(rec(e).operator);
    if ((operator === 'In' || operator === 'NotIn') && values.length === 0) return { error: `matchExpressions ${key} ${operator} has no values` };
    if (operator === 'In' || operator === 'NotIn') clauses.push(`${key} ${operator.toLowerCase()} (${values.join(',')})`);
    else if (operator === 'Exists') clauses.push(key);
    else if (operator === 'DoesNotExist') clauses.push(`!${key}`);
    else return { error: `matchExpressions ${key}: operator ${operator ?? '(none)'} is not In, NotIn, Exists or DoesNotExist` };
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
      if ('error' in selector) return undecided ?? `${what}: conditions[${i}].namespaceSelector: ${selector.error}; ESO refuses the store`;
      if (selector.requirements.length === 0) return undefined; // {} selects every namespace
      if (ns === undefined) undecided ??= `${what} admits namespaces by label (conditions[${i}].namespaceSelector) and the labels of namespace ${namespace} could not be read (list Namespaces)`;
      else if (selectorMatches(selector, ns.metadata?.labels)) return undefined;
    }
    if (arr(condition.namespaces).includes(namespace)) return undefined;
    for (const [j, pattern] of arr(condition.namespaceRegexes).entries()) {
      const re = compileGoRegexp(typeof pattern === 'string' ? pattern : '');
      if ('error' in re) undecided ??= `${what}: conditions[${i}].namespaceRegexes[${j}] ${JSON.stringify(String(pattern).slice(0, 80))} is not evaluated by import: ${re.error}`;
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

/** ExternalSecrets (external-secrets.io) backed by a Vault store → sources, one per distinct key. */
export function esoSources(inv: ClusterInventory): Extracted {
  const sources: VaultSource[] = [];
  const unmapped: Unmapped[] = [];
  for (const es of inv.externalSecrets) {
    const spec = rec(es.spec);
    const ns = namespaceOf(es);
    const name = nameOf(es);
    const skip = (reason: string) => unmapped.push({ cluster: inv.cluster, kind: 'ExternalSecret', namespace: ns, name, reason });
    const policy = str(spec.refreshPolicy);
    if (policy === 'CreatedOnce') {
      skip('refreshPolicy: CreatedOnce: ESO never updates the Secret after creating it');
      continue;
    }
    if ((policy === undefined || policy === 'Periodic') && (spec.refreshInterval === '0' || spec.refreshInterval === '0s' || spec.refreshInterval === 0)) {
      skip('refreshInterval: 0 with a periodic refresh: ESO never refreshes it (use refreshPolicy: OnChange)');
      continue;
    }
    const target = rec(spec.target);
    const secret = str(target.name) ?? name;
    const secretAnnotations = stringMap(rec(rec(rec(target.template).metadata).annotations));
    const defaultStore = rec(spec.secretStoreRef);
    const entries: Array<{ what: string; key: unknown; version?: unknown; sourceRef?: unknown }> = [];
    arr(spec.data).forEach((d, i) => entries.push({ what: `data[${i}]`, key: rec(rec(d).remoteRef).key, version: rec(rec(d).remoteRef).version, sourceRef: rec(d).sourceRef }));
    arr(spec.dataFrom).forEach((d, i) => {
      const from = rec(d);
      if (from.find !== undefined) return skip(`dataFrom[${i}].find searches Vault by path or name regexp: no one KV path to route (list the keys under data or dataFrom.extract)`);
      if (rec(from.sourceRef).generatorRef !== undefined) return skip(`dataFrom[${i}] uses a generator: generated values have no KV path`);
      if (from.extract !== undefined) entries.push({ what: `dataFrom[${i}].extract`, key: rec(from.extract).key, version: rec(from.extract).version, sourceRef: from.sourceRef });
    });
    const seen = new Set<string>();
    for (const entry of entries) {
      const store = storeOf(inv, ns, rec(rec(entry.sourceRef).storeRef).name !== undefined ? rec(rec(entry.sourceRef).storeRef) : defaultStore);
      if (typeof store === 'string') {
        skip(`${entry.what}: ${store}`);
        continue;
      }
      const remoteKey = str(entry.key);
      if (remoteKey === undefined) {
        skip(`${entry.what}: no key`);
        continue;
      }
      if (entry.version !== undefined && entry.version !== '') {
        skip(`${entry.what}: pinned to version ${String(entry.version)}: a new version in Vault changes nothing`);
        continue;
      }
      const problem = keyProblem(trimSlashes(remoteKey));
      if (problem) {
        skip(`${entry.what}: ${problem}`);
        continue;
      }
      const path = esoPath(store, remoteKey);
      if (typeof path === 'string') {
        skip(`${entry.what}: ${path}`);
        continue;
      }
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

/**
 * Does the pod template read this Secret? The same rule `restart: consumers` uses when it runs (lib/workloads/consumers.ts:
 * env, envFrom, secret and projected volumes; init and ephemeral containers count), so import's view of who consumes a
 * Secret is the product's.
 */
export const referencesSecret = (workload: KubeObject, secret: string): boolean =>
  (WorkloadKinds as readonly string[]).includes(workload.kind ?? '') && referencesIn(podSpecOf(workload.kind as WorkloadKind, workload), { secret }).length > 0;

export const RELOADER = {
  auto: 'reloader.stakater.com/auto',
  secretAuto: 'secret.reloader.stakater.com/auto',
  secretReload: 'secret.reloader.stakater.com/reload',
  search: 'reloader.stakater.com/search',
  match: 'reloader.stakater.com/match',
  ignore: 'reloader.stakater.com/ignore',
} as const;

const MAX_RELOAD_ENTRIES = 64;
const MAX_RELOAD_ENTRY_LENGTH = 253;

/**
 * Reloader's named list: comma-separated names, each compiled by Reloader as the Go regexp `^name$` (string
 * concatenation, so `a|b` reads as `^a|b$`), and compared as text when it does not compile. Evaluated here by the
 * linear matcher of ./go-regexp.ts, never a backtracking RegExp: anyone who may edit a workload writes this
 * annotation. A pattern outside that matcher's subset is compared as text, like one that does not compile.
 */
function namedReloadMatches(value: string, secret: string, meter?: StepMeter): boolean {
  return value
    .split(',')
    .slice(0, MAX_RELOAD_ENTRIES)
    .map((v) => v.trim())
    .filter((v) => v !== '' && v.length <= MAX_RELOAD_ENTRY_LENGTH)
    .some((v) => {
      if (v === secret) return true;
      const pattern = compileGoRegexp(`^${v}$`);
      return !('error' in pattern) && pattern.test(secret, meter);
    });
}

/**
 * Would Stakater Reloader restart this workload when the Secret changes? Its rules: a name in
 * `secret.reloader.stakater.com/reload`; or `reloader.stakater.com/auto` / `secret.reloader.stakater.com/auto` "true"
 * and the pod template references the Secret; or `reloader.stakater.com/search` "true", the Secret annotated
 * `reloader.stakater.com/match` "true", and referenced. A Secret annotated `reloader.stakater.com/ignore` "true"
 * restarts nothing. `meter` counts the regexp work of the named list (tests bound it without a clock).
 */
export function reloaderRestarts(workload: KubeObject, secret: string, secretAnnotations: Record<string, string>, meter?: StepMeter): boolean {
  if (secretAnnotations[RELOADER.ignore] === 'true') return false;
  const a = workload.metadata?.annotations ?? {};
  const named = a[RELOADER.secretReload];
  if (named !== undefined && namedReloadMatches(named, secret, meter)) return true;
  if (!referencesSecret(workload, secret)) return false;
  if (a[RELOADER.auto] === 'true' || a[RELOADER.secretAuto] === 'true') return true;
  return a[RELOADER.search] === 'true' && secretAnnotations[RELOADER.match] === 'true';
}
