/**
 * Rollout health: one change -> 3 clusters x 20 Deployments x 3 replicas on the test clusters with simulated nodes
 * (kwok). Time from the first patch until every new pod is Ready, vault-rollout (patch, then one shared watch per
 * cluster, namespace and kind) beside a baseline in the same run: the same PATCHes sent raw, then the same
 * completeness rules (deploymentHealth) judged by the floor a hand-written follower reaches: one LIST per cluster, then
 * one WATCH from its resourceVersion, each event judged as it comes. Also: API requests per restarted workload, both
 * ways.
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { dirname } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { kubeApiFor, type KubeApi } from '../lib/kube/kube-api.ts';
import { executeRollouts } from '../lib/pipeline/kube-executor.ts';
import { deploymentHealth } from '../lib/workloads/rollout-health.ts';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { parseInput } from '../lib/sources/parse.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { alternate, rawPatcher } from './raw-baseline.ts';

const PER_CLUSTER = size(20, 2);
const REPLICAS = 3;
const ROUNDS = Number(process.env.BENCH_ROLLOUT_ROUNDS ?? size(5, 1));
const WARMUP = size(1, 0);
const ROUND_LIMIT_MS = 300_000;

const names = Array.from({ length: PER_CLUSTER }, (_, i) => `app-${String(i).padStart(2, '0')}`);

function auditWrite(version: number): string {
  return JSON.stringify({
    time: new Date(Date.UTC(2026, 10, 20, 10, 0, version)).toISOString(),
    type: 'response',
    request: {
      id: `health-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: 'secret/data/bench/health',
    },
    response: { data: { version } },
  });
}

async function createFixtures(clusters: ClusterInfo[], ns: string): Promise<void> {
  for (const c of clusters) {
    const admin = clusterClient(c, 'admin');
    await admin.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
    await Promise.all(
      names.map((name) =>
        admin.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
          body: {
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            metadata: { name, namespace: ns, labels: { bench: 'health' } },
            spec: {
              replicas: REPLICAS,
              revisionHistoryLimit: 2,
              selector: { matchLabels: { app: name } },
              template: {
                metadata: { labels: { app: name } },
                spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
              },
            },
          },
        }),
      ),
    );
  }
}

interface Listed {
  metadata: { resourceVersion: string };
  items: Array<{ metadata: { name: string } }>;
}

/**
 * The floor of following by hand, as the vault-rollout identity over keep-alive HTTPS: one LIST of the labelled
 * Deployments, then one WATCH from its resourceVersion, each object judged by the same rule until all are complete.
 * Two requests per cluster, whatever the number of Deployments.
 */
async function listAndWatchUntilComplete(c: ClusterInfo, ns: string): Promise<number> {
  const agent = new Agent({
    keepAlive: true,
    ca: readFileSync(c.caFile),
    cert: readFileSync(c.vaultRollout.certFile),
    key: readFileSync(c.vaultRollout.keyFile),
  });
  const path = `/apis/apps/v1/namespaces/${ns}/deployments?labelSelector=bench%3Dhealth`;
  try {
    const listed = await new Promise<Listed>((resolve, reject) => {
      const req = request(new URL(path, c.server), { agent, headers: { Accept: 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (b: Buffer) => chunks.push(b));
        res.on('end', () =>
          (res.statusCode ?? 0) < 300
            ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Listed)
            : reject(new Error(`LIST: HTTP ${res.statusCode}`)),
        );
      });
      req.on('error', reject);
      req.end();
    });
    const pending = new Set(names);
    const judge = (o: { metadata: { name: string } }) => {
      if (deploymentHealth(o).state === 'complete') pending.delete(o.metadata.name);
    };
    listed.items.forEach(judge);
    if (pending.size === 0) return 1;
    await new Promise<void>((resolve, reject) => {
      const watchPath = `${path}&watch=1&resourceVersion=${listed.metadata.resourceVersion}&timeoutSeconds=${ROUND_LIMIT_MS / 1000}`;
      const req = request(new URL(watchPath, c.server), { agent, headers: { Accept: 'application/json' } }, (res) => {
        let rest = '';
        res.on('data', (b: Buffer) => {
          const lines = (rest + b.toString('utf8')).split('\n');
          rest = lines.pop() ?? '';
          for (const line of lines)
            if (line.trim() !== '') judge((JSON.parse(line) as { object: Listed['items'][0] }).object);
          if (pending.size === 0) {
            req.destroy();
            resolve();
          }
        });
        res.on('end', () => (pending.size === 0 ? resolve() : reject(new Error('the watch ended first'))));
      });
      req.on('error', (e) => (pending.size === 0 ? resolve() : reject(e)));
      req.end();
    });
    return 2;
  } finally {
    agent.destroy();
  }
}

