/**
 * Serverless for real: a worker restarts a Deployment whose new pods become Ready only after ~10 s
 * (`vault-rollout.test/readiness: slow`, see test/clusters/README.md). It never waits in line: it patches, looks
 * once, and hands the rollout to a continuation in the SQS FIFO queue (ElasticMQ), whose looks find the workload
 * `unchanged`, are held by visibility in between (re-sent fresh before the redrive limit), and end with `complete`
 * — one new ReplicaSet, one restart, nothing dead-lettered.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import type { QueueMessage, RolloutMessage } from '../../lib/queue/rollout-message.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { startSqsWorker } from '../../lib/runtime/sqs-worker.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator, type SqsEmulator } from '../sqs/emulator.ts';
import {
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  expectReplicaSets,
  settledWorkload,
  uniqueName,
} from './support.ts';
import { kvWriteAudit, postToIntake, workerClients } from './wave-fixtures.ts';
import { MemoryRotationStore } from '../../lib/rotations/rotation-store.ts';

const NS = uniqueName('vr-follow');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-follow-'));
let emulator: SqsEmulator;
let sqs: SQSClient;
let table: RoutingTable;

beforeAll(async () => {
  emulator = await startSqsEmulator();
  sqs = emulatorClient(emulator.endpoint);
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
  beta: { kubeconfig: { file: ${JSON.stringify(cluster('beta').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: slow
    match: { path: "secret/follow/slow" }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: slow }]
`,
  );
  table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
  await createNamespace('beta', NS);
  const template = {
    metadata: { labels: { app: 'slow' }, annotations: { 'vault-rollout.test/readiness': 'slow' } },
    spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
  };
  await createWorkload('beta', NS, 'Deployment', 'slow', {}, { replicas: 2, template });
  await waitFor(
    async () =>
      ((await settledWorkload('beta', NS, 'Deployment', 'slow')) as { status?: { readyReplicas?: number } }).status
        ?.readyReplicas === 2 || undefined,
    { timeoutMs: 90_000, what: 'the first pods Ready' },
  );
}, 300_000);

afterAll(async () => {
  await emulator?.stop();
  await deleteNamespace('beta', NS);
});

describe('follow-ups', () => {
  it('a 10 s rollout is followed by a continuation of its own until it is complete; nothing restarts twice, nothing is dead-lettered', async () => {
    const queue = await createFifoQueueWithDlq(sqs, {
      name: 'follow',
      maxReceiveCount: 3,
      visibilityTimeoutSeconds: 30,
    });
    const rolloutQueue = new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl });
    await postToIntake(table, rolloutQueue, kvWriteAudit('follow-1', 'secret/follow/slow', 2));

    const telemetry = memoryTelemetry();
    const clients = workerClients(dir, telemetry);
    const requeued: RolloutMessage[] = [];
    const follow = {
      requeue: async (m: RolloutMessage) => {
        requeued.push(m);
        await rolloutQueue.send([m]);
      },
    };
    const resent: RolloutMessage[] = [];
    const resend = {
      send: async (ms: readonly QueueMessage[]) => {
        resent.push(...(ms as RolloutMessage[]));
        await rolloutQueue.send(ms);
      },
    };
    const worker = startSqsWorker(
      sqs,
      {
        table,
        rotations: new MemoryRotationStore(),
        telemetry,
        executor: { access: (n, c) => clients.get(n, c) },
        follow,
        queue: resend,
      },
      { queueUrl: queue.queueUrl, concurrency: 1, waitTimeSeconds: 1 },
    );
    type Done = { fields: { results: Array<{ outcome: string; rollout?: string }> } };
    const lines = (message: string) => telemetry.lines.filter((l) => l.message === message) as unknown as Done[];
    try {
      await waitFor(
        async () =>
          lines('continuation looked').some((l) => l.fields.results.some((r) => r.rollout === 'complete')) || undefined,
        { timeoutMs: 90_000, what: 'the rollout to complete through the continuation' },
      );
    } finally {
      await worker.stop();
    }
    // The cluster step: the restart, still progressing, and one continuation queued.
    expect(
      lines('rollout message done').map((l) => l.fields.results.map((r) => `${r.outcome}:${r.rollout}`).join()),
    ).toEqual(['restarted:progressing']);
    expect(requeued).toHaveLength(1);
    expect(requeued[0]?.follow?.pending).toEqual([`${NS}/Deployment/slow`]);
    // Its looks: unchanged and progressing, then complete, once.
    const looks = lines('continuation looked').map((l) =>
      l.fields.results.map((r) => `${r.outcome}:${r.rollout}`).join(),
    );
    expect(looks.at(-1)).toBe('unchanged:complete');
    expect(looks.slice(0, -1).every((o) => o === 'unchanged:progressing')).toBe(true);
    expect(telemetry.lines.filter((l) => l.message === 'continuation finished: nothing left to wait for')).toHaveLength(
      1,
    );
    // Fresh copies, one round later each, all from the first attempt's time.
    expect(resent.map((m) => m.follow?.round)).toEqual(resent.map((_, i) => i + 2));
    expect(new Set([...requeued, ...resent].map((m) => m.follow?.since)).size).toBe(1);
    const dead = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queue.deadLetterQueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    expect(dead.Attributes?.ApproximateNumberOfMessages).toBe('0');
    // One restart: the original ReplicaSet and one new one.
    await expectReplicaSets('beta', NS, 'slow', 2);
  });
});
