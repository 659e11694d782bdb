/**
 * The few API calls a rollout needs — read, list, patch (explicit patch Content-Type, field manager, dry-run),
 * create an Event, and list-then-watch to follow the rollout — over keep-alive HTTPS with the TLS material and credentials of client-node's KubeConfig.
 *
 * Why not client-node's generated clients for the requests: 2.0.1 builds a new connection pool (a TLS handshake)
 * for every request and maps every response into model classes; on the fan-out benchmark that made vault-rollout
 * 3.5x, then (with a shared pool) 1.6x slower than the same PATCHes sent raw. KubeConfig still does everything
 * about credentials: files, inline data, tokens, client certificates, TLS verification.
 */
import { Agent, request, type RequestOptions } from 'node:https';
import { ApiException } from '@kubernetes/client-node';
import type { ClusterAccess } from './cluster-access.ts';
import { LineSplitter } from '../kernel/line-splitter.ts';
import { METRICS, observeMetric, requestOutcome } from '../kernel/telemetry.ts';
import {
  FIELD_MANAGER,
  type ApiKind,
  type KubeApi,
  type KubeApiStats,
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

/** A watch line longer than this is refused (the stream is closed and the follower relists): no unbounded buffer. */
export const MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024;

/** Resources of the kinds vault-rollout touches; anything else is looked up once through discovery. */
const KNOWN: Readonly<Record<string, { plural: string; namespaced: boolean }>> = {
  'apps/v1/Deployment': { plural: 'deployments', namespaced: true },
  'apps/v1/StatefulSet': { plural: 'statefulsets', namespaced: true },
  'apps/v1/DaemonSet': { plural: 'daemonsets', namespaced: true },
  'batch/v1/CronJob': { plural: 'cronjobs', namespaced: true },
  'argoproj.io/v1alpha1/Rollout': { plural: 'rollouts', namespaced: true },
  'v1/Event': { plural: 'events', namespaced: true },
  'v1/Pod': { plural: 'pods', namespaced: true },
};

interface Response {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

const apis = new WeakMap<ClusterAccess, KubeApi>();

/** One API object per access: its connection pool and discovery results are reused across invocations. */
export function kubeApiFor(access: ClusterAccess, timeoutMs = 10_000): KubeApi {
  let api = apis.get(access);
  if (!api) apis.set(access, (api = createKubeApi(access, timeoutMs)));
  return api;
}

function createKubeApi(access: ClusterAccess, timeoutMs: number): KubeApi {
  const base = new URL(access.server);
  const basePath = base.pathname.replace(/\/+$/, '');
  let agent: Agent | undefined;
  const stats: KubeApiStats = { requests: 0, watches: 0, watchEvents: 0 };

  async function connect(): Promise<{ headers: Record<string, string> }> {
    // Per request, so credentials that change (a refreshed token) are always current; the pool is built once.
    const options: RequestOptions = {};
    await access.kubeConfig.applyToHTTPSOptions(options);
    agent ??= new Agent({
      keepAlive: true,
      maxSockets: 64,
      ca: options.ca,
      cert: options.cert,
      key: options.key,
      rejectUnauthorized: options.rejectUnauthorized !== false,
      ...(options.servername ? { servername: options.servername } : {}),
    });
    const headers: Record<string, string> = {
      ...(options.headers as Record<string, string>),
      Accept: 'application/json',
      'User-Agent': 'vault-rollout',
    };
    if (access.bearerToken !== undefined) headers.Authorization = `Bearer ${await access.bearerToken()}`;
    return { headers };
  }

  async function streamWatch(path: string, options: WatchOptions): Promise<void> {
    const { headers } = await connect();
    stats.requests++;
    stats.watches++;
    return new Promise<void>((resolveOuter, rejectOuter) => {
      if (options.signal?.aborted) return resolveOuter();
      const onAbort = () => req.destroy();
      const resolve = () => {
        options.signal?.removeEventListener('abort', onAbort);
        resolveOuter();
      };
      // An abort is how the follower stops a watch: whatever error it causes is the end of the stream.
      const reject = (e: unknown) =>
        options.signal?.aborted ? resolve() : (options.signal?.removeEventListener('abort', onAbort), rejectOuter(e));
      const req = request(
        {
          protocol: base.protocol,
          hostname: base.hostname,
          port: base.port,
          path: `${basePath}${path}`,
          method: 'GET',
          agent,
          headers,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.length < 64 && chunks.push(c));
            res.on('end', () => {
              let parsed: unknown;
              try {
                parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
              } catch {
                parsed = undefined;
              }
              reject(new ApiException(status, `HTTP ${status}`, parsed, {}));
            });
            res.on('error', reject);
            return;
          }
          let failed = false;
          const fail = (e: unknown) => {
            if (failed) return;
            failed = true;
            req.destroy();
            reject(e);
          };
          const line = (text: string) => {
            if (text.trim() === '') return;
            let event: { type?: string; object?: KubeObject & { code?: number; message?: string; reason?: string } };
            try {
              event = JSON.parse(text) as typeof event;
            } catch {
              return fail(new Error('the watch stream sent a line that is not JSON'));
            }
            if (event.type === 'ERROR')
              return fail(
                new ApiException(event.object?.code ?? 500, `HTTP ${event.object?.code ?? 500}`, event.object, {}),
              );
            if (
              event.type !== 'ADDED' &&
              event.type !== 'MODIFIED' &&
              event.type !== 'DELETED' &&
              event.type !== 'BOOKMARK'
            )
              return;
            stats.watchEvents++;
            options.onEvent({ type: event.type, object: event.object ?? {} });
          };
          const lines = new LineSplitter({
            maxLineBytes: MAX_WATCH_LINE_BYTES,
            onLine: (text) => {
              if (!failed) line(text);
            },
            onOverlong: () => fail(new Error(`a watch event is larger than ${MAX_WATCH_LINE_BYTES} bytes`)),
          });
          res.on('data', (chunk: Buffer) => {
            if (!failed) lines.push(chunk);
          });
          res.on('error', fail);
          res.on('end', () => {
            if (!failed) lines.end();
            if (!failed) resolve();
          });
          res.on('close', () => {
            if (!failed && !res.complete) fail(new Error(`the watch on ${base.host} was cut`));
          });
        },
      );
      // Idle bound: the server ends the watch after timeoutSeconds and sends bookmarks; silence past that is a dead peer.
      req.setTimeout(options.timeoutSeconds * 1000 + timeoutMs, () =>
        req.destroy(Object.assign(new Error(`the watch on ${base.host} went silent`), { code: 'ETIMEDOUT' })),
      );
      req.on('error', reject);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      req.end();
    });
  }

  // Latency and errors per cluster (observeMetric: a no-op unless a Prometheus registry is installed).
  const cluster = access.cluster ?? 'unknown';
  async function send(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<Response> {
    const started = performance.now();
    try {
      const response = await sendOnce(method, path, body, contentType);
      observeMetric(METRICS.kubeRequestDuration, performance.now() - started, { cluster, method, outcome: 'ok' });
      return response;
    } catch (e) {
      const outcome = requestOutcome(e instanceof ApiException ? e.code : undefined);
      observeMetric(METRICS.kubeRequestDuration, performance.now() - started, { cluster, method, outcome });
      observeMetric(METRICS.kubeRequestErrors, 1, { cluster, outcome });
      throw e;
    }
  }

  async function sendOnce(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<Response> {
    const { headers } = await connect();
    stats.requests++;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) {
      headers['Content-Type'] = contentType;
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = request(
        {
          protocol: base.protocol,
          hostname: base.hostname,
          port: base.port,
          path: `${basePath}${path}`,
          method,
          agent,
          headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            // A body cut short (the server or a proxy went away) is an error, never an empty answer.
            if (!res.complete)
              return reject(
                Object.assign(new Error(`the answer from ${base.host} was cut short`), { code: 'ECONNRESET' }),
              );
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            let unparsable = false;
            try {
              parsed = text === '' ? undefined : JSON.parse(text);
            } catch {
              parsed = undefined;
              unparsable = true;
            }
            const status = res.statusCode ?? 0;
            if (unparsable && status >= 200 && status < 300)
              return reject(
                Object.assign(new Error(`the answer from ${base.host} is not JSON`), { code: 'ECONNRESET' }),
              );
            const responseHeaders = Object.fromEntries(
              Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]),
            );
            if (status >= 200 && status < 300) resolve({ status, headers: responseHeaders, body: parsed });
            else reject(new ApiException(status, `HTTP ${status}`, parsed, responseHeaders));
          });
        },
      );
      req.setTimeout(timeoutMs, () =>
        req.destroy(Object.assign(new Error(`no answer from ${base.host} in ${timeoutMs} ms`), { code: 'ETIMEDOUT' })),
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  const discovered = new Map<string, Promise<Record<string, { plural: string; namespaced: boolean }>>>();
  async function resource(kind: ApiKind): Promise<{ plural: string; namespaced: boolean }> {
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
  }

  async function collection(kind: ApiKind, namespace: string): Promise<string> {
    const r = await resource(kind);
    const ns = r.namespaced && namespace !== '' ? `/namespaces/${encodeURIComponent(namespace)}` : '';
    return `${groupPath(kind.apiVersion)}${ns}/${r.plural}`;
  }

  return {
    read: async (kind, namespace, name) =>
      (await send('GET', `${await collection(kind, namespace)}/${encodeURIComponent(name)}`)).body as KubeObject,
    list: async (kind, namespace, labelSelector) => {
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
    },
    patch: async (kind, namespace, name, body, strategy, dryRun) => {
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      if (dryRun) query.set('dryRun', 'All');
      return (
        await send('PATCH', `${await collection(kind, namespace)}/${encodeURIComponent(name)}?${query}`, body, strategy)
      ).body as KubeObject;
    },
    resource,
    stats,
    listForWatch: async (kind, namespace, options) => {
      const items: KubeObject[] = [];
      let continueToken: string | undefined;
      let resourceVersion = '';
      do {
        // No resourceVersion: a consistent read, so the watch that follows misses nothing written before it.
        const query = new URLSearchParams({ limit: '500' });
        if (options?.fieldSelector) query.set('fieldSelector', options.fieldSelector);
        if (continueToken) query.set('continue', continueToken);
        else if (options?.notOlderThan) {
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
    },
    watch: async (kind, namespace, options) => {
      const query = new URLSearchParams({
        watch: '1',
        resourceVersion: options.resourceVersion,
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(Math.max(1, Math.round(options.timeoutSeconds))),
      });
      if (options.fieldSelector) query.set('fieldSelector', options.fieldSelector);
      return streamWatch(`${await collection(kind, namespace)}?${query}`, options);
    },
    request: async (method, path, body) => (await send(method, path, body)).body,
    create: async (body) => {
      const kind = { apiVersion: body.apiVersion ?? 'v1', kind: body.kind ?? '' };
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      return (await send('POST', `${await collection(kind, body.metadata?.namespace ?? '')}?${query}`, body))
        .body as KubeObject;
    },
  };
}

const groupPath = (apiVersion: string): string =>
  apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
