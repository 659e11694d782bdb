/**
 * Never wait in line, on the real test clusters:
 *
 * - `behind`: while one Deployment's rollout takes about a minute (6 replicas replaced one at a time, each Ready 10 s
 *   after it starts: kwok's "slow" readiness), write → patch of another workload in the same cluster and of one in
 *   another cluster, through a real OpenBao's http audit device and `serve`; baseline: a PATCH sent straight to the
 *   API server after a write. Before continuations, the same changes waited out the slow rollout (28.6 s and 28.7 s,
 *   measured then).
 * - `wake`: from a rollout's last pod Ready (the Deployment's status says complete, seen on a watch) to its
 *   RolloutComplete Event (seen on a watch) in `serve`, with its watch waking the held continuation; baseline: the
 *   same `serve` with VAULT_ROLLOUT_WATCH=off, where the continuation sees it at its next look (as in Lambda).
 * - `lambda-cost`: the Lambda worker's billed duration for a rotation of 100 workloads in 3 clusters whose rollouts
 *   take 2 minutes, on paper from measured invocation durations: the cluster step and one continuation look, timed on
 *   the real clusters (processBatch, one message per invocation as `workerBatchSize: auto` sends them), times the
 *   number of looks the one waiting decision makes over 2 minutes; before: the same step, then the rollout followed
 *   in line (a 60 s follow budget and a follow-up invocation for the rest: every second of it billed).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterClients } from '../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../lib/kube/credentials/resolve.ts';
import { memoryTelemetry } from '../lib/kernel/telemetry.ts';
import { changesByCluster } from '../lib/pipeline/intake.ts';
import { executeRollouts } from '../lib/pipeline/kube-executor.ts';
import { processBatch, type QueueRecord, type WorkerDeps } from '../lib/pipeline/worker.ts';
import { decideWait } from '../lib/plan/look-again.ts';
import { planRollouts, targetsByCluster } from '../lib/plan/planner.ts';
import { messageGroupId, rolloutMessages, type RolloutMessage } from '../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../lib/routing/routing-table.ts';
import { MemoryRotationStore } from '../lib/rotations/rotation-store.ts';
import { benchChange, kvWrite } from '../test/secret-changes.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, loadClusters, waitFor, type ClusterInfo } from '../test/clusters/kube-http.ts';
import { BEARER_TOKEN } from '../test/secrets.ts';
import { adminWatch, startServe, watchRestarts } from '../test/vault/e2e-stack.ts';
import { startDevServer } from '../test/vault/server.ts';
import { median, percentile, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { rawPatcher } from './raw-baseline.ts';

const GOAL_RATIO = 3;
const SLOW = { 'vault-rollout.test/readiness': 'slow' };
const ONE_AT_A_TIME = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } };

interface Stage {
  clusters: Map<string, ClusterInfo>;
  ns: string;
  dir: string;
  close(): Promise<void>;
}

/** The test clusters (started when not running), a fresh namespace in each of `names`, and a scratch folder. */
async function stage(prefix: string, names: string[]): Promise<Stage> {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
  const started = await up({ log: () => {} });
  const clusters = new Map(
    loadClusters()
      .clusters.filter((c) => names.includes(c.name))
      .map((c) => [c.name, c]),
  );
  const ns = `bench-${prefix}-${Date.now().toString(36)}`;
  for (const c of clusters.values())
    await clusterClient(c, 'admin').request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
    });
  return {
    clusters,
    ns,
    dir: mkdtempSync(join(tmpdir(), `vault-rollout-bench-${prefix}-`)),
    close: async () => {
      for (const c of clusters.values()) await clusterClient(c, 'admin').request('DELETE', `/api/v1/namespaces/${ns}`);
      if (started.started) await down({ log: () => {} });
    },
  };
}

interface DeploymentSpec {
  name: string;
  replicas: number;
  slow?: boolean;
  labels?: Record<string, string>;
}

