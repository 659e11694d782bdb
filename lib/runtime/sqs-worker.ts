/**
 * The worker outside Lambda: polls the SQS FIFO queue the way Lambda's event source mapping does — receive a
 * batch, process it, delete what succeeded (each cluster's messages as soon as that cluster is worked), leave the
 * failures to come back after the visibility timeout (and to the dead-letter queue after maxReceiveCount). Several
 * pollers run at once, like concurrent invocations: a cluster that hangs holds only its own messages.
 */
import { ChangeMessageVisibilityBatchCommand, DeleteMessageBatchCommand, ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { processBatch, type GroupOutcome, type QueueRecord, type WorkerDeps } from '../pipeline/worker.ts';

/**
 * A refused message's way to the dead-letter queue (the rollout queue's DLQ, FIFO): the same body and group, the
 * reason as a message attribute; then the worker deletes it from the rollout queue. Needs only sqs:SendMessage on
 * the DLQ. A failed send throws, and the worker leaves the message to be redelivered (and to the redrive policy).
 */
export function sqsDeadLetter(client: SQSClient, deadLetterQueueUrl: string | undefined): (record: QueueRecord, reason: string) => Promise<void> {
  return async (record, reason) => {
    // No DLQ named: the message is redelivered until the queue's redrive policy moves it to the DLQ (never acknowledged).
    if (!deadLetterQueueUrl) throw new Error('no dead-letter queue URL (VAULT_ROLLOUT_DLQ_URL): left to the redrive policy');
    await client.send(
      new SendMessageCommand({
        QueueUrl: deadLetterQueueUrl,
        MessageBody: record.body,
        MessageGroupId: record.groupId.slice(0, 128) || 'refused',
        MessageDeduplicationId: `refused-${record.messageId}`.slice(0, 128),
        MessageAttributes: { reason: { DataType: 'String', StringValue: reason.slice(0, 1000) } },
      }),
    );
  };
}

export interface SqsWorkerOptions {
  queueUrl: string;
  /** Messages per receive (1-10); more than 1 lets settle coalesce a cluster's burst (lib/deploy/worker-batch-size.ts). */
  batchSize?: number;
  /** Concurrent pollers. */
  concurrency?: number;
  waitTimeSeconds?: number;
}

export interface SqsWorker {
  stop(): Promise<void>;
}

export function startSqsWorker(client: SQSClient, deps: WorkerDeps, options: SqsWorkerOptions): SqsWorker {
  let running = true;
  const abort = new AbortController();
  const poll = async () => {
    while (running) {
      let received;
      try {
        received = await client.send(
          new ReceiveMessageCommand({ QueueUrl: options.queueUrl, MaxNumberOfMessages: options.batchSize ?? 1, WaitTimeSeconds: options.waitTimeSeconds ?? 1, MessageSystemAttributeNames: ['MessageGroupId', 'ApproximateReceiveCount'] }),
          { abortSignal: abort.signal },
        );
      } catch (e) {
        if (!running) return;
        deps.telemetry.warn('receive failed; retrying', { error: e instanceof Error ? e.name : String(e) });
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      const messages = received.Messages ?? [];
      if (messages.length === 0) continue;
      const records = messages.map((m) => ({ messageId: m.MessageId ?? '', body: m.Body ?? '', groupId: m.Attributes?.MessageGroupId ?? m.MessageId ?? '', receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1) }));
      // Each cluster (message group) of the batch is handed back as soon as it is worked — deleted, or held — so with
      // batches of several clusters (--batch-size above 1, auto with settle) a hanging cluster delays only its own.
      const handBack = (group: GroupOutcome) => handBackGroup(client, options.queueUrl, messages, group, deps.telemetry);
      await processBatch(records, { ...deps, onGroupDone: handBack });
    }
  };
  const pollers = Array.from({ length: options.concurrency ?? 4 }, () => poll());
  return {
    stop: async () => {
      running = false;
      abort.abort();
      await Promise.allSettled(pollers);
    },
  };
}

/**
 * Hands one worked group's messages back to the queue: its held ones deferred (deferMessages), its done ones —
 * worked or refused, neither failed nor held — deleted. A delete that fails is logged: in Lambda the event source
 * mapping deletes them after the response; elsewhere they come back after the visibility timeout and find their
 * workloads unchanged.
 */
export async function handBackGroup(client: SQSClient, queueUrl: string, messages: ReadonlyArray<{ MessageId?: string | undefined; ReceiptHandle?: string | undefined }>, group: GroupOutcome, logger: { warn(message: string, fields?: Record<string, unknown>): void }): Promise<void> {
  await deferMessages(client, queueUrl, messages, group.deferred, logger);
  const done = messages.filter((m) => m.MessageId !== undefined && group.messageIds.includes(m.MessageId) && !group.failed.includes(m.MessageId) && !group.deferred.some((d) => d.messageId === m.MessageId));
  if (done.length === 0) return;
  try {
    await client.send(new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: done.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })) }));
  } catch (e) {
    logger.warn('could not delete worked messages now', { messages: done.length, error: e instanceof Error ? e.name : String(e) });
  }
}

