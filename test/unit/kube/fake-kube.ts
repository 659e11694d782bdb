/** An in-memory Kubernetes API for unit tests of the executor and the worker (the real clusters are in test/integration). */
import { ApiException } from '@kubernetes/client-node';
import type { ClusterAccess } from '../../../lib/kube/cluster-access.ts';
import type { JsonPatchOperation, KubeApi, WatchEvent, WatchOptions } from '../../../lib/kube/kube-api.ts';
import type { ExecutorOptions } from '../../../lib/engine/rollout-executor.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { applyJsonPatch } from './json-patch.ts';

export type Call = {
  op: string;
  cluster: string;
  name?: string;
  body?: Record<string, unknown> | JsonPatchOperation[];
  dryRun?: boolean;
};

/** An in-memory cluster: objects by name, with resourceVersions, and scripted failures. */
export function fakeClusters(
  objects: Record<string, string[]>,
  failures: Array<{ cluster: string; op: string; error: () => unknown; times: number }> = [],
) {
  const calls: Call[] = [];
  const store = new Map<string, KubeObject>();
  for (const [cluster, names] of Object.entries(objects))
    for (const name of names)
      store.set(`${cluster}/${name}`, {
        metadata: { name, namespace: 'ns', resourceVersion: '1', uid: `uid-${name}` },
        spec: {},
      });
  const fail = (cluster: string, op: string) => {
    const f = failures.find((x) => x.cluster === cluster && x.op === op && x.times > 0);
    if (f) {
      f.times--;
      throw f.error();
    }
  };
  type Watcher = { cluster: string; options: WatchOptions; fail?: (e: unknown) => void };
  const watchers = new Set<Watcher>();
  const history: Array<{ cluster: string; version: number; event: WatchEvent }> = [];
  let version = 100;
  const apis = new Map<string, KubeApi>();
  const apiFor = (access: ClusterAccess): KubeApi => {
    const cluster = access.server;
    const known = apis.get(cluster);
    if (known) return known;
    const stats = { requests: 0, watches: 0, watchEvents: 0 };
    const api: KubeApi = {
      stats,
      listForWatch: async () => {
        stats.requests++;
        calls.push({ op: 'listForWatch', cluster });
        fail(cluster, 'listForWatch');
        return {
          items: [...store.entries()].filter(([k]) => k.startsWith(`${cluster}/`)).map(([, o]) => structuredClone(o)),
          resourceVersion: String(version),
        };
      },
      watch: async (_k, _ns, options) => {
        stats.requests++;
        stats.watches++;
        calls.push({ op: 'watch', cluster });
        fail(cluster, 'watch');
        const w: Watcher = { cluster, options };
        watchers.add(w);
        // Like the API server: the watch starts with every change after the version asked for.
        for (const e of history)
          if (e.cluster === cluster && e.version > Number(options.resourceVersion))
            options.onEvent(structuredClone(e.event));
        try {
          await new Promise<void>((resolve, reject) => {
            w.fail = reject;
            if (options.signal?.aborted) resolve();
            else options.signal?.addEventListener('abort', () => resolve(), { once: true });
          });
        } finally {
          watchers.delete(w);
        }
      },
      read: async (_k, _ns, name) => {
        calls.push({ op: 'read', cluster, name });
        fail(cluster, 'read');
        const o = store.get(`${cluster}/${name}`);
        if (!o) throw new ApiException(404, 'x', { message: 'not found' }, {});
        return structuredClone(o);
      },
      list: async () => {
        calls.push({ op: 'list', cluster });
        fail(cluster, 'list');
        return [...store.entries()].filter(([k]) => k.startsWith(`${cluster}/`)).map(([, o]) => structuredClone(o));
      },
      patch: async (_k, _ns, name, body, _s, dryRun) => {
        calls.push({ op: 'patch', cluster, name, body, dryRun });
        fail(cluster, 'patch');
        const o = store.get(`${cluster}/${name}`);
        if (!o) throw new ApiException(404, 'x', {}, {});
        if (Array.isArray(body)) {
          // A JSON Patch guarded by its `test` of the record, not by the resourceVersion.
          const patched = applyJsonPatch(o, body);
          if (dryRun) return patched;
          const next: KubeObject = {
            ...patched,
            metadata: { ...patched.metadata, resourceVersion: String(Number(o.metadata?.resourceVersion) + 1) },
          };
          store.set(`${cluster}/${name}`, next);
          return structuredClone(next);
        }
        if ((body.metadata as { resourceVersion?: string }).resourceVersion !== o.metadata?.resourceVersion)
          throw new ApiException(409, 'x', { message: 'conflict' }, {});
        if (dryRun) return structuredClone(o);
        const template = (
          body.spec as { template?: { metadata?: { annotations?: Record<string, string> } } } | undefined
        )?.template;
        // A merge patch of the object's own annotations (a record without a restart) merges them.
        const annotations = (body.metadata as { annotations?: Record<string, string> }).annotations;
        const metadata = {
          ...o.metadata,
          ...(annotations ? { annotations: { ...o.metadata?.annotations, ...annotations } } : {}),
          resourceVersion: String(Number(o.metadata?.resourceVersion) + 1),
        };
        const next: KubeObject = { ...o, metadata, spec: { ...o.spec, ...(template ? { template } : {}) } };
        store.set(`${cluster}/${name}`, next);
        return structuredClone(next);
      },
      create: async (body) => {
        calls.push({ op: 'create', cluster, name: body.metadata?.name });
        fail(cluster, 'create');
        return body;
      },
      resource: async () => ({ plural: 'deployments', namespaced: true }),
      request: async () => ({}),
    };
    apis.set(cluster, api);
    return api;
  };
  /** Changes an object as a controller would (status, generation) and tells every watch of its cluster. */
  const update = (key: string, change: (o: KubeObject) => KubeObject, type: WatchEvent['type'] = 'MODIFIED') => {
    const o = store.get(key);
    if (!o) throw new Error(`no ${key}`);
    const next = change(structuredClone(o));
    next.metadata = { ...next.metadata, resourceVersion: String(++version) };
    if (type === 'DELETED') store.delete(key);
    else store.set(key, next);
    const cluster = key.slice(0, key.indexOf('/'));
    history.push({ cluster, version, event: { type, object: structuredClone(next) } });
    for (const w of watchers) if (w.cluster === cluster) w.options.onEvent({ type, object: structuredClone(next) });
  };
  /** Ends every watch of a cluster with an ERROR event of this code (410 Gone, ...). */
  const breakWatches = (cluster: string, error: unknown) => {
    for (const w of watchers) if (w.cluster === cluster) w.fail?.(error);
  };
  /** Bumps an object's resourceVersion, as another writer would. */
  const touch = (key: string) => {
    const o = store.get(key);
    if (o?.metadata) o.metadata.resourceVersion = String(Number(o.metadata.resourceVersion) + 10);
  };
  return { calls, store, apiFor, touch, update, breakWatches, watchers };
}

export const options = (
  apiFor: (a: ClusterAccess) => KubeApi,
  extra: Partial<ExecutorOptions> = {},
): ExecutorOptions => ({
  access: async (name) => ({ kubeConfig: {} as never, server: name, insecureSkipTLSVerify: false }),
  apiFor,
  retryEnv: { sleep: async () => {}, random: () => 0, now: () => 0 },
  clock: { now: () => Date.parse('2026-11-21T00:00:00Z'), monotonic: () => 0 },
  ...extra,
});