async function deployments(c: ClusterInfo, ns: string, specs: DeploymentSpec[]): Promise<void> {
  const admin = clusterClient(c, 'admin');
  for (const s of specs) {
    await admin.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: s.name, namespace: ns, labels: s.labels ?? {} },
        spec: {
          replicas: s.replicas,
          revisionHistoryLimit: 1,
          strategy: ONE_AT_A_TIME,
          selector: { matchLabels: { app: s.name } },
          template: {
            metadata: { labels: { app: s.name }, annotations: s.slow ? SLOW : {} },
            spec: { containers: [{ name: 'a', image: 'registry.invalid/a:1' }] },
          },
        },
      },
    });
  }
  for (const s of specs)
    await waitFor(
      async () => s.replicas === 0 || (await status(c, ns, s.name)).readyReplicas === s.replicas || undefined,
      { timeoutMs: 120_000, intervalMs: 500, what: `${s.name} Ready` },
    );
}

interface DeploymentView {
  metadata: { name: string; generation?: number; annotations?: Record<string, string> };
  spec?: { replicas?: number; template?: { metadata?: { annotations?: Record<string, string> } } };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
    readyReplicas?: number;
  };
}

async function status(c: ClusterInfo, ns: string, name: string): Promise<NonNullable<DeploymentView['status']>> {
  return (
    (
      (await clusterClient(c, 'admin').request('GET', `/apis/apps/v1/namespaces/${ns}/deployments/${name}`))
        .body as DeploymentView
    ).status ?? {}
  );
}

/** Complete by its status (as the deployment controller and `kubectl rollout status` judge it). */
const rolledOut = (d: DeploymentView): boolean => {
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  return (
    s.observedGeneration === d.metadata.generation &&
    s.updatedReplicas === want &&
    s.availableReplicas === want &&
    s.replicas === want
  );
};

const goal = (baseline: number) => round(GOAL_RATIO * Math.max(1, baseline), 1);

export async function behindBench(): Promise<Figure[]> {
  const WRITES = size(60, 2);
  const WARMUP = size(5, 0);
  const s = await stage('behind', ['alpha', 'beta']);
  const alpha = s.clusters.get('alpha') as ClusterInfo;
  const beta = s.clusters.get('beta') as ClusterInfo;
  await deployments(alpha, s.ns, [
    { name: 'slow', replicas: 6, slow: true },
    { name: 'same', replicas: 0 },
    { name: 'raw', replicas: 0 },
  ]);
  await deployments(beta, s.ns, [{ name: 'other', replicas: 0 }]);
  const routesFile = join(s.dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(alpha.vaultRolloutKubeconfig)} } }
  beta: { kubeconfig: { file: ${JSON.stringify(beta.vaultRolloutKubeconfig)} } }
vault: { mounts: { kv2: 2 } }
routes:
  - name: slow
    match: { path: "kv2/slow/db" }
    rollout: { timeout: 600s }
    targets: [{ clusters: [alpha], namespace: ${s.ns}, kind: Deployment, name: slow }]
  - name: same
    match: { path: "kv2/same/db" }
    targets: [{ clusters: [alpha], namespace: ${s.ns}, kind: Deployment, name: same }]
  - name: other
    match: { path: "kv2/other/db" }
    targets: [{ clusters: [beta], namespace: ${s.ns}, kind: Deployment, name: other }]
