/**
 * Never wait in line, on the real clusters: a Deployment whose rollout takes about 30 s (3 replicas,
 * `vault-rollout.test/readiness: slow`: each new pod Ready 10 s after it starts, one at a time) is patched, and
 * while it rolls:
 *
 * - a change to another workload in the same cluster, and one in another cluster, are patched at once (the
 *   rollout is followed by a continuation in a group of its own, never in the cluster's line);
 * - a newer version of the rolling secret restarts it at once with the newest value: one restart per version,
 *   and the older version's continuation ends without reporting a rollout of its own;
 * - the rollout is followed to `complete` (its RolloutComplete Event), nothing is dead-lettered, nothing lost;
 * - a delete undone by an undelete while it rolls is not restarted again when its continuation looks afterwards.
 *
 * Once in `serve` (a real process, its SQLite queue with a 3 s visibility timeout, its watch waking the held
 * continuation), once through the SQS FIFO queue (ElasticMQ) with the `worker` loop's SQS poller.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../lib/http/app.ts';
import { ClusterClients } from '../../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../../lib/kube/credentials/resolve.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { RolloutWaker } from '../../lib/pipeline/rollout-waker.ts';
import type { RolloutMessage } from '../../lib/queue/rollout-message.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { MemoryRotationStore } from '../../lib/rotations/rotation-store.ts';
import { startSqsWorker } from '../../lib/runtime/sqs-worker.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator } from '../sqs/emulator.ts';
import {
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  events,
  getWorkload,
  repoRootDir,
  replicaSetCount,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-cont');
const dir = mkdtempSync(join(tmpdir(), 'vr-continuations-'));
const VISIBILITY_SECONDS = 3;
const LONG_REPLICAS = 18;

/** One routing table per run (its own paths), so the two runs share the workloads but never a version. */
function routes(run: string): string {
  return `clusters:
  beta: { kubeconfig: { file: ${JSON.stringify(cluster('beta').vaultRolloutKubeconfig)} } }
  gamma: { kubeconfig: { file: ${JSON.stringify(cluster('gamma').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: slow
    match: { path: "secret/${run}/slow" }
    rollout: { timeout: 120s }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: ${run}-slow }]
  - name: fast
    match: { path: "secret/${run}/fast" }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: ${run}-fast }]
  - name: other
    match: { path: "secret/${run}/other" }
    targets: [{ clusters: [gamma], namespace: ${NS}, kind: Deployment, name: ${run}-other }]
  - name: undo
    match: { path: "secret/${run}/undo", operations: [write, delete, undelete] }
    rollout: { timeout: 120s }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: ${run}-undo }]
  - name: long
    match: { path: "secret/${run}/long" }
    rollout: { timeout: 360s }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: long }]
`;
}

const RUNS = ['serve', 'sqs'] as const;

beforeAll(async () => {
  await Promise.all(['beta', 'gamma'].map((c) => createNamespace(c, NS)));
  const made: Array<{ c: string; name: string; replicas: number; slow: boolean; strategy?: unknown }> = [
    ...RUNS.flatMap((run) => [
      { c: 'beta', name: `${run}-slow`, replicas: 3, slow: true },
      { c: 'beta', name: `${run}-fast`, replicas: 1, slow: false },
      { c: 'gamma', name: `${run}-other`, replicas: 1, slow: false },
    ]),
    // Deleted and undeleted while it rolls: the delete's continuation looks after the undelete.
    { c: 'beta', name: 'undo-undo', replicas: 3, slow: true },
    // A rollout of about 3 minutes: 18 pods replaced one at a time, each Ready 10 s after it starts.
    {
      c: 'beta',
      name: 'long',
      replicas: LONG_REPLICAS,
      slow: true,
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    },
  ];
  await Promise.all(
    made.map(({ c, name, replicas, slow, strategy }) =>
      createWorkload(
        c,
        NS,
        'Deployment',
        name,
        {},
        {
          replicas,
          ...(strategy ? { strategy } : {}),
          template: {
            metadata: { labels: { app: name }, annotations: slow ? { 'vault-rollout.test/readiness': 'slow' } : {} },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
          },
        },
      ),
    ),
  );
  await Promise.all(
    made.map(({ c, name, replicas }) =>
      waitFor(
        async () =>
          ((await getWorkload(c, NS, 'Deployment', name)) as { status?: { readyReplicas?: number } }).status
            ?.readyReplicas === replicas || undefined,
        { timeoutMs: 120_000, what: `${name} Ready in ${c}` },
      ),
    ),
  );
}, 300_000);

afterAll(async () => {
  await Promise.all(['beta', 'gamma'].map((c) => deleteNamespace(c, NS)));
});

type DeploymentView = {
  metadata: { generation?: number };
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
  status?: { observedGeneration?: number; updatedReplicas?: number; availableReplicas?: number; replicas?: number };
};

