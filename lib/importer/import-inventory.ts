/**
 * Reads, with list permission only, what `vault-rollout import` maps: VSO's and ESO's objects cluster-wide (or in the
 * namespaces given), then the workloads of the namespaces those objects live in. Every LIST is paged and bounded in
 * items and time; a kind that is not installed or not readable is named, never guessed.
 */
import { ApiException } from '@kubernetes/client-node';
import { esoSources, needsNamespaceLabels } from './eso-sources.ts';
import { emptyInventory, VSO_OPERATOR_NAMESPACE, vsoSources, type ClusterInventory } from './import-sources.ts';
import type { ApiKind, KubeApi } from '../workloads/kube-port.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';

export const IMPORT_LIMITS = {
  /** Objects of one kind in one cluster (all pages together). */
  itemsPerKind: 20_000,
  pageSize: 500,
  /** Namespaces whose workloads are listed one by one; more than that and each kind is listed cluster-wide. */
  namespacesListedApart: 50,
  /** The whole read of one cluster. */
  deadlineMs: 120_000,
} as const;

type Listable = Exclude<keyof ClusterInventory, 'cluster' | 'missing' | 'workloads' | 'namespaces'>;

const VSO = 'secrets.hashicorp.com/v1beta1';
const CRD_KINDS: ReadonlyArray<{ field: Listable; kinds: ApiKind[]; from: 'vso' | 'eso'; clusterScoped?: true }> = [
  { field: 'vaultStaticSecrets', kinds: [{ apiVersion: VSO, kind: 'VaultStaticSecret' }], from: 'vso' },
  { field: 'vaultAuths', kinds: [{ apiVersion: VSO, kind: 'VaultAuth' }], from: 'vso' },
  { field: 'vaultConnections', kinds: [{ apiVersion: VSO, kind: 'VaultConnection' }], from: 'vso' },
  { field: 'vaultDynamicSecrets', kinds: [{ apiVersion: VSO, kind: 'VaultDynamicSecret' }], from: 'vso' },
  { field: 'vaultPkiSecrets', kinds: [{ apiVersion: VSO, kind: 'VaultPKISecret' }], from: 'vso' },
  // external-secrets.io/v1 since ESO 0.16; v1beta1 before.
  {
    field: 'externalSecrets',
    kinds: [
      { apiVersion: 'external-secrets.io/v1', kind: 'ExternalSecret' },
      { apiVersion: 'external-secrets.io/v1beta1', kind: 'ExternalSecret' },
    ],
    from: 'eso',
  },
  {
    field: 'secretStores',
    kinds: [
      { apiVersion: 'external-secrets.io/v1', kind: 'SecretStore' },
      { apiVersion: 'external-secrets.io/v1beta1', kind: 'SecretStore' },
    ],
    from: 'eso',
  },
  {
    field: 'clusterSecretStores',
    kinds: [
      { apiVersion: 'external-secrets.io/v1', kind: 'ClusterSecretStore' },
      { apiVersion: 'external-secrets.io/v1beta1', kind: 'ClusterSecretStore' },
    ],
    from: 'eso',
    clusterScoped: true,
  },
];

export const WORKLOAD_API_KINDS: readonly ApiKind[] = [
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'apps/v1', kind: 'StatefulSet' },
  { apiVersion: 'apps/v1', kind: 'DaemonSet' },
  { apiVersion: 'batch/v1', kind: 'CronJob' },
  { apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout' },
];

export class ImportReadError extends Error {
  override readonly name = 'ImportReadError';
}

interface Deadline {
  at: number;
  now: () => number;
}

const status = (e: unknown): number | undefined => (e instanceof ApiException ? e.code : undefined);

