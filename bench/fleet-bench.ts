/**
 * A fleet of 100 clusters: one change restarts 10 Deployments in each. The 100 routing-table clusters are the three
 * real test API servers, each cluster with its own kubeconfig entry, credentials, connection pool and namespace —
 * an honest stand-in for 100 API servers (the same HTTP, the same kube-apiserver code), whose own limit is that
 * three API servers answer for all of them on this machine.
 *
 * Two ways the product meets it, each timed beside raw PATCHes of the same Deployments in the same rounds:
 * - serve: one process works the 100 cluster messages at once (processBatch, as its worker loops do), following
 *   out of line; the time until every step is done, the process's CPU over that time, its peak RSS and its open
 *   connections to the API servers after it;
 * - Lambda: each cluster message is one invocation, timed alone, then its continuation's one look; the GB-s of a
 *   rotation is their sum at serverless.yml's worker memory.
 */
import { readdirSync, readFileSync, readlinkSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { memoryTelemetry } from '../lib/kernel/telemetry.ts';
import { changesByCluster } from '../lib/pipeline/intake.ts';
import { processBatch, type QueueRecord, type WorkerDeps } from '../lib/pipeline/worker.ts';
import { planRollouts } from '../lib/plan/planner.ts';
import { messageGroupId, rolloutMessages, type RolloutMessage } from '../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { MemoryRotationStore } from '../lib/rotations/rotation-store.ts';
import { benchChange, kvWrite } from '../test/secret-changes.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { alternate, rawPatcher, type RawPatcher } from './raw-baseline.ts';

const CLUSTERS = size(100, 4);
const PER_CLUSTER = size(10, 1);
const ROUNDS = size(3, 1);
const WARMUP = size(1, 0);
const clusterName = (i: number) => `c${String(i).padStart(3, '0')}`;
const RUN = Date.now().toString(36);
const ns = (i: number) => `bench-fleet-${RUN}-${String(i).padStart(3, '0')}`;
const app = (j: number) => `app-${String(j).padStart(2, '0')}`;

async function createFleet(real: readonly ClusterInfo[]): Promise<void> {
  for (let i = 0; i < CLUSTERS; i++) {
    const admin = clusterClient(real[i % real.length] as ClusterInfo, 'admin');
    await admin.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns(i) } },
    });
    await Promise.all(
      Array.from({ length: PER_CLUSTER }, (_, j) =>
        admin.request('POST', `/apis/apps/v1/namespaces/${ns(i)}/deployments`, {
          body: {
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            metadata: { name: app(j), namespace: ns(i), labels: { bench: 'fleet' } },
            spec: {
              replicas: 0,
              revisionHistoryLimit: 1,
              selector: { matchLabels: { app: app(j) } },
              template: {
                metadata: { labels: { app: app(j) } },
                spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
              },
            },
          },
        }),
      ),
    );
  }
}

function fleetRoutes(real: readonly ClusterInfo[]): string {
  const clusters = Array.from(
    { length: CLUSTERS },
    (_, i) =>
      `  ${clusterName(i)}: { kubeconfig: { file: ${JSON.stringify(real[i % real.length]?.vaultRolloutKubeconfig)} }, concurrency: ${PER_CLUSTER} }`,
  );
  const routes = Array.from(
    { length: CLUSTERS },
    (_, i) => `  - name: ${clusterName(i)}
    match: { path: "secret/bench/fleet" }
    targets: [{ clusters: [${clusterName(i)}], namespace: ${ns(i)}, kind: Deployment, selector: "bench=fleet" }]`,
  );
  return `clusters:\n${clusters.join('\n')}\nvault: { mounts: { secret: 2 } }\nroutes:\n${routes.join('\n')}\n`;
}

const changeOf = (version: number) => kvWrite('bench/fleet', version, benchChange(`fleet-${version}`));

/** This process's established TCP connections to the given ports (its sockets, from /proc). */
function connectionsTo(ports: ReadonlySet<number>): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  let n = 0;
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      const remotePort = Number.parseInt(cols[2]?.split(':')[1] ?? '', 16);
      if (cols[3] === '01' && inodes.has(cols[9] ?? '') && ports.has(remotePort)) n++;
    }
  }
  return n;
}

/** Samples RSS every 20 ms until stopped; the peak in MB. */
function rssPeak(): { stop(): number } {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  return { stop: () => (clearInterval(timer), Math.max(peak, process.memoryUsage.rss()) / 2 ** 20) };
}

