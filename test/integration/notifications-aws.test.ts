/**
 * Notifications outside `serve`, on DynamoDB Local and ElasticMQ: the outbox in the rotation-state table
 * (created as serverless.yml declares it: pk/sk, TTL, the `outbox-due` index).
 *
 * 1. The DynamoDB outbox itself, two handles on one table: an event id is recorded once, a delivery is leased to one
 *    sender at a time, retried at its time, never sent again once sent or given up; a rotation's notes expire.
 * 2. Lambda: the same event put twice (a redelivered refused message) is one delivery; functions/notify.ts, fed the
 *    INSERT records the table's stream carries (keys only, and one record twice, as a retried stream batch does),
 *    sends the working sink's delivery once, hands the failing sink's back (batchItemFailures) and tries it again at
 *    the next invocation after its backoff.
 * 3. `vault-rollout worker` (the CLI, a child process) with VAULT_ROLLOUT_STATE_TABLE: a real rotation on the test
 *    cluster alpha completes while one sink answers 500 — the worker's message is worked and deleted (the queue
 *    drains, nothing reaches the DLQ), the working sink gets one `complete`, the failing one is retried by the
 *    worker's delivery loop, beside the pollers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetItemCommand, ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { eventId } from '../../lib/notify/event.ts';
import { noticeDeadLetter } from '../../lib/pipeline/rotation-notices.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { DynamoDbRotationStore } from '../../lib/rotations/dynamodb-rotation-store.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { createRotationStateTable, startDynamoDbLocal, type DynamoDbLocal } from '../dynamodb/dynamodb-local.ts';
import { recordOutput } from '../hygiene/capture.ts';
import { verifyNotification } from '../../lib/notify/sinks.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator, type SqsEmulator } from '../sqs/emulator.ts';
import {
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  repoRootDir,
  uniqueName,
} from './support.ts';
import { kvWriteAudit, postToIntake } from './wave-fixtures.ts';

const NS = uniqueName('vr-notify-aws');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-notify-aws-'));
const KEY = 'notify-aws-test-hmac-key-51c0e2';
const TTL = 3_600_000;
let dynamo: DynamoDbLocal;
let client: DynamoDBClient;
let emulator: SqsEmulator;
let sqs: SQSClient;
let tables = 0;
const servers: Server[] = [];

interface Received {
  kind: string;
  id: string;
  auth: ReturnType<typeof verifyNotification>;
}
const ok: Received[] = [];
const errArrivals: string[] = [];
let urls: { ok: string; err: string };

async function listen(
  handler: (req: IncomingMessage, body: Buffer, answer: (status: number) => void) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(req, Buffer.concat(chunks), (status) => res.writeHead(status).end()));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

const newTable = async (): Promise<string> => {
  const name = `rotation-state-${++tables}`;
  await createRotationStateTable(client, name);
  return name;
};

const sinksBlock = (events: string) => `notifications:
  sinks:
    ok: { type: webhook, urlFromEnv: NOTIFY_OK_URL, secretFromEnv: NOTIFY_KEY }
    err: { type: slack, urlFromEnv: NOTIFY_ERR_URL }
  events: ${events}
`;
const sinkEnv = () => ({
  VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1',
  NOTIFY_OK_URL: urls.ok,
  NOTIFY_ERR_URL: urls.err,
  NOTIFY_KEY: KEY,
});
const awsEnv = () => ({
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
  AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
  AWS_ENDPOINT_URL_SQS: emulator.endpoint,
  POWERTOOLS_METRICS_DISABLED: 'true',
});

beforeAll(async () => {
  [dynamo, emulator] = await Promise.all([startDynamoDbLocal(), startSqsEmulator()]);
  client = dynamo.client();
  sqs = emulatorClient(emulator.endpoint);
  urls = {
    ok: await listen((req, body, answer) => {
      const event = JSON.parse(body.toString()) as Record<string, unknown>;
      ok.push({
        kind: String(event.kind),
        id: String(event.id),
        // The notification's own signing context: the intake's check refuses it, so a sink's key cannot forge a change.
        auth: verifyNotification(KEY, (n) => req.headers[n] as string | undefined, body, Math.floor(Date.now() / 1000)),
      });
      answer(200);
    }),
    err: await listen((_, body, answer) => {
      errArrivals.push(body.toString());
      answer(500);
    }),
  };
  await createNamespace('alpha', NS);
  await createWorkload('alpha', NS, 'Deployment', 'api');
}, 300_000);

afterAll(async () => {
  client?.destroy();
  await Promise.all([dynamo?.stop(), emulator?.stop()]);
  for (const s of servers) s.close();
  await deleteNamespace('alpha', NS);
});

describe('the notifications outbox in DynamoDB', () => {
  it('records an id once, leases a delivery to one sender, retries it at its time, never sends it again; notes expire', async () => {
    const table = await newTable();
    const a = new DynamoDbRotationStore({ client, table });
    const b = new DynamoDbRotationStore({ client, table });
    expect(await a.enqueueOnce('e1', ['ops', 'audit'], '{"a":1}', 1000, TTL)).toBe(true);
    expect(await b.enqueueOnce('e1', ['ops', 'audit'], '{"a":2}', 2000, TTL)).toBe(false);
    const taken = await a.takeDue(2000, 10, 30_000);
    expect(taken.map((d) => [d.eventId, d.sink, d.body, d.attempts]).sort()).toEqual([
      ['e1', 'audit', '{"a":1}', 0],
      ['e1', 'ops', '{"a":1}', 0],
    ]);
    // The other sender finds them leased, by the index and by key.
    expect(await b.takeDue(2000, 10, 30_000)).toEqual([]);
    expect(await b.take('e1', 'ops', 2000, 30_000)).toEqual({ notBefore: 32_000 });
    await a.sent('e1', 'ops');
    await a.failed('e1', 'audit', 1, 40_000);
    expect(await b.take('e1', 'ops', 50_000, 30_000)).toBe('done');
    expect(await b.takeDue(39_999, 10, 30_000)).toEqual([]);
    expect(await b.take('e1', 'audit', 40_000, 30_000)).toEqual({
      delivery: { eventId: 'e1', sink: 'audit', body: '{"a":1}', attempts: 1 },
    });
    await b.failed('e1', 'audit', 6, undefined);
    expect(await a.takeDue(10_000_000, 10, 30_000)).toEqual([]);
    expect(await a.take('e1', 'audit', 10_000_000, 30_000)).toBe('done');
    // Past its TTL (the item not yet deleted by DynamoDB) the id is new again.
    expect(await a.enqueueOnce('e1', ['ops'], '{}', 2000 + TTL, TTL)).toBe(true);
    // At most `limit`, oldest first.
    const t2 = await newTable();
    const c = new DynamoDbRotationStore({ client, table: t2 });
    for (let i = 0; i < 5; i++) await c.enqueueOnce(`e${i}`, ['s'], '{}', i, TTL);
    expect((await c.takeDue(10, 3, 30_000)).map((d) => d.eventId)).toEqual(['e0', 'e1', 'e2']);
    await a.note('r', 'done beta', 0, TTL);
    await a.note('r', 'done alpha', 0, TTL);
    await b.note('r', 'done alpha', 10_000, TTL);
    expect(await b.notes('r', 5000)).toEqual(['done alpha', 'done beta']);
    expect(await b.notes('r', TTL + 5000)).toEqual(['done alpha']);
    expect(await b.notes('other', 0)).toEqual([]);
  });

  it('Lambda: the same event put twice is one delivery; the notify function sends it once per sink and retries the failing one', async () => {
    const table = await newTable();
    const routesFile = join(dir, 'lambda-routes.yaml');
    writeFileSync(routesFile, `clusters: {}\n${sinksBlock('[dead-letter]')}routes: []\n`);
    const routing = loadRoutingTable(`clusters: {}\n${sinksBlock('[dead-letter]')}routes: []\n`, routesFile);
    const store = new DynamoDbRotationStore({ client, table });
    const telemetry = memoryTelemetry();
    const deps = { table: routing, telemetry, notifications: { outbox: store } };
    // A refused message dead-lettered, then the same message again (a redelivery): one event, one delivery per sink.
    await noticeDeadLetter(deps, { messageId: 'm-lambda-1', groupId: 'alpha' }, 'a cluster that is not in the table');
    await noticeDeadLetter(deps, { messageId: 'm-lambda-1', groupId: 'alpha' }, 'a cluster that is not in the table');
    expect(telemetry.lines.filter((l) => l.message === 'notification queued')).toHaveLength(1);
    const id = eventId('dead-letter', 'm-lambda-1');
    const items = (await client.send(new ScanCommand({ TableName: table }))).Items ?? [];
    expect(items.map((i) => `${i.pk?.S} ${i.sk?.S}`).sort()).toEqual([
      `notify#${id} event`,
      `notify#${id} sink#err`,
      `notify#${id} sink#ok`,
    ]);

    const saved = { ...process.env };
    Object.assign(process.env, {
      ...awsEnv(),
      ...sinkEnv(),
      VAULT_ROLLOUT_ROUTES: routesFile,
      VAULT_ROLLOUT_STATE_TABLE: table,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
    });
    try {
      const { handler } = await import('../../functions/notify.ts');
      const record = (sk: string, seq: string, pk = `notify#${id}`): DynamoDBStreamEvent['Records'][number] => ({
        eventName: 'INSERT',
        dynamodb: { Keys: { pk: { S: pk }, sk: { S: sk } }, SequenceNumber: seq, StreamViewType: 'KEYS_ONLY' },
      });
      const context = { getRemainingTimeInMillis: () => 60_000 };
      const okBefore = ok.length;
      const errBefore = errArrivals.length;
      // The stream's batch: both deliveries, the working one twice (a retried batch), and a record that is no delivery.
      const first = await handler(
        {
          Records: [
            record('sink#ok', '100'),
            record('sink#err', '101'),
            record('sink#ok', '100'),
            record('halt', '102', 'rotation#r1'),
          ],
        },
        context,
      );
      expect(first).toEqual({ batchItemFailures: [{ itemIdentifier: '101' }] });
      expect(ok.slice(okBefore).map((r) => [r.kind, r.id, r.auth.ok])).toEqual([['dead-letter', id, true]]);
      expect(errArrivals.length - errBefore).toBe(1);
      // The event source mapping invokes again from the failed record: the backoff is waited out, the sink tried again.
      const second = await handler({ Records: [record('sink#err', '101'), record('sink#ok', '100')] }, context);
      expect(second).toEqual({ batchItemFailures: [{ itemIdentifier: '101' }] });
      expect(errArrivals.length - errBefore).toBe(2);
      expect(ok.length - okBefore).toBe(1);
      const err = (
        await client.send(
          new GetItemCommand({
            TableName: table,
            Key: { pk: { S: `notify#${id}` }, sk: { S: 'sink#err' } },
            ConsistentRead: true,
          }),
        )
      ).Item;
      expect([err?.state?.S, err?.attempts?.N]).toEqual(['pending', '2']);
      const sent = (
        await client.send(
          new GetItemCommand({
            TableName: table,
            Key: { pk: { S: `notify#${id}` }, sk: { S: 'sink#ok' } },
            ConsistentRead: true,
          }),
        )
      ).Item;
      expect([sent?.state?.S, sent?.outboxDue]).toEqual(['sent', undefined]);
      // No secret in what the failing sink got, nor the URL of the other.
      expect(errArrivals.join('\n')).not.toContain(KEY);
    } finally {
      process.env = saved;
    }
  });

  it("vault-rollout worker: a failing sink never fails the worker's message; the working sink gets one complete", async () => {
    const table = await newTable();
    const queue = await createFifoQueueWithDlq(sqs, {
      name: 'notify-worker',
      maxReceiveCount: 5,
      visibilityTimeoutSeconds: 10,
    });
    const routes = `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
${sinksBlock('[complete, dead-letter]')}routes:
  - name: notify-worker
    match: { path: "secret/notify-worker/api" }
    rollout: { timeout: 60s }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: api }]
`;
    const routesFile = join(dir, 'worker-routes.yaml');
    writeFileSync(routesFile, routes);
    const okBefore = ok.length;
    const errBefore = errArrivals.length;
    const output: string[] = [];
    const worker: ChildProcess = spawn(
      process.execPath,
      [
        join(repoRootDir, 'lib/cli/main.ts'),
        'worker',
        '--routes',
        routesFile,
        '--queue-url',
        queue.queueUrl,
        '--dlq-url',
        queue.deadLetterQueueUrl,
        '--concurrency',
        '1',
      ],
      {
        env: { ...process.env, ...awsEnv(), ...sinkEnv(), HOME: dir, VAULT_ROLLOUT_STATE_TABLE: table },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const capture = (chunk: Buffer) => {
      recordOutput(chunk);
      output.push(chunk.toString());
    };
    worker.stdout?.on('data', capture);
    worker.stderr?.on('data', capture);
    try {
      await postToIntake(
        loadRoutingTable(routes, routesFile),
        new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
        kvWriteAudit('notify-worker-1', 'secret/notify-worker/api', 2),
      );
      await waitFor(
        async () =>
          (await getWorkload('alpha', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
            'vault-rollout.io/versions'
          ] === '{"secret/notify-worker/api":2}' || undefined,
        { timeoutMs: 60_000, what: 'the restart' },
      );
      await waitFor(() => Promise.resolve(ok.slice(okBefore).some((r) => r.kind === 'complete') || undefined), {
        timeoutMs: 90_000,
        what: 'the complete notification',
      });
      // The failing sink is retried by the worker's delivery loop (2 s, then 4 s …), while the message is long done.
      await waitFor(() => Promise.resolve(errArrivals.length - errBefore >= 2 || undefined), {
        timeoutMs: 30_000,
        what: 'a retry of the failing sink',
      });
      const depth = async (url: string) => {
        const out = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        );
        return (
          Number(out.Attributes?.ApproximateNumberOfMessages) +
          Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible)
        );
      };
      await waitFor(async () => (await depth(queue.queueUrl)) === 0 || undefined, {
        timeoutMs: 30_000,
        what: 'the queue to drain',
      });
      expect(await depth(queue.deadLetterQueueUrl)).toBe(0);
    } finally {
      worker.kill('SIGTERM');
      await new Promise((r) => worker.once('exit', r));
    }
    expect(ok.slice(okBefore).map((r) => [r.kind, r.auth.ok])).toEqual([['complete', true]]);
    expect(errArrivals.slice(errBefore).every((text) => text.includes('Rotation complete'))).toBe(true);
    const text = output.join('');
    expect(text).not.toContain('the worker failed on a batch');
    expect(text).toContain('notification not delivered; trying again later');
    expect(text).not.toContain(KEY);
  });
});