/** Until every Deployment of the namespace has settled from earlier rounds (no rollout in flight). */
async function allComplete(clusters: ClusterInfo[], ns: string): Promise<void> {
  const deadline = Date.now() + ROUND_LIMIT_MS;
  for (;;) {
    let busy = 0;
    for (const c of clusters) {
      const list = (await clusterClient(c, 'admin').request('GET', `/apis/apps/v1/namespaces/${ns}/deployments`))
        .body as { items: unknown[] };
      busy += list.items.filter((d) => deploymentHealth(d).state !== 'complete').length;
    }
    if (busy === 0) return;
    if (Date.now() > deadline) throw new Error(`${busy} Deployments never settled`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function rolloutHealthBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  const { clusters } = loadClusters();
  const ns = `bench-health-${Date.now().toString(36)}`;
  try {
    await createFixtures(clusters, ns);
    await allComplete(clusters, ns);
    const yaml = [
      'clusters:',
      ...clusters.map(
        (c) =>
          `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} }, concurrency: ${PER_CLUSTER} }`,
      ),
      'vault: { mounts: { secret: 2 } }',
      'rollout: { timeout: 5m }',
      'routes:',
      '  - name: health',
      '    match: { path: "secret/bench/health" }',
      `    targets: [{ clusters: [${clusters.map((c) => c.name).join(', ')}], namespace: ${ns}, kind: Deployment, selector: "bench=health" }]`,
    ].join('\n');
    const table = loadRoutingTable(yaml, 'bench.yaml');
    const access = new ClusterClients(
      createClusterAccessResolver(
        defaultClusterAccessDeps({
          routingTableDir: dirname(clusters[0]?.vaultRolloutKubeconfig ?? '.'),
          env: process.env,
          logger: { warn: () => {} },
        }),
      ),
    );
    const apis = new Set<KubeApi>();
    const oursRequests: number[] = [];
    const baseRequests: number[] = [];

    const ours = async (version: number) => {
      await allComplete(clusters, ns);
      const before = [...apis].reduce((n, a) => n + a.stats.requests, 0);
      const t0 = performance.now();
      const plan = planRollouts(table, parseInput(auditWrite(version), { mounts: table.mounts }).changes);
      const results = await executeRollouts(table, plan.targets, {
        access: (n, c) => access.get(n, c),
        apiFor: (a) => {
          const api = kubeApiFor(a);
          apis.add(api);
          return api;
        },
        follow: { budgetMs: ROUND_LIMIT_MS },
      });
      const ms = performance.now() - t0;
      const complete = results.filter((r) => r.outcome === 'restarted' && r.rollout === 'complete').length;
      if (complete !== clusters.length * PER_CLUSTER)
        throw new Error(
          `complete ${complete}: ${JSON.stringify(results.filter((r) => r.rollout !== 'complete').slice(0, 2))}`,
        );
      oursRequests.push(([...apis].reduce((n, a) => n + a.stats.requests, 0) - before) / complete);
      return ms;
    };
    const baseline = async (version: number) => {
      await allComplete(clusters, ns);
      const patchers = clusters.map((c) => rawPatcher(c, ns));
      const t0 = performance.now();
      const body = JSON.stringify({
        spec: {
          template: {
            metadata: {
              annotations: {
                'kubectl.kubernetes.io/restartedAt': new Date(Date.UTC(2026, 10, 21, 0, 0, version)).toISOString(),
              },
            },
          },
        },
      });
      await Promise.all(patchers.map((p) => Promise.all(names.map((n) => p.patch(n, body)))));
      const followRequests = await Promise.all(clusters.map((c) => listAndWatchUntilComplete(c, ns)));
      const ms = performance.now() - t0;
      const patches = clusters.length * PER_CLUSTER;
      baseRequests.push((followRequests.reduce((n, r) => n + r, 0) + patches) / patches);
      patchers.forEach((p) => p.close());
      return ms;
    };

    const { ours: oursMs, baseline: baseMs } = await alternate(ours, baseline, ROUNDS, WARMUP);
    const p50 = median(oursMs);
    const baseP50 = median(baseMs);
    const ratio = p50 / baseP50;
    const note = `3 clusters × ${PER_CLUSTER} Deployments × ${REPLICAS} replicas on kwok nodes; ${ROUNDS} rounds after ${WARMUP} warm-up, alternating; baseline: raw PATCHes, then one LIST and one WATCH per cluster`;
    const reqOurs = median(oursRequests.slice(-ROUNDS));
    const reqBase = median(baseRequests.slice(-ROUNDS));
    return [
      {
        name: 'rollout_complete_p50_ms',
        value: round(p50, 0),
        unit: 'ms',
        baseline: { name: 'raw PATCHes + one LIST and WATCH per cluster', value: round(baseP50, 0) },
        spread: [round(Math.min(...oursMs), 0), round(Math.max(...oursMs), 0)],
        runs: oursMs.length,
        note,
      },
      {
        name: 'rollout_complete_ratio_to_baseline',
        value: round(ratio),
        unit: '× (p50)',
        goal: '<= 1.1',
        met: ratio <= 1.1,
        runs: oursMs.length,
        note: 'first patch to every new pod Ready (Available), as the Deployment controller reports it',
      },
      {
        name: 'rollout_requests_per_workload',
        value: round(reqOurs, 2),
        unit: 'requests',
        baseline: { name: 'raw PATCH + one LIST and WATCH per cluster', value: round(reqBase, 2) },
        runs: oursMs.length,
        note: 'every HTTP request (read/list, patch, SecretRotated + RolloutComplete events, list + watch) divided by restarted Deployments',
      },
    ];
  } finally {
    for (const c of clusters) await clusterClient(c, 'admin').request('DELETE', `/api/v1/namespaces/${ns}`);
    if (started.started) await down({ log: () => {} });
  }
}