/** One kind, every page, at most IMPORT_LIMITS.itemsPerKind objects. */
async function listAll(api: KubeApi, kind: ApiKind, namespace: string, deadline: Deadline): Promise<KubeObject[]> {
  const resource = await api.resource(kind);
  const base = `${kind.apiVersion.includes('/') ? `/apis/${kind.apiVersion}` : `/api/${kind.apiVersion}`}${resource.namespaced && namespace !== '' ? `/namespaces/${encodeURIComponent(namespace)}` : ''}/${resource.plural}`;
  const items: KubeObject[] = [];
  let continueToken: string | undefined;
  do {
    if (deadline.now() > deadline.at)
      throw new ImportReadError(`reading took longer than ${IMPORT_LIMITS.deadlineMs / 1000} s`);
    const query = new URLSearchParams({ limit: String(IMPORT_LIMITS.pageSize) });
    if (continueToken) query.set('continue', continueToken);
    const page = (await api.request('GET', `${base}?${query}`)) as
      { items?: KubeObject[]; metadata?: { continue?: string } } | undefined;
    if (!Array.isArray(page?.items)) throw new ImportReadError(`the list of ${kind.kind} has no items`);
    for (const item of page.items) items.push({ ...item, apiVersion: kind.apiVersion, kind: kind.kind });
    if (items.length > IMPORT_LIMITS.itemsPerKind)
      throw new ImportReadError(
        `more than ${IMPORT_LIMITS.itemsPerKind} ${kind.kind} objects; import fewer namespaces at a time (--namespace)`,
      );
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return items;
}

/**
 * The first served version of a kind, listed in each namespace (or cluster-wide with none): its objects, or
 * undefined with the reason (not installed: 404; not allowed: 403). Any other error is the cluster's failure.
 */
async function listKind(
  api: KubeApi,
  kinds: ApiKind[],
  namespaces: readonly string[],
  deadline: Deadline,
): Promise<{ items: KubeObject[] } | { missing: string }> {
  for (const kind of kinds) {
    try {
      const lists = [];
      for (const ns of namespaces.length > 0 ? namespaces : ['']) lists.push(await listAll(api, kind, ns, deadline));
      return { items: lists.flat() };
    } catch (e) {
      if (status(e) === 404) continue;
      if (status(e) === 403) return { missing: `${kind.kind} (${kind.apiVersion}): list is forbidden` };
      throw e;
    }
  }
  return { missing: `${kinds[0]?.kind} (${kinds.map((k) => k.apiVersion).join(' or ')}): not installed` };
}

export interface InventoryOptions {
  from: ReadonlySet<string>;
  /** Namespaces to read; none: cluster-wide. */
  namespaces: readonly string[];
  /** Where VSO runs: its default VaultAuth and VaultConnection are read there too. */
  vsoOperatorNamespace?: string;
}

/** Everything import needs from one cluster. */
export async function readInventory(
  cluster: string,
  api: KubeApi,
  options: InventoryOptions,
  now = Date.now,
): Promise<ClusterInventory> {
  const deadline: Deadline = { at: now() + IMPORT_LIMITS.deadlineMs, now };
  const inv = emptyInventory(cluster);
  const operatorNamespace = options.vsoOperatorNamespace ?? VSO_OPERATOR_NAMESPACE;
  const readOperators = (from: 'vso' | 'eso') => options.from.has(from) || options.from.has('reloader');
  for (const { field, kinds, from, clusterScoped } of CRD_KINDS) {
    if (!readOperators(from)) continue;
    const listed = await listKind(api, kinds, clusterScoped ? [] : options.namespaces, deadline);
    if ('missing' in listed) inv.missing.push(listed.missing);
    else inv[field] = listed.items;
    // VSO's defaults live in its own namespace, which a --namespace list may leave out; a Role that does not reach
    // it loses only the defaults, and says so.
    if (
      (field === 'vaultAuths' || field === 'vaultConnections') &&
      options.namespaces.length > 0 &&
      !options.namespaces.includes(operatorNamespace) &&
      !('missing' in listed)
    ) {
      const defaults = await listKind(api, kinds, [operatorNamespace], deadline);
      if ('missing' in defaults)
        inv.missing.push(
          `${defaults.missing} in the VSO operator namespace ${operatorNamespace} (its default is not known)`,
        );
      else inv[field].push(...defaults.items);
    }
  }
  // A ClusterSecretStore that admits namespaces by label: the Namespaces' labels decide which ExternalSecrets it
  // serves.
  if (needsNamespaceLabels(inv)) {
    const listed = await listKind(api, [{ apiVersion: 'v1', kind: 'Namespace' }], [], deadline);
    if ('missing' in listed) inv.missing.push(listed.missing);
    else inv.namespaces = listed.items;
  }
  // Workloads only where an operator writes a Secret: that is where consumers and Reloader annotations matter.
  const namespaces = [
    ...new Set(
      [...vsoSources(inv, operatorNamespace).sources, ...esoSources(inv).sources].map((s) => s.operator.namespace),
    ),
  ].sort();
  if (namespaces.length === 0) return inv;
  const apart = namespaces.length <= IMPORT_LIMITS.namespacesListedApart ? namespaces : options.namespaces;
  for (const kind of WORKLOAD_API_KINDS) {
    const listed = await listKind(api, [kind], apart, deadline);
    if ('missing' in listed) inv.missing.push(listed.missing);
    else inv.workloads.push(...listed.items.filter((w) => namespaces.includes(w.metadata?.namespace ?? '')));
  }
  return inv;
}
