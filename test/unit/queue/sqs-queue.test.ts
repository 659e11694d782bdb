import {
  SendMessageBatchCommand,
  SQSClient,
  SQSServiceException,
  type SendMessageBatchCommandInput,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  deduplicationId,
  parseRolloutMessage,
  QueueUnavailableError,
  type RolloutMessage,
} from '../../../lib/queue/rollout-message.ts';
import { MAX_BATCH_BYTES, packCalls, SqsRolloutQueue } from '../../../lib/queue/sqs-queue.ts';
import { messageName, rolloutMessage } from '../../sqs/fixtures.ts';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout.fifo';
const sqsMock = mockClient(SQSClient);

function queue(sleeps: number[] = []): SqsRolloutQueue {
  return new SqsRolloutQueue({
    client: new SQSClient({ region: 'eu-west-1' }),
    queueUrl: QUEUE_URL,
    sleep: async (ms) => void sleeps.push(ms),
  });
}

const calls = (): SendMessageBatchCommandInput[] =>
  sqsMock.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input);
/** "cluster/name" of each entry of each call. */
const sent = (): string[][] =>
  calls().map((input) =>
    (input.Entries ?? []).map((e) => {
      const message = parseRolloutMessage(e.MessageBody ?? '') as RolloutMessage;
      return messageName(message);
    }),
  );

/** Answers every call with success, except the entries whose message `fail` picks (by "cluster/name"). */
function answer(
  fail: (name: string, call: number) => { Code: string; SenderFault?: boolean } | undefined = () => undefined,
): void {
  let call = 0;
  sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommandInput) => {
    call += 1;
    const Successful = [];
    const Failed = [];
    for (const entry of input.Entries ?? []) {
      const message = parseRolloutMessage(entry.MessageBody ?? '') as RolloutMessage;
      const failure = fail(messageName(message), call);
      if (failure) Failed.push({ Id: entry.Id, Code: failure.Code, SenderFault: failure.SenderFault ?? false });
      else Successful.push({ Id: entry.Id, MessageId: `id-${entry.Id}`, MD5OfMessageBody: 'x' });
    }
    return { Successful, Failed };
  });
}

beforeEach(() => sqsMock.reset());

