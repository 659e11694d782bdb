/**
 * The Lambda worker's holds over a real SQS FIFO queue (ElasticMQ on 127.0.0.1) and real clusters: settle and gates
 * wait in the queue (ChangeMessageVisibility + a batch item failure), never in the function.
 *
 * The Lambda worker handler (functions/worker.ts, its real SQS client pointed at ElasticMQ with AWS_ENDPOINT_URL_SQS)
 * is driven the way the event source mapping drives it: receive up to the stage's batch size (workerBatchSize auto:
 * 10, since a route sets settle), call the handler, delete what it did not report as failed. The queue's redrive
 * limit is 3, the tightest that holds allow: a hold that ate into it would reach the dead-letter queue.
 *
 * - Settle (2 s): five changes to five paths of one Deployment, five separate HTTP requests within 2 s. The first is
 *   held by visibility, the other four queue behind it in the cluster's FIFO group, and they come back in the SAME
 *   batch → one plan: one new ReplicaSet recording all five versions.
 * - A gate: held by visibility while its wave is not restarted; after HOLDS_BEFORE_RESEND holds it re-sends itself
 *   fresh (round 1) and nothing reaches the dead-letter queue; once the wave is complete it queues the next wave.
 * - Isolation with batches of 10: a batch holding a hanging cluster (a server that accepts and never answers) and
 *   beta: beta's message is deleted as soon as beta is worked, so beta's NEXT change is received and restarted by
 *   another invocation while the first one still hangs.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workerBatchSize } from '../../lib/deploy/worker-batch-size.ts';
import { buildApp } from '../../lib/http/app.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { HOLDS_BEFORE_RESEND } from '../../lib/pipeline/worker.ts';
import {
  isGateMessage,
  parseRolloutMessage,
  rolloutMessages,
  type QueueMessage,
} from '../../lib/queue/rollout-message.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import {
  createFifoQueueWithDlq,
  emulatorClient,
  EMULATOR_REGION,
  startSqsEmulator,
  type FifoQueuePair,
  type SqsEmulator,
} from '../sqs/emulator.ts';
import { createSlotTable, startDynamoDbLocal, type DynamoDbLocal } from '../dynamodb/dynamodb-local.ts';
import {
  admin,
  alteredKubeconfig,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-holds');
const SETTLE_S = 2;
const MAX_RECEIVE_COUNT = 3;
/** Far longer than any hold: a message back before this was made visible by ChangeMessageVisibility. */
const VISIBILITY_TIMEOUT_S = 60;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-holds-'));
const routesFile = join(dir, 'routes.yaml');

let emulator: SqsEmulator;
let dynamo: DynamoDbLocal;
let sqs: SQSClient;
let queue: FifoQueuePair;
let table: RoutingTable;
let handler: (event: SQSEvent) => Promise<SQSBatchResponse>;
/** The hanging cluster's API server: accepts connections, never answers (until the test lets go). */
let hang: Server;
const hungSockets = new Set<Socket>();
const savedEnv = { ...process.env };

