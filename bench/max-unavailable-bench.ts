/**
 * The issue's mass rotation under `rollout.maxUnavailable: { perCluster: 10, fleet: 20 }`: 500 changed paths ->
 * 3,000 Deployments (1,000 in each real cluster), restarted and followed to `complete` by one executor call (as
 * `apply --wait` or one worker does it), slots in a SQLite file. Beside it, the same rotation unbounded. Measured:
 * time until every rollout is complete (from clusters whose controllers have observed the new Deployments), and the
 * most rolling at once — counted three ways: the executor's own results (restarted, not yet ended), the slot
 * store's leases, and the Deployments in the clusters (sampled).
 *
 * The Deployments have `replicas: 0`, as in the mass bench: each rollout is the deployment controller's status round
 * trip, no pods. That keeps 3,000 restarts within minutes on this 2-core machine; with pods each slot would be held
 * for the pods' start-up instead, and the bounded rotation would take (3,000 / 20) x that time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { ANNOTATIONS } from '../lib/plan/restart-record.ts';
import { executeRollouts, type RolloutResult } from '../lib/pipeline/kube-executor.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../lib/workloads/workload-kinds.ts';
import { planRollouts } from '../lib/plan/planner.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { clusterScope, FLEET_SCOPE } from '../lib/slots/slot-store.ts';
import { SqliteSlotStore } from '../lib/slots/sqlite-slot-store.ts';
import { parseInput } from '../lib/sources/parse.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { round, type Figure } from './figures.ts';
import { createFixtures, PATHS } from './mass-rotation-bench.ts';

const PER_CLUSTER = 10;
const FLEET = 20;
/** The bounded rotation must end within this (one follow budget): bounded in time like every benchmark. */
const BUDGET_MS = 20 * 60_000;
/** How long the controllers may take to settle the freshly created Deployments before the clock starts. */
const SETTLE_LIMIT_MS = 10 * 60_000;

interface Run {
  /** Until the deployment controllers had observed every created Deployment (not timed as the rotation). */
  settleSeconds: number;
  seconds: number;
  complete: number;
  maxResults: number;
  maxLeases: { cluster: number; fleet: number };
  maxSampled: { cluster: number; fleet: number };
  samples: number;
}

