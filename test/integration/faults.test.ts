/**
 * The fault suite, on the real test clusters through the queue path (HTTP intake -> SQS FIFO on ElasticMQ ->
 * pollers working like Lambda's event source mapping): 1,000 changes while a fault-injecting proxy in front of
 * gamma adds latency, resets, 500s, 429s with Retry-After and a 60 s black hole; a worker killed mid-batch;
 * versions delivered out of order and duplicated. Every test is bounded in count and time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../lib/http/app.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { startSqsWorker } from '../../lib/runtime/sqs-worker.ts';
import { ClusterClients } from '../../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../../lib/kube/credentials/resolve.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { recordOutput } from '../hygiene/capture.ts';
import { startFaultProxy, type FaultProxy } from '../faults/fault-proxy.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator, type SqsEmulator } from '../sqs/emulator.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  repoRootDir,
  uniqueName,
} from './support.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { MemoryRotationStore } from '../../lib/rotations/rotation-store.ts';

const NS = uniqueName('vr-faults');
const APPS = Array.from({ length: 10 }, (_, i) => `app-${i}`);
const CLUSTERS = ['alpha', 'beta', 'gamma'] as const;
const TOKEN = BEARER_TOKEN;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-faults-'));

let emulator: SqsEmulator;
let sqs: SQSClient;
let proxy: FaultProxy;
let routesFile: string;
let table: RoutingTable;

const audit = (app: string, version: number) =>
  JSON.stringify({
    time: new Date(Date.UTC(2026, 10, 20, 10, 0, 0) + version * 1000).toISOString(),
    type: 'response',
    request: {
      id: `faults-${app}-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/faults/${app}`,
    },
    response: { data: { version } },
  });

async function versionOf(clusterName: string, app: string): Promise<number> {
  const annotations =
    (await getWorkload(clusterName, NS, 'Deployment', app)).spec.template?.metadata?.annotations ?? {};
  const versions = JSON.parse(annotations['vault-rollout.io/versions'] ?? '{}') as Record<string, number>;
  return versions[`secret/faults/${app}`] ?? 0;
}

/** The versions recorded by every ReplicaSet of an app: one per restart (the first is the original template). */
async function replicaSetVersions(clusterName: string, app: string, path = `secret/faults/${app}`): Promise<number[]> {
  const res = await admin(clusterName).request<{
    items: Array<{ spec: { template: { metadata?: { annotations?: Record<string, string> } } } }>;
  }>('GET', `/apis/apps/v1/namespaces/${NS}/replicasets?labelSelector=app%3D${app}`);
  return res.body.items
    .map(
      (rs) =>
        (
          JSON.parse(rs.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '{}') as Record<
            string,
            number
          >
        )[path] ?? 0,
    )
    .sort((a, b) => a - b);
}

/** Waits until the controller has made the ReplicaSet of the workload's current template (it lags the patch). */
async function settledReplicaSets(clusterName: string, app: string, path: string, version: number): Promise<number[]> {
  return waitFor(
    async () => {
      const versions = await replicaSetVersions(clusterName, app, path);
      return versions.includes(version) ? versions : undefined;
    },
    { timeoutMs: 30_000, what: `the ReplicaSet of ${clusterName}/${app} at ${version}` },
  );
}

async function queueDepth(url: string): Promise<number> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

function workerDeps(telemetry = memoryTelemetry()) {
  const clients = new ClusterClients(
    createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: dir, env: {}, logger: telemetry })),
  );
  return {
    table,
    rotations: new MemoryRotationStore(),
    telemetry,
    executor: {
      access: (n: string, c: Parameters<ClusterClients['get']>[1]) => clients.get(n, c),
      requestTimeoutMs: 5000,
      retry: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1000, maxRetryAfterMs: 2000 },
    },
    invalidate: (c: string) => clients.invalidate(c),
  };
}