beforeAll(async () => {
  emulator = await startSqsEmulator();
  sqs = emulatorClient(emulator.endpoint);
  // A client that gives up resets the socket: expected, never an uncaught error.
  hang = createServer((socket) => void hungSockets.add(socket.on('error', () => undefined)));
  await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
  const hangKubeconfig = alteredKubeconfig(cluster('beta').vaultRolloutKubeconfig, {
    server: `https://127.0.0.1:${(hang.address() as { port: number }).port}`,
  });
  queue = await createFifoQueueWithDlq(sqs, {
    name: `holds-${process.pid}`,
    maxReceiveCount: MAX_RECEIVE_COUNT,
    visibilityTimeoutSeconds: VISIBILITY_TIMEOUT_S,
  });
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
  beta: { kubeconfig: { file: ${JSON.stringify(cluster('beta').vaultRolloutKubeconfig)} } }
  hanging: { kubeconfig: { file: ${JSON.stringify(hangKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: burst
    match: { path: "secret/holds/burst/*" }
    rollout: { settle: ${SETTLE_S}s }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: burst }]
  - name: gated
    match: { path: "secret/holds/gated" }
    rollout: { waves: [{ clusters: [alpha] }, { clusters: [beta] }], gate: { timeout: 5m } }
    targets: [{ clusters: [alpha, beta], namespace: ${NS}, kind: Deployment, name: gated }]
  - name: isolated
    match: { path: "secret/holds/isolated" }
    targets: [{ clusters: [hanging, beta], namespace: ${NS}, kind: Deployment, name: isolated }]
`,
  );
  table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
  await Promise.all(['alpha', 'beta'].map((c) => createNamespace(c, NS)));
  await createWorkload('alpha', NS, 'Deployment', 'burst');
  await Promise.all(['alpha', 'beta'].map((c) => createWorkload(c, NS, 'Deployment', 'gated')));
  await createWorkload('beta', NS, 'Deployment', 'isolated');

  // The rotation store (released waves, halts) as in Lambda: a DynamoDB table, here on DynamoDB Local.
  dynamo = await startDynamoDbLocal();
  const stateClient = dynamo.client();
  await createSlotTable(stateClient, 'rotation-state');
  stateClient.destroy();
  // The worker function as Lambda loads it: its module reads the environment once.
  Object.assign(process.env, {
    VAULT_ROLLOUT_STATE_TABLE: 'rotation-state',
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    VAULT_ROLLOUT_DLQ_URL: queue.deadLetterQueueUrl,
    VAULT_ROLLOUT_ROUTES: routesFile,
    VAULT_ROLLOUT_QUEUE_URL: queue.queueUrl,
    AWS_ENDPOINT_URL_SQS: emulator.endpoint,
    AWS_REGION: EMULATOR_REGION,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'WARN',
  });
  ({ handler } = await import('../../functions/worker.ts'));
}, 300_000);

afterAll(async () => {
  for (const socket of hungSockets) socket.destroy();
  hang?.close();
  process.env = savedEnv;
  sqs?.destroy();
  await emulator?.stop();
  await dynamo?.stop();
  await Promise.all(['alpha', 'beta'].map((c) => deleteNamespace(c, NS)));
});

interface Delivery {
  messageId: string;
  group: string;
  receiveCount: number;
  message: QueueMessage;
  at: number;
}
interface Batch {
  deliveries: Delivery[];
  failed: string[];
}

const toRecord = (m: Message): SQSRecord => ({
  messageId: m.MessageId ?? '',
  receiptHandle: m.ReceiptHandle ?? '',
  body: m.Body ?? '',
  attributes: {
    ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? '1',
    SentTimestamp: m.Attributes?.SentTimestamp ?? '0',
    SenderId: m.Attributes?.SenderId ?? 'test',
    ApproximateFirstReceiveTimestamp: m.Attributes?.ApproximateFirstReceiveTimestamp ?? '0',
    MessageGroupId: m.Attributes?.MessageGroupId ?? '',
    MessageDeduplicationId: m.Attributes?.MessageDeduplicationId ?? '',
    SequenceNumber: m.Attributes?.SequenceNumber ?? '0',
  },
  messageAttributes: {},
  md5OfBody: m.MD5OfBody ?? '',
  eventSource: 'aws:sqs',
  eventSourceARN: `arn:aws:sqs:${EMULATOR_REGION}:000000000000:holds.fifo`,
  awsRegion: EMULATOR_REGION,
});

/**
 * What the event source mapping does, until `done()` or the time is up: receive a batch (FIFO: no batching window),
 * invoke the handler, delete the records it did not report as failed. Failed records stay in flight: the handler
 * set their visibility (a hold), or the queue's visibility timeout brings them back.
 */
async function eventSourceMapping(
  done: (batches: readonly Batch[]) => Promise<boolean>,
  timeoutMs: number,
): Promise<Batch[]> {
  const batches: Batch[] = [];
  const batchSize = workerBatchSize(table, 'auto');
  const deadline = Date.now() + timeoutMs;
  while (!(await done(batches))) {
    if (Date.now() > deadline)
      throw new Error(
        `not done within ${timeoutMs} ms; batches: ${JSON.stringify(batches.map((b) => b.deliveries.map((d) => `${d.group.slice(0, 12)}#${d.receiveCount}`)))}`,
      );
    const received =
      (
        await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.queueUrl,
            MaxNumberOfMessages: batchSize,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['All'],
          }),
        )
      ).Messages ?? [];
    if (received.length === 0) continue;
    const at = Date.now();
    const response = await handler({ Records: received.map(toRecord) });
    const failed = response.batchItemFailures.map((f) => f.itemIdentifier);
    const acknowledged = received.filter((m) => !failed.includes(m.MessageId ?? ''));
    if (acknowledged.length > 0)
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queue.queueUrl,
          Entries: acknowledged.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })),
        }),
      );
    batches.push({
      failed,
      deliveries: received.map((m) => ({
        messageId: m.MessageId ?? '',
        group: m.Attributes?.MessageGroupId ?? '',
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount),
        message: parseRolloutMessage(m.Body ?? '') as QueueMessage,
        at,
      })),
    });
  }
  return batches;
}

async function depth(queueUrl: string): Promise<number> {
  const { Attributes: a = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  return (
    Number(a.ApproximateNumberOfMessages) +
    Number(a.ApproximateNumberOfMessagesNotVisible) +
    Number(a.ApproximateNumberOfMessagesDelayed)
  );
}

let request = 0;
const audit = (path: string, version: number) =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `holds-${process.pid}-${++request}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: path.replace(/^secret\//, 'secret/data/'),
    },
    response: { data: { version } },
  });

/** One Vault write as the audit device posts it: one HTTP request to the intake, which queues to `to`. */
async function post(
  to: { send(m: readonly QueueMessage[]): Promise<void> },
  path: string,
  version: number,
): Promise<void> {
  const app = buildApp({
    table,
    queue: to,
    telemetry: memoryTelemetry(),
    secrets: async () => ({ bearerToken: BEARER_TOKEN }),
  });
  const res = await app.request('/v1/vault/audit', {
    method: 'POST',
    body: audit(path, version),
    headers: { authorization: `Bearer ${BEARER_TOKEN}` },
  });
  expect(res.status).toBe(202);
}

/** The restart records of a Deployment's ReplicaSets (the first, the original template, records nothing). */
async function replicaSetRecords(c: string, app: string): Promise<Array<Record<string, number>>> {
  const res = await admin(c).request<{
    items: Array<{
      metadata: { ownerReferences?: Array<{ name: string }> };
      spec: { template: { metadata?: { annotations?: Record<string, string> } } };
    }>;
  }>('GET', `/apis/apps/v1/namespaces/${NS}/replicasets`);
  return res.body.items
    .filter((rs) => rs.metadata.ownerReferences?.some((o) => o.name === app))
    .map(
      (rs) =>
        JSON.parse(rs.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '{}') as Record<
          string,
          number
        >,
    );
}

const recorded = async (c: string, app: string) =>
  JSON.parse(
    (await getWorkload(c, NS, 'Deployment', app)).spec.template?.metadata?.annotations?.['vault-rollout.io/versions'] ??
      '{}',
  ) as Record<string, number>;

describe('the Lambda worker on a real FIFO queue', () => {
  it(`settle (${SETTLE_S} s): a burst of five requests is held by visibility and comes back in one batch: one restart recording all five versions`, async () => {
    expect(workerBatchSize(table, 'auto')).toBe(10);
    const intake = new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl });
    const paths = [1, 2, 3, 4, 5].map((i) => `secret/holds/burst/p${i}`);
    const expected = Object.fromEntries(paths.map((p, i) => [p, i + 2]));
    // The writes arrive while the worker is already polling, 400 ms apart: the first is received alone.
    const burst = (async () => {
      for (const [i, path] of paths.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, 400));
        await post(intake, path, i + 2);
      }
    })();
    const batches = await eventSourceMapping(
      async () => Object.keys(await recorded('alpha', 'burst')).length > 0 && (await depth(queue.queueUrl)) === 0,
      60_000,
    );
    await burst;

    const alpha = batches
      .map((b) => ({ ...b, deliveries: b.deliveries.filter((d) => d.group === 'alpha') }))
      .filter((b) => b.deliveries.length > 0);
    // First: the burst's first change alone, held (reported failed, its visibility set to the window).
    expect(alpha[0]?.deliveries.map((d) => d.receiveCount)).toEqual([1]);
    expect(alpha[0]?.failed).toEqual(alpha[0]?.deliveries.map((d) => d.messageId));
    // It came back after the hold, long before the queue's 60 s visibility timeout: ChangeMessageVisibility worked.
    const first = alpha[0]?.deliveries[0];
    const back = alpha[1]?.deliveries.find((d) => d.messageId === first?.messageId);
    expect(back?.receiveCount).toBe(2);
    expect((back?.at ?? Infinity) - (first?.at ?? 0)).toBeLessThan(20_000);
    // Last: all five in the SAME batch, none failed: worked as one plan, after at most HOLDS_BEFORE_RESEND holds.
    const last = alpha.at(-1);
    expect(last?.deliveries).toHaveLength(5);
    expect(last?.failed).toEqual([]);
    expect(Math.max(...(last?.deliveries ?? []).map((d) => d.receiveCount))).toBeLessThanOrEqual(
      HOLDS_BEFORE_RESEND + 1,
    );
    expect(alpha.slice(0, -1).every((b) => b.failed.length === b.deliveries.length)).toBe(true);

    // One restart: the original ReplicaSet and one new one, recording every version of the burst.
    await waitFor(async () => (await replicaSetRecords('alpha', 'burst')).length === 2 || undefined, {
      timeoutMs: 30_000,
      what: 'the new ReplicaSet',
    });
    await new Promise((r) => setTimeout(r, 1500));
    const records = await replicaSetRecords('alpha', 'burst');
    expect(records).toHaveLength(2);
    expect(records.find((r) => Object.keys(r).length > 0)).toEqual(expected);
    expect(await recorded('alpha', 'burst')).toEqual(expected);
    expect(await depth(queue.deadLetterQueueUrl)).toBe(0);
  }, 120_000);

  it('a gate: held by visibility, re-sent fresh after HOLDS_BEFORE_RESEND holds (nothing dead-lettered), then queues the next wave', async () => {
    // The intake's messages for version 2: the first wave's (alpha) cluster message and the gate. The gate goes to
    // the queue alone first, so its wave stays unrestarted while it waits.
    const captured: QueueMessage[] = [];
    await post({ send: async (m) => void captured.push(...m) }, 'secret/holds/gated', 2);
    const gate = captured.find(isGateMessage);
    const wave1 = captured.filter((m) => !isGateMessage(m));
    expect(gate).toMatchObject({ wave: 0, round: 0 });
    expect(wave1.map((m) => (isGateMessage(m) ? '' : m.cluster))).toEqual(['alpha']);
    const rolloutQueue = new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl });
    await rolloutQueue.send([gate as QueueMessage]);

    const gates = (batches: readonly Batch[]) =>
      batches.flatMap((b) =>
        b.deliveries.flatMap((d) =>
          isGateMessage(d.message) ? [{ ...d, round: d.message.round, failed: b.failed.includes(d.messageId) }] : [],
        ),
      );
    // The worker's gate looks again every 10 s (its default): two holds, then the fresh copy.
    const waiting = gates(
      await eventSourceMapping(async (batches) => gates(batches).some((g) => g.round === 1), 90_000),
    );
    const round0 = waiting.filter((g) => g.round === 0);
    expect(round0.map((g) => [g.receiveCount, g.failed])).toEqual([
      [1, true],
      [2, true],
      // The third receive: held HOLDS_BEFORE_RESEND times already, so it is acknowledged and re-sent fresh.
      [HOLDS_BEFORE_RESEND + 1, false],
    ]);
    // Each hold ended long before the queue's 60 s visibility timeout: ChangeMessageVisibility worked.
    for (let i = 1; i < round0.length; i++)
      expect((round0[i]?.at ?? Infinity) - (round0[i - 1]?.at ?? 0)).toBeLessThan(30_000);
    expect(waiting.filter((g) => g.round === 1).map((g) => g.receiveCount)).toEqual([1]);
    expect(await depth(queue.deadLetterQueueUrl)).toBe(0);

    // The wave's cluster message arrives: alpha restarts, the gate (round 1) sees it complete and queues beta.
    await rolloutQueue.send(wave1);
    const rest = await eventSourceMapping(
      async () => (await recorded('beta', 'gated'))['secret/holds/gated'] === 2 && (await depth(queue.queueUrl)) === 0,
      90_000,
    );
    const next = rest.flatMap((b) => b.deliveries).filter((d) => !isGateMessage(d.message) && d.group === 'beta');
    expect(next.map((d) => (isGateMessage(d.message) ? undefined : d.message.wave))).toEqual([1]);
    for (const c of ['alpha', 'beta']) {
      await waitFor(async () => (await replicaSetRecords(c, 'gated')).length === 2 || undefined, {
        timeoutMs: 30_000,
        what: `the new ReplicaSet in ${c}`,
      });
      expect((await replicaSetRecords(c, 'gated')).filter((r) => r['secret/holds/gated'] === 2)).toHaveLength(1);
    }
    expect(await depth(queue.deadLetterQueueUrl)).toBe(0);
  }, 200_000);

  it('a forged later-wave message (beta, a version no gate released) is dead-lettered with its reason; nothing restarts', async () => {
    const before = await recorded('beta', 'gated');
    const forged = rolloutMessages(
      'beta',
      [
        {
          namespace: '',
          mount: 'secret',
          key: 'holds/gated',
          path: 'secret/holds/gated',
          operation: 'write',
          version: 9,
          kvVersion: 2,
          kvVersionFrom: 'routes',
          source: 'audit',
          via: 'direct',
          id: 'forged-9',
          time: new Date().toISOString(),
          record: 'forged',
        },
      ],
      new Date().toISOString(),
      1,
    );
    await new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }).send(forged);
    await eventSourceMapping(async () => (await depth(queue.queueUrl)) === 0, 30_000);
    expect(await recorded('beta', 'gated')).toEqual(before);
    const dead =
      (
        await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.deadLetterQueueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['All'],
          }),
        )
      ).Messages ?? [];
    expect(dead.map((m) => m.MessageAttributes?.reason?.StringValue)).toEqual([
      expect.stringMatching(
        /cluster "beta" is in wave 2 of 2 of rotation [0-9a-f]+ \(route gated\), and no passed gate released that wave/,
      ),
    ]);
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queue.deadLetterQueueUrl,
        Entries: dead.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
  }, 60_000);

  it("batches of 10: a hanging cluster delays no other cluster's next message (each cluster handed back as soon as it is worked)", async () => {
    const intake = new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl });
    await post(intake, 'secret/holds/isolated', 2);
    const receive = async () =>
      (
        await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queue.queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageSystemAttributeNames: ['All'],
          }),
        )
      ).Messages ?? [];
    const first = await waitFor(
      async () => {
        const got = await receive();
        return got.length > 0 ? got : undefined;
      },
      { timeoutMs: 10_000, what: 'the first batch' },
    );
    expect(first.map((m) => m.Attributes?.MessageGroupId).sort()).toEqual(['beta', 'hanging']);
    let firstDone = false;
    const firstInvocation = handler({ Records: first.map(toRecord) }).finally(() => (firstDone = true));
    try {
      await waitFor(async () => (await recorded('beta', 'isolated'))['secret/holds/isolated'] === 2 || undefined, {
        timeoutMs: 30_000,
        what: 'beta restarted at version 2',
      });
      // The next change: beta's message is receivable while the first invocation still hangs on the other cluster,
      // because beta's first message was deleted when beta was worked, not when the batch ended.
      await post(intake, 'secret/holds/isolated', 3);
      // (beta's restart is followed by a continuation in a group of its own, not what this test is about.)
      const next = await waitFor(
        async () => {
          const got = (await receive()).filter((m) => !m.Attributes?.MessageGroupId?.startsWith('follow-'));
          return got.length > 0 ? got : undefined;
        },
        { timeoutMs: 10_000, what: "beta's next message" },
      );
      expect(next.map((m) => [m.Attributes?.MessageGroupId, m.Attributes?.ApproximateReceiveCount])).toEqual([
        ['beta', '1'],
      ]);
      expect(firstDone).toBe(false);
      const response = await handler({ Records: next.map(toRecord) });
      expect(response.batchItemFailures).toEqual([]);
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queue.queueUrl,
          Entries: next.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })),
        }),
      );
      expect((await recorded('beta', 'isolated'))['secret/holds/isolated']).toBe(3);
      expect(firstDone).toBe(false);
    } finally {
      // Let go of the hanging cluster: its requests fail, and the first invocation reports only its message.
      for (const socket of hungSockets) socket.destroy();
      hang.close();
    }
    const response = await firstInvocation;
    const hangingId = first.find((m) => m.Attributes?.MessageGroupId === 'hanging')?.MessageId;
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: hangingId }]);
    // What the event source mapping then does: delete the rest — beta's message, already gone.
    const again = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queue.queueUrl,
        Entries: first
          .filter((m) => m.MessageId !== hangingId)
          .map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
    console.log(
      `deleting beta's message again after the early delete: ${JSON.stringify({ successful: again.Successful?.length ?? 0, failed: again.Failed?.map((f) => f.Code) ?? [] })}`,
    );
  }, 200_000);
});