/** SQS's visibility timeout is at most 12 hours. */
const MAX_VISIBILITY_SECONDS = 43_200;
/** Entries per ChangeMessageVisibilityBatch call (an SQS limit; a FIFO batch holds at most 10 anyway). */
const MAX_VISIBILITY_ENTRIES = 10;

/**
 * Hands deferred messages back to the queue for later (gates, settle): invisible for their delay, then redelivered.
 * A message whose visibility cannot be changed comes back after the queue's visibility timeout instead.
 *
 * One ChangeMessageVisibilityBatch call per ten, each group's messages LAST FIRST. A settle hold defers a cluster's
 * whole burst for the same window, and the burst must come back as one batch. SQS keeps a FIFO group locked while any
 * message received from it is in flight, so there it does; ElasticMQ hands out the visible prefix of a group, and when
 * the messages were changed one by one in receive order the head came back a few milliseconds before the rest: a
 * receive took 3 of the 5 and the burst restarted twice. Changed last first, the head is visible last on both.
 * The batch action needs only sqs:ChangeMessageVisibility.
 */
export async function deferMessages(client: SQSClient, queueUrl: string, messages: ReadonlyArray<{ MessageId?: string | undefined; ReceiptHandle?: string | undefined }>, deferred: ReadonlyArray<{ messageId: string; delayMs: number }>, logger: { warn(message: string, fields?: Record<string, unknown>): void }): Promise<void> {
  const position = (id: string) => messages.findIndex((m) => m.MessageId === id);
  const entries = deferred
    .map((d) => ({ ...d, handle: messages[position(d.messageId)]?.ReceiptHandle }))
    .filter((d): d is typeof d & { handle: string } => d.handle !== undefined && d.handle !== '')
    .sort((a, b) => position(b.messageId) - position(a.messageId));
  for (let start = 0; start < entries.length; start += MAX_VISIBILITY_ENTRIES) {
    const call = entries.slice(start, start + MAX_VISIBILITY_ENTRIES);
    try {
      const out = await client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: call.map((d, i) => ({ Id: `v${i}`, ReceiptHandle: d.handle, VisibilityTimeout: Math.min(MAX_VISIBILITY_SECONDS, Math.max(1, Math.ceil(d.delayMs / 1000))) })),
        }),
      );
      for (const failed of out.Failed ?? []) {
        logger.warn('could not defer a message; it comes back after the visibility timeout', { messageId: call[Number(failed.Id?.slice(1))]?.messageId, error: failed.Code ?? 'Failed' });
      }
    } catch (e) {
      logger.warn('could not defer messages; they come back after the visibility timeout', { messages: call.length, error: e instanceof Error ? e.name : String(e) });
    }
  }
}