`,
  );
  const watchAlpha = watchRestarts(alpha, s.ns);
  const watchBeta = watchRestarts(beta, s.ns);
  // serve's defaults: follow on (out of line), a watch to wake continuations, 4 loops.
  const serve = await startServe(routesFile);
  const server = await startDevServer({
    kind: 'openbao',
    auditFile: join(s.dir, 'side-audit.log'),
    audit: [
      {
        type: 'http',
        path: 'http',
        options: {
          uri: `${serve.url}/v1/vault/audit`,
          headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
        },
      },
    ],
  });
  const raw = rawPatcher(alpha, s.ns, 1);
  try {
    await server.client.enableKv('kv2', 2);
    const seen = (watch: typeof watchAlpha, name: string, count: number) =>
      waitFor(async () => watch.restarts.filter((r) => r.name === name)[count - 1]?.at, {
        timeoutMs: 60_000,
        intervalMs: 2,
        what: `restart ${count} of ${name}`,
      });
    // The slow rollout: patched, then rolling for about a minute while everything below is measured.
    await server.client.kv2Write('kv2', 'slow/db', { n: 1 });
    const slowPatched = await seen(watchAlpha, 'slow', 1);
    const same: number[] = [];
    const other: number[] = [];
    const rawMs: number[] = [];
    for (let n = 1; n <= WARMUP + WRITES; n++) {
      await server.client.kv2Write('kv2', 'same/db', { n });
      let returned = Date.now();
      const a = (await seen(watchAlpha, 'same', n)) - returned;
      await server.client.kv2Write('kv2', 'other/db', { n });
      returned = Date.now();
      const b = (await seen(watchBeta, 'other', n)) - returned;
      await server.client.kv2Write('kv2', 'unrouted/db', { n });
      returned = Date.now();
      await raw.patch(
        'raw',
        JSON.stringify({
          spec: {
            template: { metadata: { annotations: { 'vault-rollout.io/versions': JSON.stringify({ raw: n }) } } },
          },
        }),
      );
      const c = (await seen(watchAlpha, 'raw', n)) - returned;
      if (n > WARMUP) {
        same.push(a);
        other.push(b);
        rawMs.push(c);
      }
    }
    const measuredFor = Date.now() - slowPatched;
    const slowStatus = await status(alpha, s.ns, 'slow');
    const stillRolling = (slowStatus.updatedReplicas ?? 0) < 6 || (slowStatus.replicas ?? 0) > 6;
    if (!stillRolling)
      throw new Error(
        `the slow rollout ended before the ${WRITES} writes did (${measuredFor} ms): the figures would not be behind a rollout`,
      );
    const rawP50 = round(median(rawMs), 1);
    const rawP99 = round(percentile(rawMs, 99), 1);
    const base = { name: 'a PATCH sent straight to the API server after the write', value: rawP50 };
    const note = (where: string) =>
      `OpenBao ${server.version} dev server -> http audit device -> serve (defaults: follow on, watch on, 4 loops) -> ${where}; ${WRITES} sequential writes (after ${WARMUP} warm-up), all within ${round(measuredFor / 1000, 1)} s of the slow rollout's patch, which was still rolling at the end (6 replicas one at a time, 10 s each); before continuations: 28.6 s (same cluster) and 28.7 s (other cluster)`;
    const figures = (prefix: string, ms: number[], where: string): Figure[] => {
      const p50 = round(median(ms), 1);
      const p99 = round(percentile(ms, 99), 1);
      return [
        {
          name: `${prefix}_p50_ms`,
          value: p50,
          unit: 'ms',
          goal: `<= ${goal(rawP50)} (${GOAL_RATIO}x baseline)`,
          met: p50 <= goal(rawP50),
          baseline: base,
          spread: [Math.min(...ms), Math.max(...ms)],
          runs: WRITES,
          note: note(where),
        },
        {
          name: `${prefix}_p99_ms`,
          value: p99,
          unit: 'ms',
          goal: `<= ${goal(rawP99)} (${GOAL_RATIO}x baseline)`,
          met: p99 <= goal(rawP99),
          baseline: { ...base, value: rawP99 },
          runs: WRITES,
          note: note(where),
        },
      ];
    };
    return [
      ...figures('behind_slow_rollout_same_cluster', same, "another Deployment in the rolling one's cluster"),
      ...figures('behind_slow_rollout_other_cluster', other, 'a Deployment in another cluster'),
    ];
  } finally {
    raw.close();
    watchAlpha.stop();
    watchBeta.stop();
    await server.stop();
    await serve.stop();
    await s.close();
  }
}

