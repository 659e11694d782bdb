// Minimal HTTPS client for the local test clusters (node:https only), plus
// the reader of .local/clusters/clusters.json written by clusters.ts.
// Never logs credentials.
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LANE_LOCAL_DIR } from '../lanes.ts';

export const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** .local/clusters, or the lane's own (test/lanes.ts). */
export const CLUSTERS_DIR = join(LANE_LOCAL_DIR, 'clusters');
export const CLUSTERS_FILE = join(CLUSTERS_DIR, 'clusters.json');

export interface ClientCertFiles {
  certFile: string;
  keyFile: string;
}

export interface ClusterInfo {
  name: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** PEM file of this cluster's CA (verifies the API server, signs client certs). */
  caFile: string;
  /** kubeconfig for a system:masters client certificate. */
  adminKubeconfig: string;
  /** kubeconfig for the client-certificate user `vault-rollout`, bound only to infra/rbac/clusterrole.yaml's ClusterRole. */
  vaultRolloutKubeconfig: string;
  admin: ClientCertFiles;
  vaultRollout: ClientCertFiles;
}

export interface ClustersFile {
  kubernetesVersion: string;
  etcd: { endpoint: string };
  clusters: ClusterInfo[];
  /** The lane's OCI registry, HOST:PORT on 127.0.0.1 (test/clusters/registry.ts). */
  registry?: string;
  /** The pause and busybox images built and pushed there. */
  testImages?: { pause: string; busybox: string };
  /**
   * The real node (test/clusters/real-node.ts), in the lanes that have one: its cluster, and the address where its
   * pods reach every API server of the lane, each at its own port (the API servers' certificates name it).
   */
  realNode?: { name: string; cluster: string; apiServersAt: string };
}

/** Reads clusters.json; throws (never returns empty) when the clusters were not set up. */
export function loadClusters(file: string = CLUSTERS_FILE): ClustersFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${file} is missing: start the clusters with \`npm run clusters:up\``, { cause: err });
  }
  const parsed = JSON.parse(text) as ClustersFile;
  if (!Array.isArray(parsed.clusters) || parsed.clusters.length === 0) {
    throw new Error(`${file} lists no clusters`);
  }
  return parsed;
}

export interface Credentials {
  /** PEM CA bundle used to verify the server (the only trusted CA). */
  ca: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  token?: string;
}

export type Identity = 'admin' | 'vault-rollout' | 'anonymous';

export function credentialsFor(cluster: ClusterInfo, identity: Identity): Credentials {
  const ca = readFileSync(cluster.caFile);
  if (identity === 'anonymous') return { ca };
  const files = identity === 'admin' ? cluster.admin : cluster.vaultRollout;
  return { ca, cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
}

export interface KubeResponse<T = unknown> {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  body: T;
}

export interface RequestOptions {
  body?: unknown;
  /** Defaults to application/json when a body is given. */
  contentType?: string;
  timeoutMs?: number;
}

/** One HTTPS request (fresh connection, so every call does a full TLS handshake). */
export function kubeRequest<T = unknown>(
  server: string,
  creds: Credentials,
  method: string,
  path: string,
  opts: RequestOptions = {},
): Promise<KubeResponse<T>> {
  const url = new URL(path, server);
  const payload =
    opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (payload !== undefined) {
    headers['Content-Type'] = opts.contentType ?? 'application/json';
    headers['Content-Length'] = String(Buffer.byteLength(payload));
  }
  if (creds.token !== undefined) headers.Authorization = `Bearer ${creds.token}`;
  return new Promise((resolvePromise, reject) => {
    const req = httpsRequest(
      url,
      {
        method,
        headers,
        ca: creds.ca,
        ...(creds.cert !== undefined ? { cert: creds.cert } : {}),
        ...(creds.key !== undefined ? { key: creds.key } : {}),
        agent: false,
        rejectUnauthorized: true,
        timeout: opts.timeoutMs ?? 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          if ((res.headers['content-type'] ?? '').includes('json')) {
            try {
              body = JSON.parse(text);
            } catch {
              body = undefined;
            }
          }
          resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, text, body: body as T });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url.href} timed out`)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/** A bound client for one cluster and identity. */
export interface KubeClient {
  server: string;
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<KubeResponse<T>>;
}

export function client(server: string, creds: Credentials): KubeClient {
  return {
    server,
    request: <T = unknown>(method: string, path: string, opts?: RequestOptions) =>
      kubeRequest<T>(server, creds, method, path, opts),
  };
}

export function clusterClient(cluster: ClusterInfo, identity: Identity): KubeClient {
  return client(cluster.server, credentialsFor(cluster, identity));
}

export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Used in the timeout error. */
  what: string;
}

/**
 * Polls `probe` until it returns a value other than undefined/false; throws
 * after timeoutMs. A probe error is retried unless it has `fatal: true`.
 */
export async function waitFor<T>(probe: () => Promise<T | undefined | false>, opts: WaitOptions): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
      lastError = undefined;
    } catch (err) {
      if ((err as { fatal?: unknown } | null)?.fatal === true) throw err;
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${opts.what}${why}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}
