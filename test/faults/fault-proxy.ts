/**
 * A fault-injecting HTTPS proxy in front of one test cluster: latency, connection resets, 500s, 429s with
 * Retry-After, and a black hole that holds every request unanswered. It serves a certificate from the cluster's
 * own CA, so clients verify TLS for real, and forwards to the real API server as the vault-rollout identity.
 * Randomness is seeded: a run's faults are reproducible. Loopback only.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterInfo } from '../clusters/kube-http.ts';
import { issueCert } from '../clusters/pki.ts';

export interface Faults {
  latencyMs: number;
  resetRate: number;
  errorRate: number;
  throttleRate: number;
  retryAfterSeconds: number;
  blackhole: boolean;
}

export const NO_FAULTS: Faults = {
  latencyMs: 0,
  resetRate: 0,
  errorRate: 0,
  throttleRate: 0,
  retryAfterSeconds: 1,
  blackhole: false,
};

export interface FaultProxy {
  url: string;
  /** A kubeconfig for the vault-rollout identity that reaches the cluster through the proxy. */
  kubeconfig: string;
  set(faults: Partial<Faults>): void;
  stats: { requests: number; resets: number; errors: number; throttled: number; held: number; forwarded: number };
  stop(): Promise<void>;
}

/** Mulberry32: a small seeded PRNG. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function startFaultProxy(cluster: ClusterInfo, seed = 42): Promise<FaultProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-faults-'));
  const serving = issueCert(
    dir,
    { certFile: cluster.caFile, keyFile: join(cluster.caFile, '..', 'ca.key') },
    { name: 'proxy', commonName: 'fault-proxy', sans: ['IP:127.0.0.1', 'DNS:localhost'], usage: 'server' },
  );
  const upstream = new URL(cluster.server);
  const agent = new Agent({
    keepAlive: true,
    maxSockets: 64,
    ca: readFileSync(cluster.caFile),
    cert: readFileSync(cluster.vaultRollout.certFile),
    key: readFileSync(cluster.vaultRollout.keyFile),
  });
  const random = seeded(seed);
  let faults: Faults = { ...NO_FAULTS };
  const stats = { requests: 0, resets: 0, errors: 0, throttled: 0, held: 0, forwarded: 0 };
  const holding = new Set<ServerResponse>();

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    stats.forwarded++;
    const headers = { ...req.headers, host: upstream.host };
    const out = request(
      { hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers, agent },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    out.end(body);
  };

  const server = createServer(
    { cert: readFileSync(serving.certFile), key: readFileSync(serving.keyFile) },
    (req, res) => {
      stats.requests++;
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const f = faults;
        if (f.blackhole) {
          // Nothing comes back: the client's own timeout must end it.
          stats.held++;
          holding.add(res);
          res.on('close', () => holding.delete(res));
          return;
        }
        const roll = random();
        const act = () => {
          if (roll < f.resetRate) {
            stats.resets++;
            req.socket.destroy();
          } else if (roll < f.resetRate + f.errorRate) {
            stats.errors++;
            res.writeHead(500, { 'content-type': 'application/json' }).end(
              JSON.stringify({
                kind: 'Status',
                apiVersion: 'v1',
                status: 'Failure',
                message: 'injected fault',
                reason: 'InternalError',
                code: 500,
              }),
            );
          } else if (roll < f.resetRate + f.errorRate + f.throttleRate) {
            stats.throttled++;
            res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(f.retryAfterSeconds) }).end(
              JSON.stringify({
                kind: 'Status',
                apiVersion: 'v1',
                status: 'Failure',
                message: 'injected throttling',
                reason: 'TooManyRequests',
                code: 429,
              }),
            );
          } else forward(req, res, Buffer.concat(chunks));
        };
        if (f.latencyMs > 0) setTimeout(act, f.latencyMs);
        else act();
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = `https://127.0.0.1:${port}`;

  const kc = new KubeConfig();
  kc.loadFromFile(cluster.vaultRolloutKubeconfig);
  const current = kc.getCurrentCluster();
  if (!current) throw new Error(`${cluster.vaultRolloutKubeconfig} has no current cluster`);
  kc.loadFromOptions({
    clusters: [{ ...current, server: url }],
    users: kc.getUsers(),
    contexts: kc.getContexts(),
    currentContext: kc.getCurrentContext(),
  });
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kc.exportConfig(), { mode: 0o600 });

  return {
    url,
    kubeconfig,
    stats,
    set: (next) => {
      faults = { ...faults, ...next };
    },
    stop: async () => {
      for (const res of holding) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
    },
  };
}
