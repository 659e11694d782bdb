/**
 * What `vault-rollout import` reads from one cluster, and what each object means for a Vault change: which KV path a
 * VaultStaticSecret (VSO) or ExternalSecret (ESO) copies into which Secret, and which workloads a change of that
 * Secret restarts today (VSO's rolloutRestartTargets, Stakater Reloader's annotations). Pure: the objects come in,
 * sources and reasons come out; nothing here reads a Secret or its data.
 */
import type { KubeObject } from '../workloads/workload-kinds.ts';
import type { WorkloadKind } from '../routing/target-schema.ts';

/** Everything listed from one cluster. Kinds that are not installed (or not readable) are named in `missing`. */
import type { WorkloadRef } from '../workloads/workload-ref.ts';

export { referencesSecret, RELOADER, reloaderRestarts } from './reloader.ts';

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

/** A workload of the operator object's namespace that the operator restarts itself. */
export type NamedWorkload = Pick<WorkloadRef, 'name'> & { kind: WorkloadKind };

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
  operatorRestarts: NamedWorkload[];
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

export const MAX_KEY_LENGTH = 256;

export const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
export const rec = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const stringMap = (v: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(rec(v)).filter((e): e is [string, string] => typeof e[1] === 'string'));
export const nameOf = (o: KubeObject) => o.metadata?.name ?? '';
export const namespaceOf = (o: KubeObject) => o.metadata?.namespace ?? '';
export const trimSlashes = (s: string) => s.replace(/^\/+|\/+$/g, '');
export const vaultNamespace = (v: unknown): string | undefined => {
  const ns = trimSlashes(str(v) ?? '');
  return ns === '' || ns === 'root' ? undefined : ns;
};

