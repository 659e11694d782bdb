/**
 * Handing received SQS messages back: the heartbeat that keeps a batch invisible while it is worked, then per worked
 * group a delete of what is done and a deferral of what is held (last first, so a held burst comes back as one). A
 * message SQS refuses (its receipt handle no longer valid: the queue took it back) is lost: an error, counted.
 * Shared by the worker outside Lambda (sqs-worker.ts) and the worker function.
 */
import { ChangeMessageVisibilityBatchCommand, DeleteMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import type { GroupOutcome } from '../pipeline/worker.ts';

/** What the hand-back needs of the telemetry: warnings for calls that failed, errors and a count for lost messages. */
export type HandBackLog = Pick<Telemetry, 'warn' | 'error' | 'metric'>;

export type Received = {
  MessageId?: string | undefined;
  ReceiptHandle?: string | undefined;
  Attributes?: Partial<Record<string, string>> | undefined;
};

/** A message SQS took back before it was handed back: an error with its id, counted, and nothing more done with it. */
export function visibilityLost(
  logger: HandBackLog,
  message: Received | undefined,
  operation: 'extendVisibility' | 'delete' | 'defer',
  error: string,
): void {
  logger.error(
    'the queue took back a message the worker had not handed back: it will be redelivered, and its restarts are recorded, so this worker does nothing more with it',
    { messageId: message?.MessageId, group: message?.Attributes?.MessageGroupId, operation, error },
  );
  logger.metric(METRICS.visibilityLost, 1, 'Count');
}

/**
 * Extends the visibility of a batch's messages every third of `visibilitySeconds` until each is handed over (or the
 * batch ends). One ChangeMessageVisibilityBatch call per ten; an entry SQS refuses is a lost message (visibilityLost)
 * and is dropped from the heartbeat; a call that fails as a whole is a warning, tried again at the next beat.
 */
export function startVisibilityHeartbeat(
  client: SQSClient,
  queueUrl: string,
  messages: readonly Received[],
  visibilitySeconds: number,
  logger: HandBackLog,
): { handOver(messageIds: readonly string[]): Promise<Received[]>; stop(): Promise<void> } {
  const held = new Map(
    messages.filter((m) => m.MessageId !== undefined && m.ReceiptHandle).map((m) => [m.MessageId as string, m]),
  );
  let beat: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const extendAll = (): Promise<void> => extendVisibility(client, queueUrl, held, visibilitySeconds, logger);
  const schedule = (): void => {
    timer = setTimeout(
      () => {
        beat = extendAll().finally(() => {
          if (held.size > 0) schedule();
        });
      },
      (visibilitySeconds * 1000) / 3,
    );
  };
  schedule();
  return {
    handOver: async (messageIds) => {
      const mine = messageIds.flatMap((id) => held.get(id) ?? []);
      for (const m of mine) held.delete(m.MessageId as string);
      await beat;
      return mine;
    },
    stop: async () => {
      held.clear();
      clearTimeout(timer);
      await beat;
      clearTimeout(timer);
    },
  };
}

/** One heartbeat: the held messages' visibility extended, ten per call; a message SQS refuses is lost and dropped. */
async function extendVisibility(
  client: SQSClient,
  queueUrl: string,
  held: Map<string, Received>,
  visibilitySeconds: number,
  logger: HandBackLog,
): Promise<void> {
  const entries = [...held.values()];
  for (let start = 0; start < entries.length; start += MAX_VISIBILITY_ENTRIES) {
    const call = entries.slice(start, start + MAX_VISIBILITY_ENTRIES);
    try {
      const out = await client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: call.map((m, i) => ({
            Id: `h${i}`,
            ReceiptHandle: m.ReceiptHandle ?? '',
            VisibilityTimeout: visibilitySeconds,
          })),
        }),
      );
      for (const failed of out.Failed ?? []) {
        const message = call[Number(failed.Id?.slice(1))];
        if (message?.MessageId !== undefined && held.delete(message.MessageId))
          visibilityLost(logger, message, 'extendVisibility', failed.Code ?? 'Failed');
      }
    } catch (e) {
      logger.warn('could not extend the visibility of messages being worked; trying again at the next heartbeat', {
        messages: call.length,
        error: e instanceof Error ? e.name : String(e),
      });
    }
  }
}

/**
 * Hands one worked group's messages back to the queue: its held ones deferred (deferMessages), its done ones —
 * worked or refused, neither failed nor held — deleted. A delete SQS refuses for a message (its handle no longer
 * valid: the queue took it back) is a lost message (visibilityLost); a call that fails as a whole is a warning: in
 * Lambda the event source mapping deletes them after the response; elsewhere they come back after the visibility
 * timeout and find their workloads unchanged.
 */
export async function handBackGroup(
  client: SQSClient,
  queueUrl: string,
  messages: readonly Received[],
  group: GroupOutcome,
  logger: HandBackLog,
): Promise<void> {
  await deferMessages(client, queueUrl, messages, group.deferred, logger);
  const done = messages.filter(
    (m) =>
      m.MessageId !== undefined &&
      group.messageIds.includes(m.MessageId) &&
      !group.failed.includes(m.MessageId) &&
      !group.deferred.some((d) => d.messageId === m.MessageId),
  );
  if (done.length === 0) return;
  try {
    const out = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: done.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle ?? '' })),
      }),
    );
    for (const failed of out.Failed ?? [])
      visibilityLost(logger, done[Number(failed.Id?.slice(1))], 'delete', failed.Code ?? 'Failed');
  } catch (e) {
    logger.warn('could not delete worked messages now', {
      messages: done.length,
      error: e instanceof Error ? e.name : String(e),
    });
  }
}

/** SQS's visibility timeout is at most 12 hours. */
export const MAX_VISIBILITY_SECONDS = 43_200;
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
export async function deferMessages(
  client: SQSClient,
  queueUrl: string,
  messages: readonly Received[],
  deferred: ReadonlyArray<{ messageId: string; delayMs: number }>,
  logger: HandBackLog,
): Promise<void> {
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
          Entries: call.map((d, i) => ({
            Id: `v${i}`,
            ReceiptHandle: d.handle,
            VisibilityTimeout: Math.min(MAX_VISIBILITY_SECONDS, Math.max(1, Math.ceil(d.delayMs / 1000))),
          })),
        }),
      );
      for (const failed of out.Failed ?? []) {
        const messageId = call[Number(failed.Id?.slice(1))]?.messageId;
        visibilityLost(
          logger,
          messages.find((m) => m.MessageId === messageId) ?? { MessageId: messageId },
          'defer',
          failed.Code ?? 'Failed',
        );
      }
    } catch (e) {
      logger.warn('could not defer messages; they come back after the visibility timeout', {
        messages: call.length,
        error: e instanceof Error ? e.name : String(e),
      });
    }
  }
}
