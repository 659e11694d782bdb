/**
 * SqsRolloutQueue against a real SQS implementation (ElasticMQ on 127.0.0.1), through the real AWS SDK: FIFO
 * order per cluster, deduplication of a re-sent payload, batch splitting, redrive to the dead-letter queue, and
 * an unreachable queue. Needs no Kubernetes cluster.
 */
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type SendMessageBatchCommandInput,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  deduplicationId,
  parseRolloutMessage,
  QueueUnavailableError,
  type RolloutMessage,
} from '../../lib/queue/rollout-message.ts';
import { MAX_BATCH_BYTES, SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import {
  createFifoQueueWithDlq,
  emulatorClient,
  freeLoopbackPort,
  startSqsEmulator,
  type SqsEmulator,
} from '../sqs/emulator.ts';
import { messageName, rolloutMessage } from '../sqs/fixtures.ts';

let emulator: SqsEmulator;
let client: SQSClient;
/** Every SendMessageBatch input the client sent, to check how a send was split. */
const batchCalls: SendMessageBatchCommandInput[] = [];

beforeAll(async () => {
  emulator = await startSqsEmulator();
  console.log(
    `ElasticMQ on ${emulator.endpoint}: install ${Math.round(emulator.installMs)} ms, start ${Math.round(emulator.startMs)} ms`,
  );
  client = emulatorClient(emulator.endpoint);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === SendMessageBatchCommand.name)
        batchCalls.push(args.input as SendMessageBatchCommandInput);
      return next(args);
    },
    { step: 'initialize', name: 'recordBatchCalls' },
  );
});

afterAll(async () => {
  client?.destroy();
  await emulator?.stop();
});

let queueCount = 0;
/** A fresh queue pair per test, so tests never see each other's messages. */
async function freshQueue(
  maxReceiveCount = 3,
): Promise<{ queueUrl: string; deadLetterQueueUrl: string; rolloutQueue: SqsRolloutQueue }> {
  queueCount += 1;
  const pair = await createFifoQueueWithDlq(client, { name: `rollouts-${queueCount}-${process.pid}`, maxReceiveCount });
  return { ...pair, rolloutQueue: new SqsRolloutQueue({ client, queueUrl: pair.queueUrl }) };
}

async function receive(queueUrl: string, max = 10): Promise<Message[]> {
  const output = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: max,
      WaitTimeSeconds: 0,
      MessageSystemAttributeNames: ['All'],
    }),
  );
  return output.Messages ?? [];
}

const deleteMessage = (queueUrl: string, m: Message): Promise<unknown> =>
  client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));

/** "cluster/name" of a received message. */
function nameOf(m: Message): string {
  const message = parseRolloutMessage(m.Body ?? '') as RolloutMessage;
  return messageName(message);
}

/** Receives and deletes until the queue is empty; returns the names in the order received. */
async function drain(queueUrl: string): Promise<string[]> {
  const names: string[] = [];
  for (let empty = 0; empty < 2;) {
    const messages = await receive(queueUrl);
    if (messages.length === 0) empty += 1;
    for (const m of messages) {
      names.push(nameOf(m));
      await deleteMessage(queueUrl, m);
    }
  }
  return names;
}

const only = (names: readonly string[], cluster: string): string[] => names.filter((n) => n.startsWith(`${cluster}/`));