const recorded = async (c: string, name: string): Promise<Record<string, number>> =>
  JSON.parse(
    ((await getWorkload(c, NS, 'Deployment', name)) as DeploymentView).spec.template.metadata?.annotations?.[
      'vault-rollout.io/versions'
    ] ?? '{}',
  ) as Record<string, number>;

/** Complete by its status: every replica updated and available, no old one left. */
const rolledOut = async (name: string, replicas: number): Promise<boolean> => {
  const d = (await getWorkload('beta', NS, 'Deployment', name)) as DeploymentView;
  return (
    d.status?.observedGeneration === d.metadata.generation &&
    d.status?.updatedReplicas === replicas &&
    d.status?.availableReplicas === replicas &&
    d.status?.replicas === replicas
  );
};

/**
 * The scenario, whatever carries the changes: `write` posts a KV write's audit entry to the intake.
 * Returns nothing; asserts on the clusters.
 */
async function behindASlowRollout(run: string, write: (path: string, version: number) => Promise<void>): Promise<void> {
  const slow = `${run}-slow`;
  await write(`secret/${run}/slow`, 2);
  await waitFor(async () => (await recorded('beta', slow))[`secret/${run}/slow`] === 2 || undefined, {
    timeoutMs: 30_000,
    what: 'the slow Deployment restarted for version 2',
  });
  // While it rolls: another workload in the same cluster and one in another cluster.
  await write(`secret/${run}/fast`, 2);
  await write(`secret/${run}/other`, 2);
  await waitFor(
    async () =>
      ((await recorded('beta', `${run}-fast`))[`secret/${run}/fast`] === 2 &&
        (await recorded('gamma', `${run}-other`))[`secret/${run}/other`] === 2) ||
      undefined,
    { timeoutMs: 30_000, what: 'fast and other restarted' },
  );
  // Patched while the slow rollout is still under way: not behind it.
  expect(await rolledOut(slow, 3)).toBe(false);
  // A newer version of the rolling secret: restarted at once with it, while version 2 still rolls.
  await write(`secret/${run}/slow`, 3);
  await waitFor(async () => (await recorded('beta', slow))[`secret/${run}/slow`] === 3 || undefined, {
    timeoutMs: 30_000,
    what: 'the slow Deployment restarted for version 3',
  });
  expect(await rolledOut(slow, 3)).toBe(false);
  // Followed to the end: the Event of the version-3 restart says complete.
  await waitFor(
    async () =>
      (await events('beta', NS, slow)).some((e) => e.reason === 'RolloutComplete' && e.message.includes('version 3')) ||
      undefined,
    { timeoutMs: 150_000, what: 'RolloutComplete for version 3' },
  );
  // One restart per version: the first ReplicaSet, version 2's, version 3's.
  expect(await replicaSetCount('beta', NS, slow)).toBe(3);
  expect(await replicaSetCount('beta', NS, `${run}-fast`)).toBe(2);
  expect(await replicaSetCount('gamma', NS, `${run}-other`)).toBe(2);
  // Version 2's rollout never completed as such: no RolloutComplete names it.
  expect(
    (await events('beta', NS, slow)).filter((e) => e.reason === 'RolloutComplete' && e.message.includes('version 2')),
  ).toEqual([]);
}