describe('SqsRolloutQueue.send', () => {
  it('sends each message with its cluster as group, its restart tokens as deduplication id and JSON as body', async () => {
    answer();
    const messages = [rolloutMessage('alpha', 'api'), rolloutMessage('beta', 'api')];
    await queue().send(messages);

    expect(calls()).toHaveLength(1);
    const input = calls()[0];
    expect(input?.QueueUrl).toBe(QUEUE_URL);
    expect(input?.Entries).toEqual(
      messages.map((m, i) => ({
        Id: `m${i}`,
        MessageBody: JSON.stringify(m),
        MessageGroupId: m.cluster,
        MessageDeduplicationId: deduplicationId(m),
      })),
    );
  });

  it('sends nothing for no messages', async () => {
    answer();
    await queue().send([]);
    expect(calls()).toHaveLength(0);
  });

  it('splits more than 10 messages into calls of at most 10 entries', async () => {
    answer();
    const messages = Array.from({ length: 25 }, (_, i) => rolloutMessage(`cluster-${i}`, 'api'));
    await queue().send(messages);
    expect(calls().map((c) => c.Entries?.length)).toEqual([10, 10, 5]);
  });

  it('splits calls that would exceed 256 KiB of bodies', async () => {
    answer();
    const messages = Array.from({ length: 5 }, (_, i) => rolloutMessage(`cluster-${i}`, 'api', 1, 100 * 1024));
    await queue().send(messages);
    const callBytes = calls().map((c) =>
      (c.Entries ?? []).reduce((sum, e) => sum + Buffer.byteLength(e.MessageBody ?? ''), 0),
    );
    expect(calls().map((c) => c.Entries?.length)).toEqual([2, 2, 1]);
    expect(Math.max(...callBytes)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
  });

  it('keeps the order of one group: its next message goes out only after the previous one was accepted', async () => {
    answer();
    await queue().send([
      rolloutMessage('alpha', 'a1'),
      rolloutMessage('beta', 'b1'),
      rolloutMessage('alpha', 'a2'),
      rolloutMessage('alpha', 'a3'),
    ]);
    expect(sent()).toEqual([['alpha/a1', 'beta/b1'], ['alpha/a2'], ['alpha/a3']]);
  });

  it('retries entries reported as Failed, with backoff, before sending their group on', async () => {
    answer((name, call) => (name === 'alpha/a1' && call <= 2 ? { Code: 'InternalError' } : undefined));
    const sleeps: number[] = [];
    await queue(sleeps).send([
      rolloutMessage('alpha', 'a1'),
      rolloutMessage('alpha', 'a2'),
      rolloutMessage('beta', 'b1'),
      rolloutMessage('beta', 'b2'),
    ]);

    expect(sent()).toEqual([['alpha/a1', 'beta/b1'], ['alpha/a1', 'beta/b2'], ['alpha/a1'], ['alpha/a2']]);
    expect(sleeps).toEqual([100, 200]);
  });

  it('gives up after the bounded retries and names how many messages were not queued, never their content', async () => {
    answer((name) => (name === 'alpha/a1' ? { Code: 'InternalError' } : undefined));
    const sleeps: number[] = [];
    const messages = [rolloutMessage('alpha', 'a1'), rolloutMessage('alpha', 'a2'), rolloutMessage('beta', 'b1')];
    const error = await queue(sleeps)
      .send(messages)
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(QueueUnavailableError);
    expect((error as Error).message).toBe('2 of 3 rollout message(s) were not queued (InternalError ×2)');
    // a1 was sent 1 + 3 times; a2 never, as it would have overtaken a1; beta went through.
    expect(
      sent()
        .flat()
        .filter((n) => n === 'alpha/a1'),
    ).toHaveLength(4);
    expect(sent().flat()).not.toContain('alpha/a2');
    expect(sent().flat()).toContain('beta/b1');
    expect(sleeps).toEqual([100, 200, 400]);
  });

  it('does not retry an entry the service calls a sender fault', async () => {
    answer((name) => (name === 'alpha/a1' ? { Code: 'InvalidParameterValue', SenderFault: true } : undefined));
    const error = await queue()
      .send([rolloutMessage('alpha', 'a1')])
      .catch((e: unknown) => e);
    expect((error as Error).message).toBe('1 of 1 rollout message(s) were not queued (InvalidParameterValue ×1)');
    expect(calls()).toHaveLength(1);
  });

  it('does not send a message over 256 KiB, and counts it', async () => {
    answer();
    const error = await queue()
      .send([rolloutMessage('alpha', 'huge', 1, 300 * 1024), rolloutMessage('beta', 'b1')])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueUnavailableError);
    expect((error as Error).message).toBe('1 of 2 rollout message(s) were not queued (MessageTooLong ×1)');
    expect(sent()).toEqual([['beta/b1']]);
  });

  it.each([
    [
      'throttling',
      new SQSServiceException({
        name: 'ThrottlingException',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: 'Rate exceeded',
      }),
    ],
    [
      'credentials',
      new SQSServiceException({
        name: 'InvalidClientTokenId',
        $fault: 'client',
        $metadata: { httpStatusCode: 403 },
        message: 'invalid token',
      }),
    ],
    ['network', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { name: 'Error', code: 'ECONNREFUSED' })],
  ])('turns a failed call (%s) into QueueUnavailableError with the cause', async (_kind, cause) => {
    sqsMock.on(SendMessageBatchCommand).rejects(cause);
    const error = await queue()
      .send([rolloutMessage('alpha', 'a1')])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueUnavailableError);
    expect((error as Error).message).toBe(`the rollout queue did not accept a batch of 1 message(s): ${cause.name}`);
    expect((error as Error).cause).toBe(cause);
    expect((error as Error).message).not.toContain('payments');
  });
});

describe('packCalls', () => {
  it('keeps order and respects both limits', () => {
    const items = [100, 200_000, 70_000, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1].map((bytes, i) => ({ bytes, i }));
    const packed = packCalls(items);
    expect(packed.flat().map((x) => x.i)).toEqual(items.map((x) => x.i));
    expect(packed.map((c) => c.length)).toEqual([2, 10, 2]);
    for (const call of packed) expect(call.reduce((s, x) => s + x.bytes, 0)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
  });
});