describe('SqsRolloutQueue on ElasticMQ', () => {
  it('delivers one cluster in order, and a cluster with a message in flight does not hold up the others', async () => {
    const { queueUrl, rolloutQueue } = await freshQueue();
    const messages = [
      rolloutMessage('alpha', 'a1'),
      rolloutMessage('beta', 'b1'),
      rolloutMessage('alpha', 'a2'),
      rolloutMessage('alpha', 'a3'),
      rolloutMessage('beta', 'b2'),
    ];
    await rolloutQueue.send(messages);

    const [first] = await receive(queueUrl, 1);
    expect(first?.Attributes?.MessageGroupId).toBe('alpha');
    expect(first?.Attributes?.MessageDeduplicationId).toBe(deduplicationId(messages[0] as RolloutMessage));
    expect(parseRolloutMessage(first?.Body ?? '')).toEqual(messages[0]);

    // alpha is blocked while a1 is in flight; beta is not.
    const [second] = await receive(queueUrl, 1);
    expect(second && nameOf(second)).toBe('beta/b1');
    expect(await receive(queueUrl)).toEqual([]);

    await deleteMessage(queueUrl, first as Message);
    await deleteMessage(queueUrl, second as Message);
    const rest = await drain(queueUrl);
    expect(only(['alpha/a1', ...rest], 'alpha')).toEqual(['alpha/a1', 'alpha/a2', 'alpha/a3']);
    expect(only(['beta/b1', ...rest], 'beta')).toEqual(['beta/b1', 'beta/b2']);
  });

  it('queues a re-sent identical payload once, also after the first copy was worked', async () => {
    const { queueUrl, rolloutQueue } = await freshQueue();
    const payload = [rolloutMessage('alpha', 'api', 7), rolloutMessage('beta', 'api', 7)];
    await rolloutQueue.send(payload);
    await rolloutQueue.send(payload);
    expect((await drain(queueUrl)).sort()).toEqual(['alpha/api', 'beta/api']);

    await rolloutQueue.send(payload);
    expect(await receive(queueUrl)).toEqual([]);

    // A new secret version is a new restart, not a duplicate.
    await rolloutQueue.send([rolloutMessage('alpha', 'api', 8)]);
    expect(await drain(queueUrl)).toEqual(['alpha/api']);
  });

  it('splits more than 10 messages into several calls, and all arrive in order per cluster', async () => {
    const { queueUrl, rolloutQueue } = await freshQueue();
    const messages = Array.from({ length: 24 }, (_, i) =>
      rolloutMessage(`cluster-${i % 12}`, `w${Math.floor(i / 12)}`),
    );
    const callsBefore = batchCalls.length;
    await rolloutQueue.send(messages);

    const calls = batchCalls.slice(callsBefore);
    expect(calls.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...calls.map((c) => c.Entries?.length ?? 0))).toBe(10);
    const received = await drain(queueUrl);
    expect(received.sort()).toEqual(messages.map(messageName).sort());
    // A group's w0 and w1 were sent in separate calls, w0 first, and arrive in that order.
    for (let c = 0; c < 12; c++) expect(only(received, `cluster-${c}`)).toEqual([`cluster-${c}/w0`, `cluster-${c}/w1`]);
  });

  it('splits a batch over 256 KiB into several calls, and all arrive', async () => {
    const { queueUrl, rolloutQueue } = await freshQueue();
    // Four messages of ~150 KiB: 600 KiB in all, at most one per call.
    const messages = Array.from({ length: 4 }, (_, i) => rolloutMessage(`cluster-${i}`, 'api', 1, 150 * 1024));
    const callsBefore = batchCalls.length;
    await rolloutQueue.send(messages);

    const calls = batchCalls.slice(callsBefore);
    expect(calls).toHaveLength(4);
    for (const call of calls)
      expect(
        (call.Entries ?? []).reduce((sum, e) => sum + Buffer.byteLength(e.MessageBody ?? ''), 0),
      ).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    const received: Message[] = [];
    for (let empty = 0; empty < 2;) {
      const batch = await receive(queueUrl);
      if (batch.length === 0) empty += 1;
      received.push(...batch);
      for (const m of batch) await deleteMessage(queueUrl, m);
    }
    const bodies = received.map((m) => parseRolloutMessage(m.Body ?? '') as RolloutMessage);
    expect(bodies.sort((a, b) => a.cluster.localeCompare(b.cluster))).toEqual(messages);
  });

  it('moves a message that keeps failing to the dead-letter queue after maxReceiveCount receives', async () => {
    const { queueUrl, deadLetterQueueUrl, rolloutQueue } = await freshQueue(2);
    await rolloutQueue.send([rolloutMessage('alpha', 'poison'), rolloutMessage('alpha', 'next')]);

    for (let attempt = 1; attempt <= 2; attempt++) {
      const [message] = await receive(queueUrl, 1);
      expect(message && nameOf(message)).toBe('alpha/poison');
      expect(message?.Attributes?.ApproximateReceiveCount).toBe(String(attempt));
      // The worker failed: make it visible again at once, as a Lambda partial batch failure does after the timeout.
      await client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: message?.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      );
    }

    // The third receive moves it to the dead-letter queue and unblocks its cluster.
    expect(await drain(queueUrl)).toEqual(['alpha/next']);
    const deadLetters = await receive(deadLetterQueueUrl);
    expect(deadLetters.map(nameOf)).toEqual(['alpha/poison']);
    expect(deadLetters[0]?.Attributes?.MessageGroupId).toBe('alpha');
  });

  it('answers QueueUnavailableError, fast, when the queue cannot be reached', async () => {
    const closedPort = await freeLoopbackPort();
    const unreachable = emulatorClient(`http://127.0.0.1:${closedPort}`, {
      maxAttempts: 2,
      requestHandler: { connectionTimeout: 500, requestTimeout: 1000 },
    });
    const rolloutQueue = new SqsRolloutQueue({
      client: unreachable,
      queueUrl: `http://127.0.0.1:${closedPort}/000000000000/rollouts.fifo`,
    });
    const started = performance.now();
    const error = await rolloutQueue.send([rolloutMessage('alpha', 'api')]).catch((e: unknown) => e);
    const elapsedMs = performance.now() - started;
    unreachable.destroy();

    expect(error).toBeInstanceOf(QueueUnavailableError);
    expect((error as Error).cause).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^the rollout queue did not accept a batch of 1 message\(s\): /);
    expect(elapsedMs).toBeLessThan(3000);
  });
});