describe('never wait in line', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it('serve: a change behind a slow rollout is patched at once, in the same cluster and another; a newer version restarts once with the newest value; followed to complete', async () => {
    const routesFile = join(dir, 'serve-routes.yaml');
    const queueFile = join(dir, 'state', 'queue.sqlite');
    writeFileSync(routesFile, routes('serve'));
    let output = '';
    child = spawn(
      process.execPath,
      [join(repoRootDir, 'lib/cli/main.ts'), 'serve', '--routes', routesFile, '--port', '0', '--queue-file', queueFile],
      {
        cwd: repoRootDir,
        env: {
          PATH: process.env.PATH,
          HOME: dir,
          VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
          POWERTOOLS_METRICS_DISABLED: 'true',
          VAULT_ROLLOUT_VISIBILITY_SECONDS: String(VISIBILITY_SECONDS),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const port = await waitFor(
      async () => Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1]) || undefined,
      { timeoutMs: 180_000, what: 'serve listening' },
    );
    let request = 0;
    const write = async (path: string, version: number) => {
      const audit = JSON.stringify({
        time: new Date().toISOString(),
        type: 'response',
        request: {
          id: `cont-serve-${++request}`,
          operation: 'update',
          mount_type: 'kv',
          mount_point: 'secret/',
          path: path.replace(/^secret\//, 'secret/data/'),
        },
        response: { data: { version } },
      });
      const res = await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, {
        method: 'POST',
        body: audit,
        headers: { authorization: `Bearer ${BEARER_TOKEN}` },
      });
      expect(res.status).toBe(202);
    };
    await behindASlowRollout('serve', write);

    type Line = {
      message?: string;
      results?: Array<{ name: string; outcome: string; rollout?: string }>;
      round?: number;
    };
    const lines = (): Line[] =>
      output
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Line);
    await waitFor(
      async () =>
        lines().filter((l) => l.message === 'continuation finished: nothing left to wait for').length >= 2 || undefined,
      { timeoutMs: 30_000, what: 'both continuations of the slow Deployment finished' },
    );
    child.kill('SIGTERM');
    await new Promise((r) => child?.once('exit', r));
    // The cluster steps never followed: each restart of the slow Deployment (versions 2 and 3) was patched and
    // handed to a continuation while it still rolled.
    const steps = lines()
      .filter((l) => l.message === 'rollout message done')
      .flatMap((l) => l.results ?? []);
    expect(steps.filter((r) => r.name === 'serve-slow').map((r) => `${r.outcome}:${r.rollout}`)).toEqual([
      'restarted:progressing',
      'restarted:progressing',
    ]);
    expect(steps.filter((r) => r.name !== 'serve-slow').map((r) => r.outcome)).toEqual(['restarted', 'restarted']);
    // The older version's continuation ended on the newer restart (superseded), the newer one on `complete`.
    const looks = lines()
      .filter((l) => l.message === 'continuation looked')
      .flatMap((l) => l.results ?? [])
      .filter((r) => r.name === 'serve-slow');
    expect(looks.some((r) => r.outcome === 'skipped')).toBe(true);
    expect(looks.some((r) => r.rollout === 'complete')).toBe(true);
    expect(lines().filter((l) => l.message?.startsWith('the queue took back'))).toEqual([]);
    const db = new DatabaseSync(queueFile, { readOnly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) AS n FROM messages').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT COUNT(*) AS n FROM dead_letters').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  }, 400_000);

  it("the SQS queue: the same, through the worker's SQS poller; nothing dead-lettered", async () => {
    await throughSqs('sqs', { watch: true }, async ({ write, telemetry }) => {
      await behindASlowRollout('sqs', write);
      await waitFor(
        async () =>
          telemetry.lines.filter((l) => l.message === 'continuation finished: nothing left to wait for').length >= 2 ||
          undefined,
        { timeoutMs: 30_000, what: 'both continuations finished' },
      );
    });
  }, 400_000);

  it("a delete, then its undelete while the delete still rolls: the delete's continuation, looking after the undelete, restarts nothing (one restart each)", async () => {
    const telemetry = await throughSqs('undo', { watch: false }, async ({ post, telemetry: lines }) => {
      const entry = (id: string, type: 'delete' | 'undelete') => ({
        time: new Date().toISOString(),
        type: 'response',
        request: {
          id,
          operation: 'update',
          mount_type: 'kv',
          mount_point: 'secret/',
          path: `secret/${type}/undo/undo`,
          data: { versions: [1] },
        },
        response: {},
      });
      await post(entry('undo-delete', 'delete'));
      await waitFor(
        async () => (await recorded('beta', 'undo-undo'))['secret/undo/undo#delete'] !== undefined || undefined,
        { timeoutMs: 30_000, what: 'restarted for the delete' },
      );
      await post(entry('undo-undelete', 'undelete'));
      await waitFor(
        async () => (await recorded('beta', 'undo-undo'))['secret/undo/undo#undelete'] !== undefined || undefined,
        { timeoutMs: 30_000, what: 'restarted for the undelete' },
      );
      expect(await rolledOut('undo-undo', 3)).toBe(false);
      // Both continuations end: the undelete's on its completed rollout, the delete's on the undelete.
      await waitFor(
        async () =>
          lines.lines.filter((l) => l.message === 'continuation finished: nothing left to wait for').length >= 2 ||
          undefined,
        { timeoutMs: 120_000, intervalMs: 500, what: 'both continuations finished' },
      );
    });
    // The delete's continuation looked after the undelete and ended (skipped: older than the undelete).
    const looks = telemetry.lines
      .filter((l) => l.message === 'continuation looked')
      .flatMap(
        (l) => (l.fields?.results as Array<{ name: string; outcome: string; reason: string }> | undefined) ?? [],
      );
    expect(looks.filter((r) => r.name === 'undo-undo' && r.outcome === 'restarted')).toEqual([]);
    expect(looks.some((r) => r.name === 'undo-undo' && r.outcome === 'skipped')).toBe(true);
    // One restart per change: the first ReplicaSet, the delete's, the undelete's.
    expect(await replicaSetCount('beta', NS, 'undo-undo')).toBe(3);
    expect(Object.keys(await recorded('beta', 'undo-undo')).sort()).toEqual([
      'secret/undo/undo#delete',
      'secret/undo/undo#undelete',
    ]);
  }, 300_000);

  it('a 3-minute rollout is followed to complete through the SQS queue, without a watch (as in Lambda) and without dead-lettering', async () => {
    const started = Date.now();
    const telemetry = await throughSqs('long', { watch: false }, async ({ write }) => {
      await write('secret/long/long', 2);
      await waitFor(
        async () =>
          (await events('beta', NS, 'long')).some(
            (e) => e.reason === 'RolloutComplete' && e.message.includes('version 2'),
          ) || undefined,
        { timeoutMs: 330_000, intervalMs: 2_000, what: 'RolloutComplete for the 3-minute rollout' },
      );
    });
    // It really was a long rollout: 18 pods one at a time, 10 s each.
    expect(Date.now() - started).toBeGreaterThan(150_000);
    expect(await rolledOut('long', LONG_REPLICAS)).toBe(true);
    expect(await replicaSetCount('beta', NS, 'long')).toBe(2);
    // Many looks (at most 15 s apart), and a fresh copy each time one came near the redrive limit.
    expect(telemetry.lines.filter((l) => l.message === 'continuation looked').length).toBeGreaterThan(8);
    expect(telemetry.lines.filter((l) => l.message === 'looking again later (re-sent)').length).toBeGreaterThan(1);
    expect(telemetry.lines.filter((l) => l.message === 'continuation finished: nothing left to wait for')).toHaveLength(
      1,
    );
    expect(telemetry.lines.filter((l) => l.level === 'error')).toEqual([]);
  }, 420_000);
});