export async function fleetBench(): Promise<Figure[]> {
  const started = await up({ log: () => {} });
  const real = loadClusters().clusters.slice(0, 3);
  const dir = mkdtempSync(join(tmpdir(), 'vr-fleet-bench-'));
  const MEMORY_GB =
    Number(
      /workerMemory: (\d+)/.exec(readFileSync(new URL('../serverless.yml', import.meta.url), 'utf8'))?.[1] ?? 512,
    ) / 1024;
  try {
    await createFleet(real);
    writeFileSync(join(dir, 'routes.yaml'), fleetRoutes(real));
    const table = loadRoutingTable(readFileSync(join(dir, 'routes.yaml'), 'utf8'), join(dir, 'routes.yaml'));
    const telemetry = memoryTelemetry();
    const clients = new ClusterClients(
      createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: dir, env: {}, logger: telemetry })),
    );
    const requeued: RolloutMessage[] = [];
    const deps: WorkerDeps = {
      table,
      rotations: new MemoryRotationStore(),
      telemetry,
      executor: { access: (n, c) => clients.get(n, c), logger: telemetry },
      follow: { requeue: async (m) => void requeued.push(m) },
    };
    let id = 0;
    const recordOf = (m: RolloutMessage, receiveCount = 1): QueueRecord => ({
      messageId: `fleet-${++id}`,
      body: JSON.stringify(m),
      groupId: messageGroupId(m),
      receiveCount,
    });
    const messagesOf = (version: number) => {
      const change = changeOf(version);
      return [...changesByCluster([change], planRollouts(table, [change]))].flatMap(([cluster, cs]) =>
        rolloutMessages(cluster, cs, new Date().toISOString()),
      );
    };
    const checked = (out: Awaited<ReturnType<typeof processBatch>>) => {
      const restarted = out.results.filter((r) => r.outcome === 'restarted').length;
      if (out.failed.length > 0 || out.refused.length > 0 || restarted !== CLUSTERS * PER_CLUSTER)
        throw new Error(`the fleet step restarted ${restarted}: ${JSON.stringify(out.results.slice(0, 2))}`);
    };

    // serve: the 100 cluster messages at once in one process.
    const serveCpuShare: number[] = [];
    const servePeakMb: number[] = [];
    const serveStep = async (version: number) => {
      const records = messagesOf(version).map((m) => recordOf(m));
      const before = process.memoryUsage.rss() / 2 ** 20;
      const peak = rssPeak();
      const cpu = process.cpuUsage();
      const t0 = performance.now();
      checked(await processBatch(records, deps));
      const ms = performance.now() - t0;
      const used = process.cpuUsage(cpu);
      serveCpuShare.push((used.user + used.system) / 1000 / ms);
      servePeakMb.push(peak.stop() - before);
      return ms;
    };
    const patchers: RawPatcher[] = Array.from({ length: CLUSTERS }, (_, i) =>
      rawPatcher(real[i % real.length] as ClusterInfo, ns(i), PER_CLUSTER),
    );
    const rawStep = async (version: number) => {
      const body = JSON.stringify({
        spec: { template: { metadata: { annotations: { 'vault-rollout.io/restart-token': `raw-${version}` } } } },
      });
      const t0 = performance.now();
      await Promise.all(patchers.flatMap((p) => Array.from({ length: PER_CLUSTER }, (_, j) => p.patch(app(j), body))));
      return performance.now() - t0;
    };
    const rssBefore = process.memoryUsage.rss() / 2 ** 20;
    const { ours: serveMs, baseline: rawMs } = await alternate(serveStep, rawStep, ROUNDS, WARMUP);
    patchers.forEach((p) => p.close());
    // The raw arm's sockets close on the next turns of the event loop; what stays is the product's pools.
    await new Promise((r) => setTimeout(r, 200));
    const connections = connectionsTo(new Set(real.map((c) => Number(new URL(c.server).port))));

    // Lambda: one invocation per cluster message, then one look of its continuation.
    const stepMs: number[] = [];
    const lookMs: number[] = [];
    const gbS: number[] = [];
    for (let version = 100; version < 100 + ROUNDS; version++) {
      requeued.length = 0;
      let billed = 0;
      for (const m of messagesOf(version)) {
        const t0 = performance.now();
        const out = await processBatch([recordOf(m)], deps);
        const ms = performance.now() - t0;
        if (out.failed.length > 0 || out.refused.length > 0) throw new Error('a fleet invocation failed');
        stepMs.push(ms);
        billed += ms;
      }
      for (const c of [...requeued]) {
        const t0 = performance.now();
        await processBatch([recordOf(c, 2)], { ...deps, now: () => Date.parse(c.follow?.lookAt ?? '') || Date.now() });
        const ms = performance.now() - t0;
        lookMs.push(ms);
        billed += ms;
      }
      gbS.push((billed * MEMORY_GB) / 1000);
    }

    const serveP50 = median(serveMs);
    const rawP50 = median(rawMs);
    const cpuShare = median(serveCpuShare);
    // What stops it first, as measured: this process's CPU when it was busy most of the step, else the API servers.
    const limit =
      cpuShare >= 0.8
        ? "this process's CPU (busy most of the step: parsing, TLS and JSON of 100 clusters' answers)"
        : `the API servers (the process was busy ${round(cpuShare * 100, 0)}% of the step: the rest is waiting on three kube-apiservers that answer for all ${CLUSTERS} clusters on this machine)`;
    const what = `${CLUSTERS} clusters × ${PER_CLUSTER} Deployments (replicas 0), stood in for by the 3 test kube-apiservers (a kubeconfig entry, pool and namespace per cluster)`;
    return [
      {
        name: 'fleet_serve_step_ms',
        value: round(serveP50, 1),
        unit: 'ms',
        baseline: { name: 'raw PATCHes of the same Deployments, 100 pools at once', value: round(rawP50, 1) },
        spread: [round(Math.min(...serveMs), 1), round(Math.max(...serveMs), 1)],
        runs: serveMs.length,
        note: `${what}; serve's worker on the ${CLUSTERS} cluster messages at once: read by selector, guarded PATCHes, Events, one look, a continuation each; ${ROUNDS} rounds after ${WARMUP} warm-up, alternating; the first limit: ${limit}`,
      },
      {
        name: 'fleet_serve_ratio_to_raw',
        value: round(serveP50 / rawP50),
        unit: '× (p50)',
        runs: serveMs.length,
        note: 'fleet_serve_step_ms / the raw PATCHes, same rounds (the raw arm sends no LIST, Event or look)',
      },
      {
        name: 'fleet_serve_cpu_share',
        value: round(cpuShare),
        unit: 'CPU s / wall s',
        runs: serveCpuShare.length,
        note: "the process's user + system CPU over the step's wall time (1.0: one core busy throughout)",
      },
      {
        name: 'fleet_serve_rss_added_mb',
        value: round(median(servePeakMb), 1),
        unit: 'MB',
        baseline: { name: 'RSS of the bench process before the first step', value: round(rssBefore, 1) },
        runs: servePeakMb.length,
        note: 'peak RSS during the step (sampled every 20 ms) minus the RSS when it began; the process also holds the raw arm, which runs between steps',
      },
      {
        name: 'fleet_serve_connections',
        value: connections,
        unit: 'connections',
        runs: 1,
        note: `established TCP connections of the process to the API servers after the rounds, the raw arm's pools closed first: what the product's pools keep alive, one pool per cluster (${PER_CLUSTER} requests in flight each)`,
      },
      {
        name: 'fleet_lambda_step_ms',
        value: round(median(stepMs), 1),
        unit: 'ms',
        spread: [round(Math.min(...stepMs), 1), round(Math.max(...stepMs), 1)],
        runs: stepMs.length,
        note: `one cluster message as one invocation, warm process: plan, LIST, ${PER_CLUSTER} guarded PATCHes, Events, one look, the continuation sent`,
      },
      {
        name: 'fleet_lambda_gb_s_per_rotation',
        value: round(median(gbS), 2),
        unit: 'GB-s',
        spread: [round(Math.min(...gbS), 2), round(Math.max(...gbS), 2)],
        runs: gbS.length,
        note: `${what}: ${CLUSTERS} invocations of the step and ${CLUSTERS} of one continuation look (median look ${round(median(lookMs), 1)} ms), billed per ms at ${MEMORY_GB * 1024} MB, cold starts left out`,
      },
    ];
  } finally {
    for (let i = 0; i < CLUSTERS; i++)
      await clusterClient(real[i % real.length] as ClusterInfo, 'admin').request(
        'DELETE',
        `/api/v1/namespaces/${ns(i)}`,
      );
    if (started.started) await down({ log: () => {} });
  }
}
