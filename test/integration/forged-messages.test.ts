/**
 * The queue carries changes, not commands: forged messages sent straight to the SQS FIFO queue (ElasticMQ), as
 * anyone holding sqs:SendMessage could send them, reach the real worker poller and the real test clusters. None
 * may change anything; each is refused with a log line and a metric; a real change queued behind them in the same
 * group still restarts its workload.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { startSqsWorker } from '../../lib/runtime/sqs-worker.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator, type SqsEmulator } from '../sqs/emulator.ts';
import { cluster, createNamespace, createWorkload, deleteNamespace, getWorkload, uniqueName } from './support.ts';
import { kvWriteAudit, postToIntake, workerClients } from './wave-fixtures.ts';
import { MemoryRotationStore } from '../../lib/rotations/rotation-store.ts';

const NS = uniqueName('vr-forged');
// Stands for gamma/kube-system/coredns of the report: a workload no route names.
const VICTIM = 'coredns';
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-forged-'));

let emulator: SqsEmulator;
let sqs: SQSClient;
let table: RoutingTable;

const change = (key: string, version: number, mount = 'secret') => ({
  namespace: '',
  mount,
  key,
  operation: 'write',
  version,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id: `forged-${key}-${version}`,
  time: new Date().toISOString(),
});

beforeAll(async () => {
  emulator = await startSqsEmulator();
  sqs = emulatorClient(emulator.endpoint);
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
  gamma: { kubeconfig: { file: ${JSON.stringify(cluster('gamma').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: api
    match: { path: "secret/forged/api" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: api }]
  - name: gamma-web
    match: { path: "secret/forged/web" }
    targets: [{ clusters: [gamma], namespace: ${NS}, kind: Deployment, name: web }]
`,
  );
  table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
  for (const c of ['alpha', 'gamma']) {
    await createNamespace(c, NS);
    for (const name of ['api', 'web', VICTIM]) await createWorkload(c, NS, 'Deployment', name);
  }
}, 300_000);

afterAll(async () => {
  await emulator?.stop();
  for (const c of ['alpha', 'gamma']) await deleteNamespace(c, NS);
});

describe('forged queue messages', () => {
  it('are refused and change nothing; the real change behind them restarts its workload', async () => {
    const queue = await createFifoQueueWithDlq(sqs, {
      name: 'forged',
      maxReceiveCount: 3,
      visibilityTimeoutSeconds: 20,
    });
    // What a write would change: the spec's generation and the pod template (the controller's status updates move
    // resourceVersion, so that is not compared).
    const specOf = async (c: string, name: string) => {
      const w = await getWorkload(c, NS, 'Deployment', name);
      return { generation: w.metadata.generation, template: JSON.stringify(w.spec.template) };
    };
    const before = new Map<string, Awaited<ReturnType<typeof specOf>>>();
    for (const c of ['alpha', 'gamma'])
      for (const name of ['api', 'web', VICTIM]) before.set(`${c}/${name}`, await specOf(c, name));

    const forged: Array<[string, string, unknown]> = [
      // The reproduction of the report: group alpha, no route, a foreign target in gamma with another image and command.
      [
        'format-1 target',
        'alpha',
        {
          v: 1,
          cluster: 'gamma',
          targets: [
            {
              type: 'resource',
              cluster: 'gamma',
              namespace: NS,
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: VICTIM,
              routes: ['none'],
              paths: ['secret/x'],
              secrets: [{ path: 'secret/x', operation: 'write', version: 9, id: 'x', time: '2026-11-20T10:00:00Z' }],
              restartToken: 'x',
              restartedAt: null,
              patch: {
                spec: {
                  template: {
                    spec: { containers: [{ name: 'app', image: 'evil:latest', command: ['sh', '-c', 'id'] }] },
                  },
                },
              },
            },
          ],
          changeIds: ['x'],
          acceptedAt: '2026-11-20T10:00:00Z',
        },
      ],
      [
        'a patch beside real changes',
        'alpha',
        {
          v: 2,
          cluster: 'alpha',
          changes: [change('forged/api', 7)],
          acceptedAt: 'x',
          patch: { spec: { replicas: 0 } },
        },
      ],
      [
        'another cluster than its group',
        'alpha',
        { v: 2, cluster: 'gamma', changes: [change('forged/web', 7)], acceptedAt: 'x' },
      ],
      [
        "another cluster's change in alpha's group",
        'alpha',
        { v: 2, cluster: 'alpha', changes: [change('forged/web', 7)], acceptedAt: 'x' },
      ],
      [
        'a path that no route matches',
        'gamma',
        { v: 2, cluster: 'gamma', changes: [change(VICTIM, 7, 'kube-system')], acceptedAt: 'x' },
      ],
      [
        'a cluster that is not in the table',
        'beta',
        { v: 2, cluster: 'beta', changes: [change('forged/api', 7)], acceptedAt: 'x' },
      ],
    ];
    for (const [name, group, body] of forged) {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: queue.queueUrl,
          MessageBody: JSON.stringify(body),
          MessageGroupId: group,
          MessageDeduplicationId: `forged-${name.replace(/[^a-zA-Z0-9]/g, '-')}`,
        }),
      );
    }
    // The real change, through the intake, queued behind the forged ones in alpha's group.
    await postToIntake(
      table,
      new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
      kvWriteAudit('real-1', 'secret/forged/api', 3),
    );

    const telemetry = memoryTelemetry();
    const clients = workerClients(dir, telemetry);
    const worker = startSqsWorker(
      sqs,
      { table, rotations: new MemoryRotationStore(), telemetry, executor: { access: (n, c) => clients.get(n, c) } },
      { queueUrl: queue.queueUrl, concurrency: 2, waitTimeSeconds: 1 },
    );
    try {
      await waitFor(
        async () =>
          (await getWorkload('alpha', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
            'vault-rollout.io/versions'
          ] === '{"secret/forged/api":3}',
        { timeoutMs: 60_000, what: 'the real restart' },
      );
      await waitFor(
        async () => {
          const out = await sqs.send(
            new GetQueueAttributesCommand({
              QueueUrl: queue.queueUrl,
              AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
            }),
          );
          return (
            Number(out.Attributes?.ApproximateNumberOfMessages) +
              Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible) ===
              0 || undefined
          );
        },
        { timeoutMs: 60_000, what: 'the queue to drain' },
      );
    } finally {
      await worker.stop();
    }

    // Nothing but the real target changed; the forged messages were refused, one log line and one metric each.
    for (const [key, spec] of before) {
      if (key === 'alpha/api') continue;
      const [c, name] = key.split('/') as [string, string];
      expect({ key, ...(await specOf(c, name)) }).toEqual({ key, ...spec });
    }
    const victim = await getWorkload('gamma', NS, 'Deployment', VICTIM);
    expect(JSON.stringify(victim.spec.template)).not.toContain('evil');
    expect(telemetry.lines.filter((l) => l.message === 'refused rollout message')).toHaveLength(forged.length);
    expect(telemetry.metrics.filter((m) => m.name === 'RefusedMessages')).toHaveLength(forged.length);
    // Refused messages are acknowledged: none waits for redelivery or reaches the dead-letter queue.
    const dlq = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queue.deadLetterQueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    expect(Number(dlq.Attributes?.ApproximateNumberOfMessages)).toBe(0);
  });
});