export async function wakeBench(): Promise<Figure[]> {
  const ROUNDS = size(4, 1);
  const s = await stage('wake', ['alpha']);
  const alpha = s.clusters.get('alpha') as ClusterInfo;
  // 2 replicas one at a time, 10 s each: a 20 s rollout, so the continuation's looks are 1-5 s apart at its end.
  await deployments(alpha, s.ns, [{ name: 'wake', replicas: size(2, 1), slow: true }]);
  const routesFile = join(s.dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:\n  alpha: { kubeconfig: { file: ${JSON.stringify(alpha.vaultRolloutKubeconfig)} } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: wake\n    match: { path: "secret/wake/db" }\n    targets: [{ clusters: [alpha], namespace: ${s.ns}, kind: Deployment, name: wake }]\n`,
  );
  // When the Deployment's status first says complete for a version, and when its RolloutComplete Event appears.
  const readyAt = new Map<number, number>();
  const completeAt = new Map<number, number>();
  const deployWatch = adminWatch<{ object: DeploymentView }>(
    alpha,
    `/apis/apps/v1/namespaces/${s.ns}/deployments?watch=1`,
    (e) => {
      const version = (
        JSON.parse(e.object.spec?.template?.metadata?.annotations?.['vault-rollout.io/versions'] ?? '{}') as Record<
          string,
          number
        >
      )['secret/wake/db'];
      if (version !== undefined && rolledOut(e.object) && !readyAt.has(version)) readyAt.set(version, Date.now());
    },
  );
  const eventWatch = adminWatch<{ object: { reason?: string; message?: string } }>(
    alpha,
    `/api/v1/namespaces/${s.ns}/events?watch=1`,
    (e) => {
      const version =
        e.object.reason === 'RolloutComplete' ? Number(/version (\d+)/.exec(e.object.message ?? '')?.[1]) : NaN;
      if (Number.isFinite(version) && !completeAt.has(version)) completeAt.set(version, Date.now());
    },
  );
  let version = 0;
  let request = 0;
  const rounds = async (env: Record<string, string>): Promise<number[]> => {
    const serve = await startServe(routesFile, 0, env);
    const ms: number[] = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        version++;
        const audit = JSON.stringify({
          time: new Date().toISOString(),
          type: 'response',
          request: {
            id: `wake-${++request}`,
            operation: 'update',
            mount_type: 'kv',
            mount_point: 'secret/',
            path: 'secret/data/wake/db',
          },
          response: { data: { version } },
        });
        const res = await fetch(`${serve.url}/v1/vault/audit`, {
          method: 'POST',
          body: audit,
          headers: { authorization: `Bearer ${BEARER_TOKEN}` },
        });
        if (res.status !== 202) throw new Error(`intake answered ${res.status}`);
        const v = version;
        const complete = await waitFor(async () => completeAt.get(v), {
          timeoutMs: 120_000,
          intervalMs: 20,
          what: `RolloutComplete for version ${v}`,
        });
        const ready = readyAt.get(v);
        if (ready === undefined) throw new Error(`no complete status seen for version ${v}`);
        ms.push(complete - ready);
      }
    } finally {
      await serve.stop();
    }
    return ms;
  };
  try {
    const watched = await rounds({});
    const unwatched = await rounds({ VAULT_ROLLOUT_WATCH: 'off' });
    const p50 = round(median(watched), 1);
    const note = `serve on alpha; a Deployment of 2 replicas replaced one at a time, each Ready 10 s after it starts (a 20 s rollout); from the watch event whose status says complete to the watch event of its RolloutComplete Event; ${ROUNDS} rollouts each way, one after the other`;
    return [
      {
        name: 'last_pod_ready_to_complete_ms',
        value: p50,
        unit: 'ms',
        goal: '<= 1000',
        met: Math.max(...watched) <= 1000,
        baseline: {
          name: 'the same serve with VAULT_ROLLOUT_WATCH=off: seen at the next look',
          value: round(median(unwatched), 1),
        },
        spread: [Math.min(...watched), Math.max(...watched)],
        runs: ROUNDS,
        note,
      },
      {
        name: 'last_pod_ready_to_complete_ms_no_watch',
        value: round(median(unwatched), 1),
        unit: 'ms',
        spread: [Math.min(...unwatched), Math.max(...unwatched)],
        runs: ROUNDS,
        note: `${note}; VAULT_ROLLOUT_WATCH=off, as in Lambda (no process to keep a watch in)`,
      },
    ];
  } finally {
    deployWatch.destroy();
    eventWatch.destroy();
    await s.close();
  }
}

/** How many looks the one waiting decision makes over a rollout of this length (each look is one billed invocation). */
export function looksOver(rolloutMs: number): number {
  let t = 0;
  let looks = 0;
  // Each look decides the delay to the next; the look at or after the rollout's end finishes it.
  while (t < rolloutMs) {
    const d = decideWait({ pending: true, now: t, since: 0 });
    if (d.action !== 'lookAgainAfter') break;
    t += d.ms;
    looks++;
  }
  return looks;
}

export async function lambdaCostBench(): Promise<Figure[]> {
  const WORKLOADS = size(100, 3);
  const ROUNDS = size(3, 1);
  const LOOKS_PER_ROUND = size(3, 1);
  /** The in-line follower of earlier releases had up to this long per invocation (then a follow-up took over). */
  const IN_LINE_BUDGET_MS = 600_000;
  /** serverless.yml's workerMemory (the default stage): GB-seconds = seconds × this. */
  const MEMORY_GB =
    Number(
      /workerMemory: (\d+)/.exec(readFileSync(new URL('../serverless.yml', import.meta.url), 'utf8'))?.[1] ?? 512,
    ) / 1024;
  const names = ['alpha', 'beta', 'gamma'];
  const s = await stage('cost', names);
  const infos = names.map((n) => s.clusters.get(n) as ClusterInfo);
  for (const [i, c] of infos.entries()) {
    const specs: DeploymentSpec[] = [];
    for (let w = i; w < WORKLOADS; w += names.length)
      specs.push({ name: `app-${w}`, replicas: 1, slow: true, labels: { fleet: 'yes' } });
    await deployments(c, s.ns, specs);
  }
  const table = loadRoutingTable(
    `clusters:\n${infos.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: fleet\n    match: { path: "secret/fleet/db" }\n    rollout: { timeout: 600s }\n    targets: [{ clusters: [${names.join(', ')}], namespace: ${s.ns}, kind: Deployment, selector: "fleet=yes" }]\n`,
    join(s.dir, 'routes.yaml'),
  );
  const telemetry = memoryTelemetry();
  const clients = new ClusterClients(
    createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: s.dir, env: {}, logger: telemetry })),
  );
  const requeued: RolloutMessage[] = [];
  const deps: WorkerDeps = {
    table,
    rotations: new MemoryRotationStore(),
    telemetry,
    executor: { access: (n, c) => clients.get(n, c), logger: telemetry },
    follow: { requeue: async (m) => void requeued.push(m) },
  };
  const stepMs: number[] = [];
  const lookMs: number[] = [];
  const rolloutMs: number[] = [];
  const inLineGbS: number[] = [];
  let id = 0;
  const timed = async (records: QueueRecord[], now?: number): Promise<number> => {
    const t0 = performance.now();
    const out = await processBatch(records, now === undefined ? deps : { ...deps, now: () => now });
    const ms = performance.now() - t0;
    if (out.failed.length > 0 || out.refused.length > 0)
      throw new Error(`a worker invocation failed: ${JSON.stringify(out.refused)}`);
    return ms;
  };
  const changeOf = (version: number) => kvWrite('fleet/db', version, benchChange(`cost-${version}`));
  const rolledOut = async () => {
    for (const c of infos)
      for (let w = names.indexOf(c.name); w < WORKLOADS; w += names.length)
        await waitFor(
          async () => {
            const st = await status(c, s.ns, `app-${w}`);
            return (st.updatedReplicas === 1 && st.availableReplicas === 1 && st.replicas === 1) || undefined;
          },
          { timeoutMs: 120_000, intervalMs: 200, what: `app-${w} rolled out` },
        );
  };
  try {
    for (let version = 2; version < 2 + ROUNDS; version++) {
      const change = changeOf(version);
      const roundStart = performance.now();
      const messages = [...changesByCluster([change], planRollouts(table, [change]))].flatMap(([cluster, cs]) =>
        rolloutMessages(cluster, cs, new Date().toISOString()),
      );
      requeued.length = 0;
      // One cluster message per invocation (workerBatchSize: auto without settle).
      for (const m of messages)
        stepMs.push(await timed([{ messageId: `step-${++id}`, body: JSON.stringify(m), groupId: messageGroupId(m) }]));
      if (requeued.length !== names.length)
        throw new Error(`expected a continuation per cluster, got ${requeued.length}`);
      // Looks while the rollouts still roll (each pod is Ready 10 s after it starts): each holds the message again.
      for (let look = 0; look < LOOKS_PER_ROUND; look++) {
        for (const c of requeued)
          lookMs.push(
            await timed(
              [{ messageId: `look-${++id}`, body: JSON.stringify(c), groupId: messageGroupId(c), receiveCount: 2 }],
              Date.parse(c.follow?.lookAt ?? '') || undefined,
            ),
          );
      }
      await rolledOut();
      rolloutMs.push(performance.now() - roundStart);
    }
    // Before continuations, on the same rollouts: each cluster's invocation patched and then followed in line until
    // its rollouts ended, billed for every millisecond of it. The three run at once, as Lambda would run them.
    for (let version = 2 + ROUNDS; version < 2 + 2 * ROUNDS; version++) {
      const change = changeOf(version);
      const byCluster = targetsByCluster(planRollouts(table, [change]).targets);
      const billed = await Promise.all(
        [...byCluster.values()].map(async (targets) => {
          const t0 = performance.now();
          const results = await executeRollouts(table, targets, {
            ...deps.executor,
            follow: { budgetMs: IN_LINE_BUDGET_MS },
          });
          const incomplete = results.filter((r) => r.rollout !== 'complete');
          if (incomplete.length > 0)
            throw new Error(`the in-line follower ended with ${incomplete.length} rollouts not complete`);
          return performance.now() - t0;
        }),
      );
      inLineGbS.push((billed.reduce((a, b) => a + b, 0) * MEMORY_GB) / 1000);
      await rolledOut();
    }
    const step = median(stepMs);
    const look = median(lookMs);
    const rollout = median(rolloutMs);
    const looks = looksOver(rollout);
    const clusters = names.length;
    const beforeGbS = median(inLineGbS);
    const afterGbS = (clusters * (step + looks * look) * MEMORY_GB) / 1000;
    const perCluster = `${WORKLOADS} Deployments in ${clusters} clusters (${Math.ceil(WORKLOADS / clusters)} per cluster message), worker at ${MEMORY_GB * 1024} MB, rollouts of ${round(rollout / 1000, 1)} s (measured: each pod Ready 10 s after it starts)`;
    return [
      {
        name: 'lambda_worker_step_ms',
        value: round(step, 1),
        unit: 'ms',
        spread: [round(Math.min(...stepMs), 1), round(Math.max(...stepMs), 1)],
        runs: stepMs.length,
        note: `one cluster message: plan, one LIST, ${Math.ceil(WORKLOADS / clusters)} PATCHes, Events, one look, the continuation sent; processBatch on the real test clusters`,
      },
      {
        name: 'lambda_continuation_look_ms',
        value: round(look, 1),
        unit: 'ms',
        spread: [round(Math.min(...lookMs), 1), round(Math.max(...lookMs), 1)],
        runs: lookMs.length,
        note: 'one continuation look while the rollouts still roll: one LIST, each rollout judged, held again',
      },
      {
        name: 'lambda_gb_s_per_rotation',
        value: round(afterGbS, 2),
        unit: 'GB-s',
        goal: '< baseline',
        met: afterGbS < beforeGbS,
        baseline: {
          name: 'the in-line follower on the same rollouts: each cluster invocation billed until its rollouts end',
          value: round(beforeGbS, 2),
        },
        spread: [round(Math.min(...inLineGbS), 2), round(Math.max(...inLineGbS), 2)],
        runs: ROUNDS,
        note: `${perCluster}: ${clusters} steps + ${clusters} × ${looks} looks (the waiting decision's delays over the measured rollout) = ${clusters * (1 + looks)} invocations of the measured step and look durations; before: the same rollouts followed in line (executeRollouts with a ${IN_LINE_BUDGET_MS / 60_000}-minute budget), ${clusters} invocations timed; billed per ms, cold starts left out`,
      },
    ];
  } finally {
    await s.close();
  }
}
