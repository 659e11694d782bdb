/**
 * Mass rotation: 500 changed paths -> 3,000 targets (1,000 Deployments in each of the three real clusters), with
 * the per-cluster concurrency limit on, beside the same PATCHes sent raw with the same concurrency per cluster.
 */
import { dirname } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { ConcurrencyLimiter } from '../lib/kernel/limiter.ts';
import { executeRollouts } from '../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { parseInput } from '../lib/sources/parse.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { alternate, rawPatcher } from './raw-baseline.ts';

export const PATHS = size(500, 3);
const CONCURRENCY = 10;
const ROUNDS = size(3, 1);
export const names = (i: number) => [`app-${i}-a`, `app-${i}-b`];

export async function createFixtures(c: ClusterInfo, ns: string): Promise<void> {
  const admin = clusterClient(c, 'admin');
  await admin.request('POST', '/api/v1/namespaces', {
    body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  });
  const limiter = new ConcurrencyLimiter(20);
  await Promise.all(
    Array.from({ length: PATHS }, (_, i) => names(i))
      .flat()
      .map((name) =>
        limiter.run(async () => {
          const res = await admin.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
            // replicas 0: the controllers make ReplicaSets but no Pods.
            body: {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              metadata: { name, namespace: ns },
              spec: {
                replicas: 0,
                revisionHistoryLimit: 1,
                selector: { matchLabels: { app: name } },
                template: {
                  metadata: { labels: { app: name } },
                  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
                },
              },
            },
          });
          if (res.status !== 201) throw new Error(`creating ${name}: HTTP ${res.status}`);
        }),
      ),
  );
}

/** The raw baseline: the same PATCHes, the same number in flight per cluster. */
function rawPatches(c: ClusterInfo, ns: string) {
  const patcher = rawPatcher(c, ns, CONCURRENCY);
  return {
    run: (version: number) => {
      const body = JSON.stringify({
        spec: {
          template: {
            metadata: {
              annotations: {
                'kubectl.kubernetes.io/restartedAt': new Date(Date.UTC(2026, 10, 22, 0, 0, version)).toISOString(),
              },
            },
          },
        },
      });
      return Promise.all(
        Array.from({ length: PATHS }, (_, i) => names(i))
          .flat()
          .map((n) => patcher.patch(n, body)),
      );
    },
    close: () => patcher.close(),
  };
}

export async function massRotationBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  const { clusters } = loadClusters();
  const ns = `bench-mass-${Date.now().toString(36)}`;
  try {
    await Promise.all(clusters.map((c) => createFixtures(c, ns)));
    const table = loadRoutingTable(
      [
        'clusters:',
        ...clusters.map(
          (c) =>
            `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} }, concurrency: ${CONCURRENCY} }`,
        ),
        'vault: { mounts: { secret: 2 } }',
        'routes:',
        '  - name: mass',
        '    match: { path: "secret/mass/{app}" }',
        `    targets: [{ clusters: [${clusters.map((c) => c.name).join(', ')}], namespace: ${ns}, names: ["*"], kind: Deployment, name: "{app}-a" }, { clusters: [${clusters.map((c) => c.name).join(', ')}], namespace: ${ns}, names: ["*"], kind: Deployment, name: "{app}-b" }]`,
      ].join('\n'),
      'bench.yaml',
    );
    const access = new ClusterClients(
      createClusterAccessResolver(
        defaultClusterAccessDeps({
          routingTableDir: dirname(clusters[0]?.vaultRolloutKubeconfig ?? '.'),
          env: process.env,
          logger: { warn: () => {} },
        }),
      ),
    );
    const raw = clusters.map((c) => rawPatches(c, ns));
    let conflicts = 0;
    let patchedTargets = 0;
    const ours = async (version: number) => {
      const lines = Array.from({ length: PATHS }, (_, i) =>
        JSON.stringify({
          time: new Date(Date.UTC(2026, 10, 21, 0, 0, version)).toISOString(),
          type: 'response',
          request: {
            id: `mass-${i}-${version}`,
            operation: 'update',
            mount_type: 'kv',
            mount_point: 'secret/',
            path: `secret/data/mass/app-${i}`,
          },
          response: { data: { version } },
        }),
      );
      const t0 = performance.now();
      const plan = planRollouts(table, parseInput(lines.join('\n'), { mounts: table.mounts }).changes);
      const t1 = performance.now();
      const results = await executeRollouts(table, plan.targets, { access: (n, c) => access.get(n, c) });
      const restarted = results.filter((r) => r.outcome === 'restarted').length;
      // A patch refused with 409 (the object changed since it was read: a controller's status write) is read again.
      conflicts += results.filter((r) => r.attempts > 1).length;
      patchedTargets += results.length;
      if (restarted !== 3 * 2 * PATHS) throw new Error(`mass rotation restarted ${restarted} of ${3 * 2 * PATHS}`);
      return t1 - t0 + Math.max(...results.map((r) => r.durationMs));
    };
    const baseline = async (version: number) => {
      const t0 = performance.now();
      await Promise.all(raw.map((r) => r.run(version)));
      return performance.now() - t0;
    };
    const { ours: oursMs, baseline: rawMs } = await alternate(ours, baseline, ROUNDS, size(1, 0));
    raw.forEach((r) => r.close());
    const targets = 3 * 2 * PATHS;
    const perSecond = targets / (median(oursMs) / 1000);
    const rawPerSecond = targets / (median(rawMs) / 1000);
    const note = `${PATHS} paths -> ${targets} Deployments over 3 clusters, ${CONCURRENCY} requests in flight per cluster for both; median of ${ROUNDS} rounds after a warm-up, alternating`;
    return [
      {
        name: 'mass_rotation_targets_per_s',
        value: round(perSecond, 0),
        unit: 'targets/s',
        baseline: { name: 'raw PATCHes, same concurrency', value: round(rawPerSecond, 0) },
        spread: [round(targets / (Math.max(...oursMs) / 1000), 0), round(targets / (Math.min(...oursMs) / 1000), 0)],
        runs: ROUNDS,
        note,
      },
      {
        name: 'mass_rotation_ratio_to_raw',
        value: round(perSecond / rawPerSecond),
        unit: '× raw throughput',
        goal: '>= 0.95',
        met: perSecond / rawPerSecond >= 0.95,
        runs: ROUNDS,
        note: `vault-rollout reads each cluster with one LIST, then patches each Deployment guarded by a JSON Patch test of the record it read; events after; ${conflicts} of ${patchedTargets} targets (all rounds) took more than one attempt`,
      },
    ];
  } finally {
    for (const c of clusters) await clusterClient(c, 'admin').request('DELETE', `/api/v1/namespaces/${ns}`);
    if (started.started) await down({ log: () => {} });
  }
}
