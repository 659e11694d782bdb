/**
 * The few API calls a rollout needs — read, list, patch (explicit patch Content-Type, field manager, dry-run),
 * create an Event, and list-then-watch to follow the rollout — over keep-alive HTTPS with the TLS material and
 * credentials of client-node's KubeConfig.
 *
 * Why not client-node's generated clients for the requests: 2.0.1 builds a new connection pool (a TLS handshake)
 * for every request and maps every response into model classes; on the fan-out benchmark that made vault-rollout
 * 3.5x, then (with a shared pool) 1.6x slower than the same PATCHes sent raw. KubeConfig still does everything
 * about credentials: files, inline data, tokens, client certificates, TLS verification.
 */
import { ApiException } from '@kubernetes/client-node';
import type { ClusterAccess } from './cluster-access.ts';
import { KubeConnection } from './kube-connection.ts';
import { sendMeasured, type KubeResponse } from './kube-request.ts';
import { streamWatch } from './kube-watch-stream.ts';
import {
  FIELD_MANAGER,
  type ApiKind,
  type KubeApi,
  type KubeObject,
  type WatchOptions,
} from '../workloads/kube-port.ts';

export { FIELD_MANAGER } from '../workloads/kube-port.ts';
export type {
  ApiKind,
  JsonPatchOperation,
  KubeApi,
  KubeApiStats,
  WatchEvent,
  WatchOptions,
} from '../workloads/kube-port.ts';

/** Resources of the kinds vault-rollout touches; anything else is looked up once through discovery. */
const KNOWN: Readonly<Record<string, { plural: string; namespaced: boolean }>> = {
  'apps/v1/Deployment': { plural: 'deployments', namespaced: true },
  'apps/v1/StatefulSet': { plural: 'statefulsets', namespaced: true },
  'apps/v1/DaemonSet': { plural: 'daemonsets', namespaced: true },
  'batch/v1/CronJob': { plural: 'cronjobs', namespaced: true },
  'argoproj.io/v1alpha1/Rollout': { plural: 'rollouts', namespaced: true },
  'v1/Event': { plural: 'events', namespaced: true },
  'v1/Pod': { plural: 'pods', namespaced: true },
  'apps/v1/ReplicaSet': { plural: 'replicasets', namespaced: true },
  'apps/v1/ControllerRevision': { plural: 'controllerrevisions', namespaced: true },
};

type Send = (method: string, path: string, body?: unknown, contentType?: string) => Promise<KubeResponse>;
/** The collection path of a kind in a namespace ('' for all namespaces or a cluster-scoped kind). */
type Collection = (kind: ApiKind, namespace: string) => Promise<string>;
type Resource = { plural: string; namespaced: boolean };

const apis = new WeakMap<ClusterAccess, KubeApi>();

/** One API object per access: its connection pool and discovery results are reused across invocations. */
export function kubeApiFor(access: ClusterAccess, timeoutMs = 10_000): KubeApi {
  let api = apis.get(access);
  if (!api) apis.set(access, (api = createKubeApi(access, timeoutMs)));
  return api;
}

function createKubeApi(access: ClusterAccess, timeoutMs: number): KubeApi {
  const conn = new KubeConnection(access, timeoutMs);
  const send: Send = (method, path, body, contentType) => sendMeasured(conn, method, path, body, contentType);
  const resource = resourceLookup(send);
  const collection: Collection = async (kind, namespace) => {
    const r = await resource(kind);
    const ns = r.namespaced && namespace !== '' ? `/namespaces/${encodeURIComponent(namespace)}` : '';
    return `${groupPath(kind.apiVersion)}${ns}/${r.plural}`;
  };
  return {
    read: async (kind, namespace, name) =>
      (await send('GET', `${await collection(kind, namespace)}/${encodeURIComponent(name)}`)).body as KubeObject,
    list: (kind, namespace, labelSelector) => listAll(send, collection, kind, namespace, labelSelector),
    patch: async (kind, namespace, name, body, strategy, dryRun) => {
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      if (dryRun) query.set('dryRun', 'All');
      return (
        await send('PATCH', `${await collection(kind, namespace)}/${encodeURIComponent(name)}?${query}`, body, strategy)
      ).body as KubeObject;
    },
    resource,
    stats: conn.stats,
    listForWatch: (kind, namespace, options) => listForWatch(send, collection, kind, namespace, options),
    watch: async (kind, namespace, options) =>
      streamWatch(conn, `${await collection(kind, namespace)}?${watchQuery(options)}`, options),
    request: async (method, path, body) => (await send(method, path, body)).body,
    create: async (body) => {
      const kind = { apiVersion: body.apiVersion ?? 'v1', kind: body.kind ?? '' };
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      return (await send('POST', `${await collection(kind, body.metadata?.namespace ?? '')}?${query}`, body))
        .body as KubeObject;
    },
  };
}