export async function maxUnavailableBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  const { clusters } = loadClusters();
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-bench-slots-'));
  const namespaces: string[] = [];
  try {
    const access = new ClusterClients(
      createClusterAccessResolver(
        defaultClusterAccessDeps({
          routingTableDir: dirname(clusters[0]?.vaultRolloutKubeconfig ?? '.'),
          env: process.env,
          logger: { warn: () => {} },
        }),
      ),
    );
    const rotate = async (bounded: boolean): Promise<Run> => {
      const ns = `bench-slots-${bounded ? 'b' : 'u'}-${Date.now().toString(36)}`;
      namespaces.push(ns);
      await Promise.all(clusters.map((c) => createFixtures(c, ns)));
      // 1,000 new Deployments per cluster take the deployment controller minutes (its client is held to
      // kube-controller-manager's default 20 requests/s): a restart patched before that waits behind them. The
      // rotation is timed from a settled cluster, as a rotation of long-lived workloads finds it.
      const settleStart = performance.now();
      await settled(clusters, ns);
      const settleSeconds = (performance.now() - settleStart) / 1000;
      const names = clusters.map((c) => c.name).join(', ');
      const table = loadRoutingTable(
        [
          'clusters:',
          ...clusters.map(
            (c) =>
              `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} }, concurrency: 10 }`,
          ),
          'vault: { mounts: { secret: 2 } }',
          ...(bounded ? [`rollout: { maxUnavailable: { perCluster: ${PER_CLUSTER}, fleet: ${FLEET} } }`] : []),
          'routes:',
          '  - name: mass',
          '    match: { path: "secret/mass/{app}" }',
          `    targets: [{ clusters: [${names}], namespace: ${ns}, names: ["*"], kind: Deployment, name: "{app}-a" }, { clusters: [${names}], namespace: ${ns}, names: ["*"], kind: Deployment, name: "{app}-b" }]`,
        ].join('\n'),
        'bench.yaml',
      );
      const lines = Array.from({ length: PATHS }, (_, i) =>
        JSON.stringify({
          time: new Date().toISOString(),
          type: 'response',
          request: {
            id: `slots-${i}`,
            operation: 'update',
            mount_type: 'kv',
            mount_point: 'secret/',
            path: `secret/data/mass/app-${i}`,
          },
          response: { data: { version: 2 } },
        }),
      );
      const plan = planRollouts(table, parseInput(lines.join('\n'), { mounts: table.mounts }).changes);
      const slots = new SqliteSlotStore(join(dir, `${ns}.db`));
      const run: Run = {
        settleSeconds,
        seconds: 0,
        complete: 0,
        maxResults: 0,
        maxLeases: { cluster: 0, fleet: 0 },
        maxSampled: { cluster: 0, fleet: 0 },
        samples: 0,
      };
      // The executor's own view: restarted and not yet ended.
      const rolling = new Set<string>();
      const onProgress = (r: RolloutResult) => {
        const key = `${r.cluster}/${r.name}`;
        if (
          (r.outcome === 'restarted' || r.outcome === 'unchanged') &&
          (r.rollout === undefined || r.rollout === 'progressing')
        )
          rolling.add(key);
        else rolling.delete(key);
        run.maxResults = Math.max(run.maxResults, rolling.size);
      };
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const counts = await Promise.all(clusters.map((c) => rollingIn(c, ns)));
          run.maxSampled.cluster = Math.max(run.maxSampled.cluster, ...counts);
          run.maxSampled.fleet = Math.max(
            run.maxSampled.fleet,
            counts.reduce((a, b) => a + b, 0),
          );
          run.maxLeases.fleet = Math.max(run.maxLeases.fleet, (await slots.leases(FLEET_SCOPE)).length);
          for (const c of clusters)
            run.maxLeases.cluster = Math.max(run.maxLeases.cluster, (await slots.leases(clusterScope(c.name))).length);
          run.samples++;
          await new Promise((r) => setTimeout(r, 200));
        }
      })();
      const t0 = performance.now();
      try {
        const results = await executeRollouts(table, plan.targets, {
          access: (n, c) => access.get(n, c),
          slots,
          slotPollMs: 500,
          follow: { budgetMs: BUDGET_MS, onProgress },
        });
        run.seconds = (performance.now() - t0) / 1000;
        run.complete = results.filter((r) => r.rollout === 'complete').length;
      } finally {
        sampling = false;
        await sampler;
        slots.close();
      }
      return run;
    };
    const unbounded = await rotate(false);
    const bounded = await rotate(true);
    const targets = 3 * 2 * PATHS;
    const note = (r: Run) =>
      `${targets} Deployments (replicas 0) over 3 clusters, restarted and followed to complete in one call; ${r.complete} complete in ${round(r.seconds, 1)} s (timed once the controllers had settled the new Deployments, ${round(r.settleSeconds, 0)} s); most rolling at once: ${r.maxResults} by the results, ${r.maxLeases.fleet} leases (${r.maxLeases.cluster} in one cluster), ${r.maxSampled.fleet} in the clusters (${r.maxSampled.cluster} in one; ${r.samples} samples)`;
    const within =
      bounded.maxResults <= FLEET &&
      bounded.maxLeases.fleet <= FLEET &&
      bounded.maxLeases.cluster <= PER_CLUSTER &&
      bounded.maxSampled.fleet <= FLEET &&
      bounded.maxSampled.cluster <= PER_CLUSTER;
    return [
      {
        name: 'mass_rotation_bounded_complete_per_s',
        value: round(bounded.complete / bounded.seconds, 1),
        unit: 'rollouts complete/s',
        baseline: { name: 'unbounded, same run', value: round(unbounded.complete / unbounded.seconds, 1) },
        goal: `all ${targets} complete`,
        met: bounded.complete === targets && unbounded.complete === targets,
        runs: 1,
        note: `bounded { perCluster: ${PER_CLUSTER}, fleet: ${FLEET} }: ${note(bounded)}. Unbounded: ${note(unbounded)}`,
      },
      {
        name: 'mass_rotation_bounded_max_rolling',
        value: Math.max(bounded.maxResults, bounded.maxLeases.fleet, bounded.maxSampled.fleet),
        unit: 'rolling at once (fleet)',
        goal: `<= ${FLEET} fleet, <= ${PER_CLUSTER} per cluster`,
        met: within,
        baseline: { name: 'unbounded, same run', value: Math.max(unbounded.maxResults, unbounded.maxSampled.fleet) },
        runs: 1,
        note: `per cluster: ${Math.max(bounded.maxLeases.cluster, bounded.maxSampled.cluster)} at most (leases and clusters sampled every 200 ms; the results counted at every change)`,
      },
    ];
  } finally {
    for (const ns of namespaces)
      for (const c of clusters) await clusterClient(c, 'admin').request('DELETE', `/api/v1/namespaces/${ns}`);
    rmSync(dir, { recursive: true, force: true });
    if (started.started) await down({ log: () => {} });
  }
}

/** Until every Deployment of the namespace has been observed by its controller, in every cluster (bounded). */
async function settled(clusters: readonly ClusterInfo[], ns: string): Promise<void> {
  const until = performance.now() + SETTLE_LIMIT_MS;
  for (;;) {
    const pending = await Promise.all(
      clusters.map(async (c) => {
        const res = await clusterClient(c, 'admin').request('GET', `/apis/apps/v1/namespaces/${ns}/deployments`);
        return ((res.body as { items?: KubeObject[] }).items ?? []).filter(
          (d) =>
            (d.status as { observedGeneration?: number } | undefined)?.observedGeneration !== d.metadata?.generation,
        ).length;
      }),
    );
    if (pending.every((n) => n === 0)) return;
    if (performance.now() > until)
      throw new Error(
        `the deployment controllers had not observed ${pending.reduce((a, b) => a + b, 0)} new Deployments after ${SETTLE_LIMIT_MS / 1000} s`,
      );
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

/** Deployments of the namespace restarted by us whose rollout has not ended, as the cluster reports them now. */
async function rollingIn(c: ClusterInfo, ns: string): Promise<number> {
  const res = await clusterClient(c, 'admin').request('GET', `/apis/apps/v1/namespaces/${ns}/deployments`);
  const items = (res.body as { items?: KubeObject[] }).items ?? [];
  return items.filter(
    (d) =>
      (d.spec as { template?: { metadata?: { annotations?: Record<string, string> } } }).template?.metadata
        ?.annotations?.[ANNOTATIONS.restartToken] !== undefined &&
      WORKLOAD_KINDS.Deployment.health(d).state === 'progressing',
  ).length;
}
