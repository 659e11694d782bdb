/**
 * The worker outside Lambda: polls the SQS FIFO queue the way Lambda's event source mapping does — receive a
 * batch, process it, delete what succeeded (each cluster's messages as soon as that cluster is worked), leave the
 * failures to come back after the visibility timeout (and to the dead-letter queue after maxReceiveCount). Several
 * pollers run at once, like concurrent invocations: a cluster that hangs holds only its own messages.
 *
 * A received message is the poller's until it hands it back: every receive asks for an explicit visibility timeout,
 * and a heartbeat (ChangeMessageVisibility, every third of it) extends it for the messages still being worked, so a
 * rollout followed for longer than the timeout is never received by another poller and worked twice, nor
 * dead-lettered. A heartbeat, delete or defer that SQS refuses for a message (its receipt handle is no longer valid:
 * the queue took it back) is an error logged with the message id and counted (VisibilityLost); the poller does
 * nothing more with that message — whoever receives it next runs it, and the restart record makes that run find its
 * workloads `unchanged`.
 */
import {
  ChangeMessageVisibilityCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { RolloutWaker } from '../pipeline/rollout-waker.ts';
import { processBatch, type GroupOutcome, type QueueRecord, type WorkerDeps } from '../pipeline/worker.ts';
import { handBackGroup, MAX_VISIBILITY_SECONDS, startVisibilityHeartbeat } from './sqs-hand-back.ts';

/**
 * A refused message's way to the dead-letter queue (the rollout queue's DLQ, FIFO): the same body and group, the
 * reason as a message attribute; then the worker deletes it from the rollout queue. Needs only sqs:SendMessage on
 * the DLQ. A failed send throws, and the worker leaves the message to be redelivered (and to the redrive policy).
 */
export function sqsDeadLetter(
  client: SQSClient,
  deadLetterQueueUrl: string | undefined,
): (record: QueueRecord, reason: string) => Promise<void> {
  return async (record, reason) => {
    // No DLQ named: the message is redelivered until the queue's redrive policy moves it to the DLQ (never
    // acknowledged).
    if (!deadLetterQueueUrl)
      throw new Error('no dead-letter queue URL (VAULT_ROLLOUT_DLQ_URL): left to the redrive policy');
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

/** The default visibility timeout each receive asks for; the heartbeat extends it every third. */
export const DEFAULT_WORKER_VISIBILITY_SECONDS = 30;

export interface SqsWorkerOptions {
  queueUrl: string;
  /**
   * Messages per receive (1-10); more than 1 lets settle coalesce a cluster's burst (lib/deploy/worker-batch-size.ts).
   */
  batchSize?: number;
  /** Concurrent pollers. */
  concurrency?: number;
  waitTimeSeconds?: number;
  /**
   * The visibility timeout each receive asks for (default 30 s); the heartbeat extends it every third while working.
   */
  visibilityTimeoutSeconds?: number;
  /**
   * Wakes held messages (visibility 0) when a watch sees the rollouts they wait on end; without it they come back at
   * their delay.
   */
  waker?: RolloutWaker;
}

export interface SqsWorker {
  stop(): Promise<void>;
}

export function startSqsWorker(client: SQSClient, deps: WorkerDeps, options: SqsWorkerOptions): SqsWorker {
  const abort = new AbortController();
  const latestHandle = new LatestHandles();
  const visibilitySeconds = Math.min(
    MAX_VISIBILITY_SECONDS,
    Math.max(3, Math.ceil(options.visibilityTimeoutSeconds ?? DEFAULT_WORKER_VISIBILITY_SECONDS)),
  );
  const context: PollerContext = { client, deps, options, visibilitySeconds, latestHandle, signal: abort.signal };
  const pollers = Array.from({ length: options.concurrency ?? 4 }, () => poll(context));
  return {
    stop: async () => {
      // Its watches would keep the process alive; what they waited on comes back at its delay.
      options.waker?.close();
      latestHandle.stop();
      abort.abort();
      await Promise.allSettled(pollers);
    },
  };
}

/** What each poller shares: the client, the worker's dependencies and options, and its stop signal. */
interface PollerContext {
  readonly client: SQSClient;
  readonly deps: WorkerDeps;
  readonly options: SqsWorkerOptions;
  readonly visibilitySeconds: number;
  readonly latestHandle: LatestHandles;
  /** Aborted when the worker stops: the receive under way ends, and no poller receives again. */
  readonly signal: AbortSignal;
}

/** The receipt handle of each message's latest receive by this process (bounded: the oldest go first). */
class LatestHandles {
  readonly #handles = new Map<string, string>();
  readonly #trim: NodeJS.Timeout;

  constructor() {
    this.#trim = setInterval(() => {
      for (const key of [...this.#handles.keys()].slice(0, Math.max(0, this.#handles.size - 10_000)))
        this.#handles.delete(key);
    }, 60_000);
    this.#trim.unref();
  }

  get(messageId: string): string | undefined {
    return this.#handles.get(messageId);
  }

  set(messageId: string, handle: string): void {
    this.#handles.set(messageId, handle);
  }

  delete(messageId: string): void {
    this.#handles.delete(messageId);
  }

  stop(): void {
    clearInterval(this.#trim);
  }
}

/** One poller: receive, work, hand back, until the worker stops. */
async function poll(context: PollerContext): Promise<void> {
  const { client, deps, options, visibilitySeconds, signal } = context;
  while (!signal.aborted) {
    let received;
    try {
      received = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: options.queueUrl,
          MaxNumberOfMessages: options.batchSize ?? 1,
          WaitTimeSeconds: options.waitTimeSeconds ?? 1,
          VisibilityTimeout: visibilitySeconds,
          MessageSystemAttributeNames: ['MessageGroupId', 'ApproximateReceiveCount'],
        }),
        { abortSignal: signal },
      );
    } catch (e) {
      if (signal.aborted) return;
      deps.telemetry.warn('receive failed; retrying', { error: e instanceof Error ? e.name : String(e) });
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    const messages = received.Messages ?? [];
    if (messages.length > 0) await workReceived(context, messages);
  }
}

/**
 * Works one received batch. Each cluster (message group) of the batch is handed back as soon as it is worked —
 * deleted, or held — so with batches of several clusters (--batch-size above 1, auto with settle) a hanging cluster
 * delays only its own.
 */
async function workReceived(context: PollerContext, messages: readonly Message[]): Promise<void> {
  const { client, deps, options, visibilitySeconds, latestHandle } = context;
  const records = messages.map((m) => ({
    messageId: m.MessageId ?? '',
    body: m.Body ?? '',
    groupId: m.Attributes?.MessageGroupId ?? m.MessageId ?? '',
    receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1),
  }));
  const heartbeat = startVisibilityHeartbeat(client, options.queueUrl, messages, visibilitySeconds, deps.telemetry);
  for (const m of messages)
    if (m.MessageId !== undefined && m.ReceiptHandle) latestHandle.set(m.MessageId, m.ReceiptHandle);
  const handBack = async (group: GroupOutcome) => {
    // Out of the heartbeat first (and after any extension under way), so none lands after a defer or delete.
    const mine = await heartbeat.handOver(group.messageIds);
    await handBackGroup(client, options.queueUrl, mine, group, deps.telemetry);
    for (const d of group.deferred) {
      const handle = mine.find((m) => m.MessageId === d.messageId)?.ReceiptHandle;
      if (options.waker && d.watch && handle)
        options.waker.watch(d.watch, () => wakeEarly(context, d.messageId, handle));
    }
  };
  try {
    await processBatch(records, { ...deps, onGroupDone: handBack });
  } catch (e) {
    deps.telemetry.error('the worker failed on a batch; its messages come back after the visibility timeout', {
      messages: messages.length,
      error: e instanceof Error ? e.message : String(e),
    });
  } finally {
    await heartbeat.stop();
  }
}

/**
 * Woken early: visible now. Only while this poller's receive is the latest it knows of (another receive since means
 * the hold already ended); a wake that lands late costs one look, never a restart.
 */
function wakeEarly(context: PollerContext, messageId: string, handle: string): void {
  if (context.latestHandle.get(messageId) !== handle) return;
  context.latestHandle.delete(messageId);
  void context.client
    .send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: context.options.queueUrl,
        ReceiptHandle: handle,
        VisibilityTimeout: 0,
      }),
    )
    .catch(() => undefined);
}