beforeAll(async () => {
  emulator = await startSqsEmulator();
  sqs = emulatorClient(emulator.endpoint);
  proxy = await startFaultProxy(cluster('gamma'));
  routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
  beta: { kubeconfig: { file: ${JSON.stringify(cluster('beta').vaultRolloutKubeconfig)} } }
  gamma: { kubeconfig: { file: ${JSON.stringify(proxy.kubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: faults
    match: { path: "secret/faults/{app}" }
    targets: [{ clusters: [alpha, beta, gamma], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: crash
    match: { path: "secret/crash/{app}" }
    targets: [{ clusters: [gamma], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  table = loadRoutingTable((await import('node:fs')).readFileSync(routesFile, 'utf8'), routesFile);
  for (const c of CLUSTERS) {
    await createNamespace(c, NS);
    for (const app of APPS) await createWorkload(c, NS, 'Deployment', app, {}, { revisionHistoryLimit: 1000 });
  }
}, 300_000);

afterAll(async () => {
  await proxy?.stop();
  await emulator?.stop();
  for (const c of CLUSTERS) await deleteNamespace(c, NS);
});

describe('faults', () => {
  it('1,000 changes under latency, resets, 500s, 429s and a black hole of 60 s or more: every target at the newest version, no version restarted twice, the other clusters never wait', async () => {
    const queue = await createFifoQueueWithDlq(sqs, {
      name: 'faults',
      maxReceiveCount: 20,
      visibilityTimeoutSeconds: 40,
    });
    const app = buildApp({
      table,
      queue: new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
      telemetry: memoryTelemetry(),
      secrets: async () => ({ bearerToken: TOKEN }),
    });
    const telemetry = memoryTelemetry();
    const worker = startSqsWorker(sqs, workerDeps(telemetry), {
      queueUrl: queue.queueUrl,
      batchSize: 1,
      concurrency: 6,
    });
    try {
      // Noisy faults all along; a black hole from the 10th POST on, for 60 s and until alpha and beta are done: the
      // healthy clusters must finish while gamma cannot answer, which a loaded machine cannot turn into a race.
      const noisy = { latencyMs: 100, resetRate: 0.05, errorRate: 0.05, throttleRate: 0.05, retryAfterSeconds: 1 };
      proxy.set(noisy);
      // 10 apps x 100 versions = 1,000 changes, in 20 POSTs of 50 records each (5 versions of every app).
      const started = Date.now();
      let blackholeStarted = 0;
      for (let post = 0; post < 20; post++) {
        if (post === 10) {
          proxy.set({ blackhole: true });
          blackholeStarted = Date.now();
        }
        const lines = APPS.flatMap((a) => [1, 2, 3, 4, 5].map((k) => audit(a, post * 5 + k)));
        const res = await app.request('/v1/vault/audit', {
          method: 'POST',
          body: lines.join('\n'),
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.status).toBe(202);
        await new Promise((r) => setTimeout(r, 250));
      }
      // The healthy clusters finish while gamma is still black-holed (a worker stuck on gamma would keep them waiting).
      await waitFor(
        async () =>
          (await Promise.all(['alpha', 'beta'].flatMap((c) => APPS.map((a) => versionOf(c, a))))).every(
            (v) => v === 100,
          ),
        { timeoutMs: 240_000, intervalMs: 500, what: 'alpha and beta at version 100 while gamma is black-holed' },
      );
      const healthyDone = Date.now();
      const gammaMeanwhile = await Promise.all(APPS.map((a) => versionOf('gamma', a)));
      expect(
        gammaMeanwhile.some((v) => v < 100),
        `gamma's versions while black-holed: ${gammaMeanwhile.join(',')}`,
      ).toBe(true);
      await new Promise((r) => setTimeout(r, Math.max(0, blackholeStarted + 60_000 - Date.now())));
      proxy.set({ blackhole: false });
      const blackholeSeconds = (Date.now() - blackholeStarted) / 1000;
      try {
        await waitFor(async () => (await Promise.all(APPS.map((a) => versionOf('gamma', a)))).every((v) => v === 100), {
          timeoutMs: 300_000,
          intervalMs: 1000,
          what: 'gamma at version 100 after the black hole',
        });
      } catch (e) {
        const gammaLines = telemetry.lines.filter((l) => JSON.stringify(l).includes('gamma'));
        writeFileSync(
          join(dir, 'faults-debug.json'),
          JSON.stringify(
            {
              stats: proxy.stats,
              versions: await Promise.all(APPS.map((a) => versionOf('gamma', a))),
              lines: gammaLines.slice(-40),
              warn: telemetry.lines.filter((l) => l.level !== 'info').slice(-20),
            },
            null,
            1,
          ),
        );
        throw new Error(`${(e as Error).message}; the worker's log is in ${join(dir, 'faults-debug.json')}`, {
          cause: e,
        });
      }
      await waitFor(async () => (await queueDepth(queue.queueUrl)) === 0, {
        timeoutMs: 60_000,
        what: 'the queue to drain',
      });
      expect(await queueDepth(queue.deadLetterQueueUrl)).toBe(0);
      for (const c of CLUSTERS) {
        for (const a of APPS) {
          const versions = await settledReplicaSets(c, a, `secret/faults/${a}`, 100);
          // No version restarted twice: one ReplicaSet per distinct template, versions strictly increasing.
          expect(new Set(versions).size, `${c}/${a}: ${versions.join(',')}`).toBe(versions.length);
          expect(versions.at(-1)).toBe(100);
        }
      }
      expect(proxy.stats.resets).toBeGreaterThan(0);
      expect(proxy.stats.errors).toBeGreaterThan(0);
      expect(proxy.stats.throttled).toBeGreaterThan(0);
      expect(proxy.stats.held).toBeGreaterThan(0);
      console.log(
        `faults: healthy clusters done after ${((healthyDone - started) / 1000).toFixed(1)} s, gamma black-holed for ${blackholeSeconds.toFixed(1)} s and done after ${((Date.now() - started) / 1000).toFixed(1)} s; proxy ${JSON.stringify(proxy.stats)}`,
      );
    } finally {
      proxy.set({ blackhole: false, latencyMs: 0, resetRate: 0, errorRate: 0, throttleRate: 0 });
      await worker.stop();
    }
  }, 660_000);

  it('finishes the work of a worker killed mid-batch without restarting anything twice', async () => {
    const queue = await createFifoQueueWithDlq(sqs, { name: 'crash', maxReceiveCount: 5, visibilityTimeoutSeconds: 5 });
    const app = buildApp({
      table,
      queue: new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
      telemetry: memoryTelemetry(),
      secrets: async () => ({ bearerToken: TOKEN }),
    });
    // Slow patches so the kill lands in the middle of the batch.
    proxy.set({ latencyMs: 400 });
    const crashRoutes = join(dir, 'crash-routes.yaml');
    writeFileSync(
      crashRoutes,
      (await import('node:fs'))
        .readFileSync(routesFile, 'utf8')
        .replace('gamma: { kubeconfig:', 'gamma: { concurrency: 2, kubeconfig:'),
    );
    const startWorker = (): ChildProcess =>
      spawn(
        process.execPath,
        [
          join(repoRootDir, 'lib/cli/main.ts'),
          'worker',
          '--routes',
          crashRoutes,
          '--queue-url',
          queue.queueUrl,
          '--concurrency',
          '1',
        ],
        {
          env: {
            ...process.env,
            AWS_ENDPOINT_URL_SQS: emulator.endpoint,
            AWS_REGION: 'us-east-1',
            AWS_ACCESS_KEY_ID: 'test',
            AWS_SECRET_ACCESS_KEY: 'test',
            POWERTOOLS_METRICS_DISABLED: 'true',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
    const startWorkerCaptured = (): ChildProcess => {
      const child = startWorker();
      // The worker's logs are test output too: the secrets hygiene check reads them.
      child.stdout?.on('data', recordOutput);
      child.stderr?.on('data', recordOutput);
      return child;
    };
    const lines = APPS.map((a) => audit(a, 500).replace('secret/data/faults/', 'secret/data/crash/'));
    expect(
      (
        await app.request('/v1/vault/audit', {
          method: 'POST',
          body: lines.join('\n'),
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).status,
    ).toBe(202);
    const crashVersion = async (a: string) => {
      const annotations = (await getWorkload('gamma', NS, 'Deployment', a)).spec.template?.metadata?.annotations ?? {};
      return (
        (JSON.parse(annotations['vault-rollout.io/versions'] ?? '{}') as Record<string, number>)[`secret/crash/${a}`] ??
        0
      );
    };
    let first = startWorkerCaptured();
    try {
      const doneBeforeKill = await waitFor(
        async () => {
          const done = (await Promise.all(APPS.map(crashVersion))).filter((v) => v === 500).length;
          return done >= 2 ? done : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 100, what: 'the worker to be mid-batch' },
      );
      first.kill('SIGKILL');
      expect(doneBeforeKill).toBeLessThan(APPS.length);
      first = startWorkerCaptured();
      await waitFor(async () => (await Promise.all(APPS.map(crashVersion))).every((v) => v === 500), {
        timeoutMs: 90_000,
        intervalMs: 500,
        what: 'redelivery to finish the batch',
      });
      await waitFor(async () => (await queueDepth(queue.queueUrl)) === 0, {
        timeoutMs: 30_000,
        what: 'the queue to drain',
      });
    } finally {
      first.kill('SIGKILL');
      proxy.set({ latencyMs: 0 });
    }
    for (const a of APPS) {
      const versions = await settledReplicaSets('gamma', a, `secret/crash/${a}`, 500);
      // Exactly one ReplicaSet for version 500 per workload: the killed run and the redelivery restarted each once.
      expect(
        versions.filter((v) => v === 500),
        a,
      ).toHaveLength(1);
    }
  }, 300_000);

  it('ends with the newest version and one restart per applied version when versions arrive out of order and duplicated', async () => {
    const queue = await createFifoQueueWithDlq(sqs, {
      name: 'ordering',
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 10,
    });
    const app = buildApp({
      table,
      queue: new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
      telemetry: memoryTelemetry(),
      secrets: async () => ({ bearerToken: TOKEN }),
    });
    const worker = startSqsWorker(sqs, workerDeps(), { queueUrl: queue.queueUrl, batchSize: 1, concurrency: 3 });
    try {
      const base = 1000;
      const before = await settledReplicaSets('alpha', 'app-0', 'secret/faults/app-0', 100);
      for (const v of [3, 1, 3, 2, 5, 4, 5, 1]) {
        const res = await app.request('/v1/vault/audit', {
          method: 'POST',
          body: audit('app-0', base + v),
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.status).toBe(202);
      }
      await waitFor(
        async () => (await versionOf('alpha', 'app-0')) === base + 5 && (await queueDepth(queue.queueUrl)) === 0,
        { timeoutMs: 60_000, what: 'version 1005 and an empty queue' },
      );
      const after = await settledReplicaSets('alpha', 'app-0', 'secret/faults/app-0', base + 5);
      const added = after.filter((v) => !before.includes(v));
      // Applied in order of arrival: 1003, then 1005; 1001, 1002 and 1004 were older than what was recorded.
      expect(added).toEqual([base + 3, base + 5]);
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
