/**
 * The few API calls a rollout needs — read, list, patch (explicit patch Content-Type, field manager, dry-run) and
 * create an Event — over keep-alive HTTPS with the TLS material and credentials of client-node's KubeConfig.
 *
 * Why not client-node's generated clients for the requests: 2.0.1 builds a new connection pool (a TLS handshake)
 * for every request and maps every response into model classes; on the fan-out benchmark that made vault-rollout
 * 3.5x, then (with a shared pool) 1.6x slower than the same PATCHes sent raw. KubeConfig still does everything
 * about credentials: files, inline data, tokens, client certificates, TLS verification.
 */
import { Agent, request, type RequestOptions } from 'node:https';
import { ApiException, type PatchStrategy } from '@kubernetes/client-node';
import type { ClusterAccess } from './cluster-access.ts';
import type { KubeObject } from './workload-kinds.ts';

export const FIELD_MANAGER = 'vault-rollout';

export interface ApiKind {
  apiVersion: string;
  kind: string;
}

export interface KubeApi {
  read(kind: ApiKind, namespace: string, name: string): Promise<KubeObject>;
  list(kind: ApiKind, namespace: string, labelSelector?: string): Promise<KubeObject[]>;
  patch(kind: ApiKind, namespace: string, name: string, body: Record<string, unknown>, strategy: PatchStrategy, dryRun: boolean): Promise<KubeObject>;
  create(body: KubeObject & Record<string, unknown>): Promise<KubeObject>;
  /** The resource (plural, scope) serving a kind, from a built-in table or discovery. */
  resource(kind: ApiKind): Promise<{ plural: string; namespaced: boolean }>;
  /** Any other call (doctor's /version, SelfSubjectReview, SelfSubjectAccessReview). */
  request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown>;
}

/** Resources of the kinds vault-rollout touches; anything else is looked up once through discovery. */
const KNOWN: Readonly<Record<string, { plural: string; namespaced: boolean }>> = {
  'apps/v1/Deployment': { plural: 'deployments', namespaced: true },
  'apps/v1/StatefulSet': { plural: 'statefulsets', namespaced: true },
  'apps/v1/DaemonSet': { plural: 'daemonsets', namespaced: true },
  'batch/v1/CronJob': { plural: 'cronjobs', namespaced: true },
  'argoproj.io/v1alpha1/Rollout': { plural: 'rollouts', namespaced: true },
  'v1/Event': { plural: 'events', namespaced: true },
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

  async function send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Response> {
    // Per request, so credentials that change (a refreshed token) are always current; the pool is built once.
    const options: RequestOptions = {};
    await access.kubeConfig.applyToHTTPSOptions(options);
    agent ??= new Agent({ keepAlive: true, maxSockets: 64, ca: options.ca, cert: options.cert, key: options.key, rejectUnauthorized: options.rejectUnauthorized !== false, ...(options.servername ? { servername: options.servername } : {}) });
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { ...(options.headers as Record<string, string>), Accept: 'application/json', 'User-Agent': 'vault-rollout' };
    if (payload !== undefined) {
      headers['Content-Type'] = contentType;
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = request({ protocol: base.protocol, hostname: base.hostname, port: base.port, path: `${basePath}${path}`, method, agent, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = text === '' ? undefined : JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          const status = res.statusCode ?? 0;
          const responseHeaders = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
          if (status >= 200 && status < 300) resolve({ status, headers: responseHeaders, body: parsed });
          else reject(new ApiException(status, `HTTP ${status}`, parsed, responseHeaders));
        });
      });
      req.setTimeout(timeoutMs, () => req.destroy(Object.assign(new Error(`no answer from ${base.host} in ${timeoutMs} ms`), { code: 'ETIMEDOUT' })));
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
        const resources = ((r.body as { resources?: Array<{ name: string; kind: string; namespaced: boolean }> }).resources ?? []).filter((x) => !x.name.includes('/'));
        return Object.fromEntries(resources.map((x) => [x.kind, { plural: x.name, namespaced: x.namespaced }]));
      });
      byKind.catch(() => discovered.delete(kind.apiVersion));
      discovered.set(kind.apiVersion, byKind);
    }
    const found = (await byKind)[kind.kind];
    if (!found) throw new ApiException(404, 'HTTP 404', { message: `the server has no resource of kind ${kind.kind} in ${kind.apiVersion}` }, {});
    return found;
  }

  async function collection(kind: ApiKind, namespace: string): Promise<string> {
    const r = await resource(kind);
    const ns = r.namespaced && namespace !== '' ? `/namespaces/${encodeURIComponent(namespace)}` : '';
    return `${groupPath(kind.apiVersion)}${ns}/${r.plural}`;
  }

  return {
    read: async (kind, namespace, name) => (await send('GET', `${await collection(kind, namespace)}/${encodeURIComponent(name)}`)).body as KubeObject,
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
        const page = (await send('GET', `${await collection(kind, namespace)}?${query}`)).body as { items?: KubeObject[]; metadata?: { continue?: string } };
        for (const item of page.items ?? []) items.push({ ...item, apiVersion: kind.apiVersion, kind: kind.kind });
        continueToken = page.metadata?.continue || undefined;
      } while (continueToken);
      return items;
    },
    patch: async (kind, namespace, name, body, strategy, dryRun) => {
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      if (dryRun) query.set('dryRun', 'All');
      return (await send('PATCH', `${await collection(kind, namespace)}/${encodeURIComponent(name)}?${query}`, body, strategy)).body as KubeObject;
    },
    resource,
    request: async (method, path, body) => (await send(method, path, body)).body,
    create: async (body) => {
      const kind = { apiVersion: body.apiVersion ?? 'v1', kind: body.kind ?? '' };
      const query = new URLSearchParams({ fieldManager: FIELD_MANAGER });
      return (await send('POST', `${await collection(kind, body.metadata?.namespace ?? '')}?${query}`, body)).body as KubeObject;
    },
  };
}

const groupPath = (apiVersion: string): string => (apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`);
