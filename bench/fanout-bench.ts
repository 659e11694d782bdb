/**
 * Fan-out: one change -> 3 real clusters x 20 Deployments. Time until every patch is accepted, vault-rollout
 * (read, decide, conditional patch; events after) beside the same PATCH requests sent raw and all in parallel
 * over keep-alive HTTPS, alternating in one run.
 */
import { dirname } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { executeRollouts } from '../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { parseInput } from '../lib/sources/parse.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { median, percentile, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { alternate, rawLister, rawPatcher } from './raw-baseline.ts';
import { clientNodePatcher, type ClientNodePool } from './client-node-baseline.ts';

const PER_CLUSTER = size(20, 2);
const ROUNDS = size(30, 1);
const WARMUP = size(3, 0);

function auditWrite(version: number): string {
  return JSON.stringify({
    time: new Date(Date.UTC(2026, 10, 20, 10, 0, version)).toISOString(),
    type: 'response',
    request: {
      id: `fanout-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: 'secret/data/bench/fanout',
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
      Array.from({ length: PER_CLUSTER }, (_, i) => {
        const name = `app-${String(i).padStart(2, '0')}`;
        return admin.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
          body: {
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            metadata: { name, namespace: ns, labels: { bench: 'fanout' } },
            spec: {
              replicas: 1,
              revisionHistoryLimit: 2,
              selector: { matchLabels: { app: name } },
              template: {
                metadata: { labels: { app: name } },
                spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
              },
            },
          },
        });
      }),
    );
  }
}

/** The PATCH body of the baselines: the restart annotations, with a token of the arm so each round changes them. */
const restartBody = (arm: string, version: number) => ({
  spec: {
    template: {
      metadata: {
        annotations: {
          'kubectl.kubernetes.io/restartedAt': new Date(Date.UTC(2026, 10, 21, 0, 0, version)).toISOString(),
          'vault-rollout.io/restart-token': `${arm}-${version}`,
        },
      },
    },
  },
});

/** The same PATCHes through client-node's generated client: all of a cluster's at once. */
function clientNodeFanout(c: ClusterInfo, ns: string, pool: ClientNodePool) {
  const patcher = clientNodePatcher(c, ns, pool);
  return (version: number) =>
    Promise.all(
      Array.from({ length: PER_CLUSTER }, (_, i) =>
        patcher.patch(`app-${String(i).padStart(2, '0')}`, restartBody(`client-node-${pool}`, version)),
      ),
    );
}

/**
 * The raw baseline: all of a cluster's PATCHes at once. `listFirst`: the floor of any tool that finds its targets by
 * label selector, as vault-rollout does — one consistent LIST, then the PATCHes of what it found.
 */
function rawFanout(c: ClusterInfo, ns: string) {
  const patcher = rawPatcher(c, ns);
  const lister = rawLister(c, ns);
  const patchAll = (names: string[], body: string) => Promise.all(names.map((n) => patcher.patch(n, body)));
  return {
    run: (version: number) =>
      patchAll(
        Array.from({ length: PER_CLUSTER }, (_, i) => `app-${String(i).padStart(2, '0')}`),
        JSON.stringify(restartBody('raw', version)),
      ),
    listFirst: async (version: number) =>
      patchAll(await lister.list('bench=fanout'), JSON.stringify(restartBody('raw-listed', version))),
    close: () => (patcher.close(), lister.close()),
  };
}

export async function fanoutBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  const { clusters } = loadClusters();
  const ns = `bench-fanout-${Date.now().toString(36)}`;
  try {
    await createFixtures(clusters, ns);
    const yaml = [
      'clusters:',
      ...clusters.map(
        (c) =>
          `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} }, concurrency: ${PER_CLUSTER} }`,
      ),
      'vault: { mounts: { secret: 2 } }',
      'routes:',
      '  - name: fanout',
      '    match: { path: "secret/bench/fanout" }',
      `    targets: [{ clusters: [${clusters.map((c) => c.name).join(', ')}], namespace: ${ns}, kind: Deployment, selector: "bench=fanout" }]`,
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
    const raw = clusters.map((c) => rawFanout(c, ns));

    let conflicts = 0;
    let patchedTargets = 0;
    const ours = async (version: number) => {
      const t0 = performance.now();
      const plan = planRollouts(table, parseInput(auditWrite(version), { mounts: table.mounts }).changes);
      const t1 = performance.now();
      const results = await executeRollouts(table, plan.targets, {
        access: (n, c) => access.get(n, c),
        clock: { now: Date.now, monotonic: () => performance.now() },
      });
      const restarted = results.filter((r) => r.outcome === 'restarted').length;
      // A patch refused with 409 (the object changed since it was read: a controller's status write) is read again.
      conflicts += results.filter((r) => r.attempts > 1).length;
      patchedTargets += results.length;
      if (restarted !== clusters.length * PER_CLUSTER)
        throw new Error(
          `fan-out restarted ${restarted}: ${JSON.stringify(results.filter((r) => r.outcome !== 'restarted').slice(0, 2))}`,
        );
      // Until every patch was accepted: parse and plan, then the latest outcome (events are recorded after).
      return t1 - t0 + Math.max(...results.map((r) => r.durationMs));
    };
    // client-node's arms run right after the raw baseline in each round, so all three see the same machine.
    const clientNode = {
      default: clusters.map((c) => clientNodeFanout(c, ns, 'default')),
      shared: clusters.map((c) => clientNodeFanout(c, ns, 'shared')),
    };
    const clientNodeMs: Record<ClientNodePool, number[]> = { default: [], shared: [] };
    const listFirstMs: number[] = [];
    const baseline = async (version: number) => {
      const t0 = performance.now();
      await Promise.all(raw.map((r) => r.run(version)));
      const rawMs = performance.now() - t0;
      const tList = performance.now();
      await Promise.all(raw.map((r) => r.listFirst(version)));
      listFirstMs.push(performance.now() - tList);
      for (const pool of ['default', 'shared'] as const) {
        const t1 = performance.now();
        await Promise.all(clientNode[pool].map((run) => run(version)));
        clientNodeMs[pool].push(performance.now() - t1);
      }
      return rawMs;
    };

    const { ours: oursMs, baseline: rawMs } = await alternate(ours, baseline, ROUNDS, WARMUP);
    raw.forEach((r) => r.close());
    const p50 = median(oursMs);
    const rawP50 = median(rawMs);
    const ratio = p50 / rawP50;
    const cnDefault = clientNodeMs.default.slice(WARMUP);
    const cnShared = clientNodeMs.shared.slice(WARMUP);
    const listed = listFirstMs.slice(WARMUP);
    const listedP50 = median(listed);
    const clientNodeFigures = (suffix: string, ms: number[], how: string): Figure[] => [
      {
        name: `fanout_client_node${suffix}_p50_ms`,
        value: round(median(ms), 1),
        unit: 'ms',
        baseline: { name: 'raw parallel PATCHes', value: round(rawP50, 1) },
        spread: [round(Math.min(...ms), 1), round(Math.max(...ms), 1)],
        runs: ms.length,
        note: `the raw baseline's PATCHes (no LIST) through @kubernetes/client-node's AppsV1Api.patchNamespacedDeployment, ${how}; run right after the raw baseline in each round`,
      },
      {
        name: `fanout_client_node${suffix}_ratio_to_raw`,
        value: round(median(ms) / rawP50),
        unit: '× (p50)',
        runs: ms.length,
        note: `fanout_client_node${suffix}_p50_ms / the raw baseline's p50, same rounds`,
      },
    ];
    const note = `3 clusters × ${PER_CLUSTER} Deployments found by label selector, per-cluster concurrency ${PER_CLUSTER}; ${ROUNDS} rounds after ${WARMUP} warm-ups, alternating`;
    return [
      {
        name: 'fanout_p50_ms',
        value: round(p50, 1),
        unit: 'ms',
        baseline: { name: 'raw parallel PATCHes', value: round(rawP50, 1) },
        spread: [round(Math.min(...oursMs), 1), round(Math.max(...oursMs), 1)],
        runs: oursMs.length,
        note,
      },
      {
        name: 'fanout_p99_ms',
        value: round(percentile(oursMs, 99), 1),
        unit: 'ms',
        baseline: { name: 'raw parallel PATCHes', value: round(percentile(rawMs, 99), 1) },
        runs: oursMs.length,
        note,
      },
      {
        name: 'fanout_ratio_to_raw',
        value: round(ratio),
        unit: '× (p50)',
        goal: '<= 1.1',
        met: ratio <= 1.1,
        runs: oursMs.length,
        note: `vault-rollout reads each cluster once (LIST), then patches each guarded by a JSON Patch test of the record it read; ${conflicts} of ${patchedTargets} targets (all rounds) took more than one attempt`,
      },
      {
        name: 'fanout_raw_list_then_patch_p50_ms',
        value: round(listedP50, 1),
        unit: 'ms',
        baseline: { name: 'raw parallel PATCHes', value: round(rawP50, 1) },
        spread: [round(Math.min(...listed), 1), round(Math.max(...listed), 1)],
        runs: listed.length,
        note: 'the floor of finding targets by label selector: per cluster one raw consistent LIST, then the raw PATCHes of what it found; run right after the raw baseline in each round',
      },
      {
        name: 'fanout_ratio_to_raw_list_then_patch',
        value: round(p50 / listedP50),
        unit: '× (p50)',
        runs: listed.length,
        note: 'fanout_p50_ms / fanout_raw_list_then_patch_p50_ms, same rounds: what vault-rollout adds over the same requests sent raw',
      },
      ...clientNodeFigures(
        '',
        cnDefault,
        'its default transport (a new connection pool, so a TLS handshake, per request)',
      ),
      ...clientNodeFigures('_shared_pool', cnShared, 'one connection pool kept for all its requests to a cluster'),
      {
        name: 'fanout_ratio_to_client_node',
        value: round(p50 / median(cnDefault)),
        unit: '× (p50)',
        baseline: { name: 'client-node, default transport, p50 ms', value: round(median(cnDefault), 1) },
        runs: oursMs.length,
        note: 'fanout_p50_ms (vault-rollout: LIST, then guarded PATCHes over its own transport) / fanout_client_node_p50_ms (PATCHes only), same rounds',
      },
    ];
  } finally {
    for (const c of clusters) await clusterClient(c, 'admin').request('DELETE', `/api/v1/namespaces/${ns}`);
    if (started.started) await down({ log: () => {} });
  }
}