/**
 * The intake and the `worker` loop's SQS poller on an ElasticMQ FIFO queue with serverless.yml's redrive limit (5
 * receives, then the dead letters), a 3 s visibility timeout; with or without the watch that wakes held
 * continuations (Lambda has none). Runs `scenario`, then checks that nothing was dead-lettered or taken back.
 */
async function throughSqs(
  run: string,
  options: { watch: boolean },
  scenario: (ctx: {
    write: (path: string, version: number) => Promise<void>;
    post: (entry: object) => Promise<void>;
    telemetry: ReturnType<typeof memoryTelemetry>;
  }) => Promise<void>,
): Promise<ReturnType<typeof memoryTelemetry>> {
  const emulator = await startSqsEmulator();
  try {
    const sqs = emulatorClient(emulator.endpoint);
    const routesFile = join(dir, `${run}-routes.yaml`);
    writeFileSync(routesFile, routes(run));
    const table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
    const queue = await createFifoQueueWithDlq(sqs, {
      name: `continuations-${run}`,
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 30,
    });
    const rolloutQueue = new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl });
    const app = buildApp({
      table,
      queue: rolloutQueue,
      telemetry: memoryTelemetry(),
      secrets: async () => ({ bearerToken: BEARER_TOKEN }),
    });
    const telemetry = memoryTelemetry();
    const clients = new ClusterClients(
      createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: dir, env: {}, logger: telemetry })),
    );
    const executor = {
      access: (n: string, c: Parameters<typeof clients.get>[1]) => clients.get(n, c),
      logger: telemetry,
    };
    const worker = startSqsWorker(
      sqs,
      {
        table,
        rotations: new MemoryRotationStore(),
        telemetry,
        executor,
        queue: rolloutQueue,
        follow: { requeue: (m: RolloutMessage) => rolloutQueue.send([m]) },
      },
      {
        queueUrl: queue.queueUrl,
        concurrency: 4,
        waitTimeSeconds: 1,
        visibilityTimeoutSeconds: VISIBILITY_SECONDS,
        ...(options.watch ? { waker: new RolloutWaker(table, executor, telemetry) } : {}),
      },
    );
    let request = 0;
    const post = async (entry: object) => {
      expect(
        (
          await app.request('/v1/vault/audit', {
            method: 'POST',
            body: JSON.stringify(entry),
            headers: { authorization: `Bearer ${BEARER_TOKEN}` },
          })
        ).status,
      ).toBe(202);
    };
    const write = (path: string, version: number) =>
      post({
        time: new Date().toISOString(),
        type: 'response',
        request: {
          id: `cont-${run}-${++request}`,
          operation: 'update',
          mount_type: 'kv',
          mount_point: 'secret/',
          path: path.replace(/^secret\//, 'secret/data/'),
        },
        response: { data: { version } },
      });
    try {
      await scenario({ write, post, telemetry });
    } finally {
      await worker.stop();
    }
    const dead = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queue.deadLetterQueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    expect(dead.Attributes?.ApproximateNumberOfMessages).toBe('0');
    expect(telemetry.lines.filter((l) => l.message.startsWith('the queue took back'))).toEqual([]);
    return telemetry;
  } finally {
    await emulator.stop();
  }
}
