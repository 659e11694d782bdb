/** deferMessages (lib/runtime/sqs-worker.ts): how held messages go back to the queue — the Lambda and `worker` defer path. */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  SQSClient,
  SQSServiceException,
  type ChangeMessageVisibilityBatchCommandInput,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { deferMessages, handBackGroup } from '../../../lib/runtime/sqs-hand-back.ts';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout.fifo';
const sqsMock = mockClient(SQSClient);
const client = new SQSClient({ region: 'eu-west-1' });
const received = (ids: string[]) => ids.map((id) => ({ MessageId: id, ReceiptHandle: `rh-${id}` }));
const calls = (): ChangeMessageVisibilityBatchCommandInput[] =>
  sqsMock.commandCalls(ChangeMessageVisibilityBatchCommand).map((c) => c.args[0].input);
const logger = () => {
  const lines: Array<{ message: string; fields?: Record<string, unknown> }> = [];
  const errors: Array<{ message: string; fields?: Record<string, unknown> }> = [];
  const metrics: string[] = [];
  return {
    lines,
    errors,
    metrics,
    warn: (message: string, fields?: Record<string, unknown>) =>
      void lines.push({ message, ...(fields ? { fields } : {}) }),
    error: (message: string, fields?: Record<string, unknown>) =>
      void errors.push({ message, ...(fields ? { fields } : {}) }),
    metric: (name: string) => void metrics.push(name),
  };
};
const LOST =
  'the queue took back a message the worker had not handed back: it will be redelivered, and its restarts are recorded, so this worker does nothing more with it';

beforeEach(() => {
  sqsMock.reset();
  sqsMock.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [], Failed: [] });
  sqsMock.on(DeleteMessageBatchCommand).resolves({ Successful: [], Failed: [] });
});

describe('deferMessages', () => {
  it("changes a held burst in one call, last message first, so the group's head becomes visible last", async () => {
    await deferMessages(
      client,
      QUEUE_URL,
      received(['m1', 'm2', 'm3', 'gate']),
      [
        { messageId: 'm1', delayMs: 1600 },
        { messageId: 'm2', delayMs: 1600 },
        { messageId: 'm3', delayMs: 1600 },
        { messageId: 'gate', delayMs: 10_000 },
      ],
      logger(),
    );
    expect(calls()).toHaveLength(1);
    expect(calls()[0]?.Entries?.map((e) => [e.ReceiptHandle, e.VisibilityTimeout])).toEqual([
      ['rh-gate', 10],
      ['rh-m3', 2],
      ['rh-m2', 2],
      ['rh-m1', 2],
    ]);
  });

  it('rounds up to whole seconds within 1 s to 12 h, skips ids it did not receive, and sends nothing for nothing', async () => {
    await deferMessages(
      client,
      QUEUE_URL,
      received(['a', 'b', 'c']),
      [
        { messageId: 'a', delayMs: 0 },
        { messageId: 'b', delayMs: 99 * 3_600_000 },
        { messageId: 'ghost', delayMs: 1000 },
      ],
      logger(),
    );
    expect(calls()[0]?.Entries?.map((e) => [e.ReceiptHandle, e.VisibilityTimeout])).toEqual([
      ['rh-b', 43_200],
      ['rh-a', 1],
    ]);
    sqsMock.resetHistory();
    await deferMessages(client, QUEUE_URL, received(['a']), [], logger());
    expect(calls()).toEqual([]);
  });

  it('splits more than ten into calls of ten', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `m${i}`);
    await deferMessages(
      client,
      QUEUE_URL,
      received(ids),
      ids.map((messageId) => ({ messageId, delayMs: 2000 })),
      logger(),
    );
    expect(calls().map((c) => c.Entries?.length)).toEqual([10, 2]);
  });

  it('a defer SQS refuses for a message is an error with its id and a VisibilityLost count; a failed call is a warning; never throws', async () => {
    sqsMock.on(ChangeMessageVisibilityBatchCommand).resolves({
      Successful: [{ Id: 'v0' }],
      Failed: [{ Id: 'v1', Code: 'ReceiptHandleIsInvalid', SenderFault: true }],
    });
    const log = logger();
    await deferMessages(
      client,
      QUEUE_URL,
      received(['m1', 'm2']),
      [
        { messageId: 'm1', delayMs: 1000 },
        { messageId: 'm2', delayMs: 1000 },
      ],
      log,
    );
    expect(log.lines).toEqual([]);
    expect(log.errors).toEqual([
      {
        message: LOST,
        fields: { messageId: 'm1', group: undefined, operation: 'defer', error: 'ReceiptHandleIsInvalid' },
      },
    ]);
    expect(log.metrics).toEqual(['VisibilityLost']);

    sqsMock
      .on(ChangeMessageVisibilityBatchCommand)
      .rejects(new SQSServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: {} }));
    const failed = logger();
    await deferMessages(client, QUEUE_URL, received(['m1']), [{ messageId: 'm1', delayMs: 1000 }], failed);
    expect(failed.lines).toEqual([
      {
        message: 'could not defer messages; they come back after the visibility timeout',
        fields: { messages: 1, error: 'AccessDenied' },
      },
    ]);
  });
});

describe('handBackGroup', () => {
  it("defers the group's held messages and deletes its done ones, leaving its failed ones and other groups alone", async () => {
    const log = logger();
    await handBackGroup(
      client,
      QUEUE_URL,
      received(['a1', 'a2', 'a3', 'b1']),
      { messageIds: ['a1', 'a2', 'a3'], failed: ['a3'], deferred: [{ messageId: 'a2', delayMs: 3000 }] },
      log,
    );
    expect(calls().map((c) => c.Entries?.map((e) => e.ReceiptHandle))).toEqual([['rh-a2']]);
    expect(
      sqsMock.commandCalls(DeleteMessageBatchCommand).map((c) => c.args[0].input.Entries?.map((e) => e.ReceiptHandle)),
    ).toEqual([['rh-a1']]);
    expect(log.lines).toEqual([]);
  });

  it('a delete SQS refuses for a message is an error with its id and a VisibilityLost count, never ignored', async () => {
    sqsMock.on(DeleteMessageBatchCommand).resolves({
      Successful: [{ Id: 'd0' }],
      Failed: [{ Id: 'd1', Code: 'ReceiptHandleIsInvalid', SenderFault: true }],
    });
    const log = logger();
    await handBackGroup(
      client,
      QUEUE_URL,
      received(['a1', 'a2']),
      { messageIds: ['a1', 'a2'], failed: [], deferred: [] },
      log,
    );
    expect(log.errors).toEqual([
      {
        message: LOST,
        fields: { messageId: 'a2', group: undefined, operation: 'delete', error: 'ReceiptHandleIsInvalid' },
      },
    ]);
    expect(log.metrics).toEqual(['VisibilityLost']);
  });

  it('logs a delete that fails, never throws', async () => {
    sqsMock
      .on(DeleteMessageBatchCommand)
      .rejects(new SQSServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: {} }));
    const log = logger();
    await handBackGroup(client, QUEUE_URL, received(['a1']), { messageIds: ['a1'], failed: [], deferred: [] }, log);
    expect(log.lines).toEqual([
      { message: 'could not delete worked messages now', fields: { messages: 1, error: 'AccessDenied' } },
    ]);
  });
});