/** Why a key cannot be a literal route path, or undefined when it can. */
export function keyProblem(key: string): string | undefined {
  if (key.includes('{{') || key.includes('${'))
    return `the key "${key}" is a template; only a literal KV path can be routed`;
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
export function findRef(
  objects: KubeObject[],
  ref: string | undefined,
  referrerNamespace: string,
  operatorNamespace: string,
): KubeObject | undefined {
  const parts = ref === undefined ? [operatorNamespace, 'default'] : ref.split('/');
  if (parts.length > 2) return undefined; // VSO: invalid name
  const [ns, name] = parts.length === 2 ? parts : [referrerNamespace, ref];
  return objects.find((o) => nameOf(o) === name && namespaceOf(o) === ns);
}

/**
 * VSO's isAllowedNamespace: a VaultAuth serves its own namespace; the default one in the operator's namespace serves
 * every namespace; any other only the namespaces of its `spec.allowedNamespaces` (`["*"]`: all).
 */
export function authServes(auth: KubeObject, namespace: string, operatorNamespace: string): boolean {
  if (namespaceOf(auth) === namespace || (nameOf(auth) === 'default' && namespaceOf(auth) === operatorNamespace))
    return true;
  const allowed = arr(rec(auth.spec).allowedNamespaces);
  return (allowed.length === 1 && allowed[0] === '*') || allowed.includes(namespace);
}

export const VSO_RESTART_KINDS: Readonly<Record<string, WorkloadKind>> = {
  Deployment: 'Deployment',
  StatefulSet: 'StatefulSet',
  DaemonSet: 'DaemonSet',
  'argo.Rollout': 'Rollout',
};

/** What a VaultStaticSecret reads and writes: its KV type, mount, key and Secret; or why no rotation reaches it. */
function staticSecretPath(
  spec: Record<string, unknown>,
): { type: 'kv-v1' | 'kv-v2'; mount: string; key: string; secret: string } | string {
  const type = str(spec.type);
  if (type !== 'kv-v1' && type !== 'kv-v2') return `type ${type ?? '(none)'} is not kv-v1 or kv-v2`;
  const mount = trimSlashes(str(spec.mount) ?? '');
  const key = trimSlashes(str(spec.path) ?? '');
  if (mount === '') return 'spec.mount is empty';
  const problem = keyProblem(key);
  if (problem) return problem;
  if (spec.version !== undefined && spec.version !== 0)
    return `spec.version pins version ${String(spec.version)}: a new version in Vault changes nothing in the cluster`;
  const secret = str(rec(spec.destination).name);
  if (secret === undefined) return 'spec.destination.name is empty';
  return { type, mount, key, secret };
}

/**
 * The workloads VSO itself restarts after a sync; none when hmacSecretData is false (it cannot tell the data changed).
 */
function operatorRestartsOf(spec: Record<string, unknown>): NamedWorkload[] {
  const operatorRestarts: NamedWorkload[] = [];
  for (const t of spec.hmacSecretData === false ? [] : arr(spec.rolloutRestartTargets)) {
    const kind = VSO_RESTART_KINDS[str(rec(t).kind) ?? ''];
    const name = str(rec(t).name);
    if (kind && name) operatorRestarts.push({ kind, name });
  }
  return operatorRestarts;
}

/** One VaultStaticSecret as a source, or why it is none. */
function staticSecretSource(inv: ClusterInventory, vss: KubeObject, operatorNamespace: string): VaultSource | string {
  const spec = rec(vss.spec);
  const ns = namespaceOf(vss);
  const found = staticSecretPath(spec);
  if (typeof found === 'string') return found;
  const auth = findRef(inv.vaultAuths, str(spec.vaultAuthRef), ns, operatorNamespace);
  if (auth && !authServes(auth, ns, operatorNamespace))
    return `VaultAuth ${namespaceOf(auth)}/${nameOf(auth)} does not allow namespace ${ns} (spec.allowedNamespaces): VSO refuses to sync it`;
  const authSpec = rec(auth?.spec);
  const connection = findRef(
    inv.vaultConnections,
    str(authSpec.vaultConnectionRef),
    namespaceOf(auth ?? {}) || ns,
    operatorNamespace,
  );
  return {
    cluster: inv.cluster,
    vaultNamespace: vaultNamespace(spec.namespace ?? authSpec.namespace),
    mount: found.mount,
    kvVersion: found.type === 'kv-v1' ? 1 : 2,
    key: found.key,
    server: str(rec(connection?.spec).address),
    operator: { kind: 'VaultStaticSecret', namespace: ns, name: nameOf(vss) },
    secret: found.secret,
    secretAnnotations: stringMap(rec(spec.destination).annotations),
    operatorRestarts: operatorRestartsOf(spec),
  };
}

/**
 * VaultStaticSecrets (secrets.hashicorp.com/v1beta1) → sources; dynamic and PKI secrets → why not. Defaults (no
 * vaultAuthRef, no vaultConnectionRef) resolve only in `operatorNamespace`, as VSO resolves them.
 */
export function vsoSources(inv: ClusterInventory, operatorNamespace: string = VSO_OPERATOR_NAMESPACE): Extracted {
  const sources: VaultSource[] = [];
  const unmapped: Unmapped[] = [];
  const skip = (o: KubeObject, kind: string, reason: string) =>
    unmapped.push({ cluster: inv.cluster, kind, namespace: namespaceOf(o), name: nameOf(o), reason });
  for (const vss of inv.vaultStaticSecrets) {
    const source = staticSecretSource(inv, vss, operatorNamespace);
    if (typeof source === 'string') skip(vss, 'VaultStaticSecret', source);
    else sources.push(source);
  }
  for (const o of inv.vaultDynamicSecrets)
    skip(o, 'VaultDynamicSecret', 'a dynamic secret: VSO renews its lease, no KV write announces a new value');
  for (const o of inv.vaultPkiSecrets)
    skip(o, 'VaultPKISecret', 'a PKI certificate: VSO renews it before expiry, no KV write announces a new one');
  return { sources, unmapped };
}