/**
 * The resource serving a kind: the built-in table, else the group's discovery document (fetched once, again after a
 * failure).
 */
function resourceLookup(send: Send): (kind: ApiKind) => Promise<Resource> {
  const discovered = new Map<string, Promise<Record<string, Resource>>>();
  return async (kind) => {
    const known = KNOWN[`${kind.apiVersion}/${kind.kind}`];
    if (known) return known;
    let byKind = discovered.get(kind.apiVersion);
    if (!byKind) {
      byKind = send('GET', groupPath(kind.apiVersion)).then((r) => {
        const resources = (
          (r.body as { resources?: Array<{ name: string; kind: string; namespaced: boolean }> }).resources ?? []
        ).filter((x) => !x.name.includes('/'));
        return Object.fromEntries(resources.map((x) => [x.kind, { plural: x.name, namespaced: x.namespaced }]));
      });
      byKind.catch(() => discovered.delete(kind.apiVersion));
      discovered.set(kind.apiVersion, byKind);
    }
    const found = (await byKind)[kind.kind];
    if (!found)
      throw new ApiException(
        404,
        'HTTP 404',
        { message: `the server has no resource of kind ${kind.kind} in ${kind.apiVersion}` },
        {},
      );
    return found;
  };
}

/** Every object of a kind, page by page, from the API server's watch cache. */
async function listAll(
  send: Send,
  collection: Collection,
  kind: ApiKind,
  namespace: string,
  labelSelector: string | undefined,
): Promise<KubeObject[]> {
  const items: KubeObject[] = [];
  let continueToken: string | undefined;
  do {
    // resourceVersion=0: served from the API server's watch cache, not a quorum read of etcd. A stale item
    // costs nothing but a retry: patches carry the resourceVersion read, so the server answers 409 and we
    // read that one object again.
    const query = new URLSearchParams(continueToken ? { limit: '500' } : { resourceVersion: '0' });
    if (labelSelector) query.set('labelSelector', labelSelector);
    if (continueToken) query.set('continue', continueToken);
    const page = (await send('GET', `${await collection(kind, namespace)}?${query}`)).body as {
      items?: KubeObject[];
      metadata?: { continue?: string };
    };
    for (const item of page.items ?? []) items.push({ ...item, apiVersion: kind.apiVersion, kind: kind.kind });
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return items;
}

/** A consistent list and the resourceVersion a watch continues from. */
async function listForWatch(
  send: Send,
  collection: Collection,
  kind: ApiKind,
  namespace: string,
  options: { fieldSelector?: string; notOlderThan?: string } = {},
): Promise<{ items: KubeObject[]; resourceVersion: string }> {
  const items: KubeObject[] = [];
  let continueToken: string | undefined;
  let resourceVersion = '';
  do {
    // No resourceVersion: a consistent read, so the watch that follows misses nothing written before it.
    // Without it; with `notOlderThan`, any state at least that recent, from the watch cache (see the port).
    const query = new URLSearchParams({ limit: '500' });
    if (options.fieldSelector) query.set('fieldSelector', options.fieldSelector);
    if (continueToken) query.set('continue', continueToken);
    else if (options.notOlderThan) {
      query.set('resourceVersion', options.notOlderThan);
      query.set('resourceVersionMatch', 'NotOlderThan');
    }
    const page = (await send('GET', `${await collection(kind, namespace)}?${query}`)).body as
      { items?: KubeObject[]; metadata?: { continue?: string; resourceVersion?: string } } | undefined;
    // A list without items is no list: following would read it as "every workload deleted".
    if (!Array.isArray(page?.items) || !page.metadata?.resourceVersion)
      throw Object.assign(new Error('the list answer has no items or resourceVersion'), { code: 'ECONNRESET' });
    for (const item of page.items) items.push({ ...item, apiVersion: kind.apiVersion, kind: kind.kind });
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return { items, resourceVersion };
}

function watchQuery(options: WatchOptions): URLSearchParams {
  const query = new URLSearchParams({
    watch: '1',
    resourceVersion: options.resourceVersion,
    allowWatchBookmarks: 'true',
    timeoutSeconds: String(Math.max(1, Math.round(options.timeoutSeconds))),
  });
  if (options.fieldSelector) query.set('fieldSelector', options.fieldSelector);
  return query;
}

const groupPath = (apiVersion: string): string =>
  apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
