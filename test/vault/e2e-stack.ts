/**
 * The whole chain for end-to-end tests and the latency benchmark: `vault-rollout serve` (HTTP intake, queue,
 * worker) and `vault-rollout relay` in this process, and a watch on the Deployments of a real test cluster that
 * timestamps each restart as the API server reports it.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import { relayCommand } from '../../lib/cli/relay-command.ts';
import { serveCommand } from '../../lib/cli/serve-command.ts';
import { memoryIo } from '../helpers.ts';
import type { ClusterInfo } from '../clusters/kube-http.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN, WEBHOOK_SECRET } from '../secrets.ts';

const fileIo = (env: Record<string, string>) => {
  const io = memoryIo({}, { ...env, POWERTOOLS_METRICS_DISABLED: 'true' });
  io.readText = async (f) => readFileSync(f, 'utf8');
  return io;
};

export interface Serve {
  port: number;
  url: string;
  stop(): Promise<void>;
}

/** `vault-rollout serve` on a loopback port (0 = any), HMAC secret and bearer token from test/secrets.ts. */
export async function startServe(routesFile: string, port = 0, env: Record<string, string> = {}): Promise<Serve> {
  const abort = new AbortController();
  const io = fileIo({
    VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET,
    VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
    ...env,
  });
  const running = serveCommand(
    [
      '--routes',
      routesFile,
      '--port',
      String(port),
      '--queue-file',
      join(mkdtempSync(join(tmpdir(), 'vr-serve-')), 'queue.sqlite'),
    ],
    io,
    abort.signal,
  );
  const bound = Number(
    await waitFor(
      async () =>
        /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(io.err)?.[1] ??
        (io.err.includes('cannot') || io.err.includes('EADDRINUSE') ? Promise.reject(new Error(io.err)) : undefined),
      { timeoutMs: 15_000, what: 'serve to listen' },
    ),
  );
  return {
    port: bound,
    url: `http://127.0.0.1:${bound}`,
    stop: async () => {
      abort.abort();
      await running;
    },
  };
}

export interface Relay {
  /** The socket listener's address, when it listens. */
  address?: string;
  log(): string;
  stop(): Promise<void>;
}

/** `vault-rollout relay` with these arguments (`--to` and a spool included by the caller). */
export async function startRelay(args: string[], env: Record<string, string> = {}): Promise<Relay> {
  const abort = new AbortController();
  const io = fileIo({ VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET, ...env });
  const running = relayCommand(args, io, abort.signal);
  let address: string | undefined;
  if (args.includes('--audit-listen')) {
    address = await waitFor(async () => /"address":"([^"]+)"/.exec(io.err)?.[1], {
      timeoutMs: 15_000,
      what: 'the relay to listen',
    });
  } else {
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    ...(address ? { address } : {}),
    log: () => io.err,
    stop: async () => {
      abort.abort();
      await running;
    },
  };
}

export interface Restart {
  name: string;
  versions: Record<string, number | string>;
  at: number;
}

/** Watches a namespace's Deployments and records every change of their `vault-rollout.io/versions` record. */
/** A watch of `path` on a test cluster as admin, each event's JSON line handed to `onEvent`; returns the request to destroy. */
export function adminWatch<T>(cluster: ClusterInfo, path: string, onEvent: (event: T) => void): ClientRequest {
  const req = request(
    new URL(path, cluster.server),
    {
      ca: readFileSync(cluster.caFile),
      cert: readFileSync(cluster.admin.certFile),
      key: readFileSync(cluster.admin.keyFile),
      agent: false,
    },
    (res) => {
      let buffer = '';
      res.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8');
        for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          onEvent(JSON.parse(line) as T);
        }
      });
    },
  );
  req.on('error', () => {});
  req.end();
  return req;
}

export function watchRestarts(cluster: ClusterInfo, namespace: string): { restarts: Restart[]; stop(): void } {
  const restarts: Restart[] = [];
  const last = new Map<string, string>();
  const req = adminWatch<{
    object: {
      metadata: { name: string };
      spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
    };
  }>(cluster, `/apis/apps/v1/namespaces/${namespace}/deployments?watch=1&allowWatchBookmarks=false`, (event) => {
    const record = event.object.spec?.template?.metadata?.annotations?.['vault-rollout.io/versions'];
    const name = event.object.metadata.name;
    if (record !== undefined && record !== last.get(name)) {
      last.set(name, record);
      restarts.push({ name, versions: JSON.parse(record) as Record<string, number | string>, at: Date.now() });
    }
  });
  return { restarts, stop: () => req.destroy() };
}

export interface OrderEvent {
  kind: 'ReplicaSet' | 'Secret';
  type: string;
  name: string;
  rv: number;
  app?: string;
  data?: string;
}

/**
 * Watches a namespace's ReplicaSets and Secrets (admin identity; the test may read Secrets, vault-rollout never
 * does) and records every event with its resourceVersion (etcd revision), the `app` label, and the Secret's
 * `password` value, so a test can tell which came first. The watches start with an ADDED event per existing object.
 */
export function watchSecretsAndReplicaSets(
  cluster: ClusterInfo,
  namespace: string,
): { events: OrderEvent[]; stop(): void } {
  const events: OrderEvent[] = [];
  const reqs = (['ReplicaSet', 'Secret'] as const).map((kind) => {
    const path =
      kind === 'Secret'
        ? `/api/v1/namespaces/${namespace}/secrets?watch=1`
        : `/apis/apps/v1/namespaces/${namespace}/replicasets?watch=1`;
    return adminWatch<{
      type: string;
      object: {
        metadata: { name: string; resourceVersion: string; labels?: Record<string, string> };
        data?: Record<string, string>;
      };
    }>(cluster, path, (e) => {
      events.push({
        kind,
        type: e.type,
        name: e.object.metadata.name,
        rv: Number(e.object.metadata.resourceVersion),
        ...(e.object.metadata.labels?.app ? { app: e.object.metadata.labels.app } : {}),
        ...(e.object.data?.password ? { data: Buffer.from(e.object.data.password, 'base64').toString('utf8') } : {}),
      });
    });
  });
  return { events, stop: () => reqs.forEach((r) => r.destroy()) };
}
