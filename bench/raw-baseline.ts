/**
 * The baselines the benchmarks measure vault-rollout against: the same PATCH requests sent raw over keep-alive
 * HTTPS as the vault-rollout identity, and a loop that alternates our run with the baseline's so both see the
 * same machine at the same time.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { ClusterInfo } from '../test/clusters/kube-http.ts';
import { ConcurrencyLimiter } from '../lib/kernel/limiter.ts';

export interface RawPatcher {
  /** A strategic-merge patch of one Deployment; resolves when the API server accepted it. */
  patch(name: string, body: string): Promise<void>;
  close(): void;
}

export function rawPatcher(c: ClusterInfo, namespace: string, concurrency = 64): RawPatcher {
  const agent = new Agent({
    keepAlive: true,
    maxSockets: concurrency,
    ca: readFileSync(c.caFile),
    cert: readFileSync(c.vaultRollout.certFile),
    key: readFileSync(c.vaultRollout.keyFile),
  });
  const limiter = new ConcurrencyLimiter(concurrency);
  return {
    patch: (name, body) =>
      limiter.run(
        () =>
          new Promise<void>((resolve, reject) => {
            const req = request(
              new URL(`/apis/apps/v1/namespaces/${namespace}/deployments/${name}?fieldManager=raw-baseline`, c.server),
              {
                method: 'PATCH',
                agent,
                headers: {
                  'Content-Type': 'application/strategic-merge-patch+json',
                  Accept: 'application/json',
                  'Content-Length': Buffer.byteLength(body),
                },
              },
              (res) => {
                res.resume();
                res.on('end', () =>
                  (res.statusCode ?? 0) < 300
                    ? resolve()
                    : reject(new Error(`raw PATCH ${name}: HTTP ${res.statusCode}`)),
                );
              },
            );
            req.on('error', reject);
            req.end(body);
          }),
      ),
    close: () => agent.destroy(),
  };
}

/** Runs ours then the baseline, round after round (each given the round number), dropping the warm-up rounds. */
/** A consistent LIST of a namespace's Deployments by label selector, raw, as the vault-rollout identity. */
export function rawLister(
  c: ClusterInfo,
  namespace: string,
): { list(selector: string): Promise<string[]>; close(): void } {
  const agent = new Agent({
    keepAlive: true,
    ca: readFileSync(c.caFile),
    cert: readFileSync(c.vaultRollout.certFile),
    key: readFileSync(c.vaultRollout.keyFile),
  });
  return {
    list: (selector) =>
      new Promise<string[]>((resolve, reject) => {
        const path = `/apis/apps/v1/namespaces/${namespace}/deployments?labelSelector=${encodeURIComponent(selector)}`;
        const req = request(new URL(path, c.server), { agent, headers: { Accept: 'application/json' } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (b: Buffer) => chunks.push(b));
          res.on('end', () => {
            if ((res.statusCode ?? 0) >= 300) return reject(new Error(`raw LIST: HTTP ${res.statusCode}`));
            const list = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
              items: { metadata: { name: string } }[];
            };
            resolve(list.items.map((o) => o.metadata.name));
          });
        });
        req.on('error', reject);
        req.end();
      }),
    close: () => agent.destroy(),
  };
}

export async function alternate(
  ours: (round: number) => Promise<number>,
  baseline: (round: number) => Promise<number>,
  rounds: number,
  warmup: number,
): Promise<{ ours: number[]; baseline: number[] }> {
  const out = { ours: [] as number[], baseline: [] as number[] };
  for (let round = 1; round <= warmup + rounds; round++) {
    const a = await ours(round);
    const b = await baseline(round);
    if (round > warmup) {
      out.ours.push(a);
      out.baseline.push(b);
    }
  }
  return out;
}
