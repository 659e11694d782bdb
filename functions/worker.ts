/**
 * Lambda: the SQS FIFO consumer that restarts workloads, reporting partial batch failures. It follows each
 * restart's rollout within the invocation's remaining time (less a margin) and hands what is still progressing
 * back to the queue, so no invocation waits out a rollout.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { followBudgetFromEnv, processBatch } from '../lib/pipeline/worker.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';
import { lambdaWorkerDeps } from '../lib/runtime/lambda-worker.ts';
import { deferMessages } from '../lib/runtime/sqs-worker.ts';

const runtime = lambdaRuntime(process.env);
const deps = lambdaWorkerDeps(runtime);
const followBudgetMs = followBudgetFromEnv(process.env);
/** Left for the patches of the batch, the follow-up send and the response after following. */
const MARGIN_MS = 20_000;

export async function handler(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
  const records = event.Records.map((r) => ({ messageId: r.messageId, body: r.body, groupId: r.attributes.MessageGroupId ?? r.messageId, receiveCount: Number(r.attributes.ApproximateReceiveCount) || 1 }));
  const queue = runtime.intakeDeps().queue;
  // Without an invocation context (a test calling the handler) there is no remaining time to follow in.
  const follow = followBudgetMs > 0 && context ? { budgetMs: () => Math.min(followBudgetMs, context.getRemainingTimeInMillis() - MARGIN_MS), requeue: (m: Parameters<typeof queue.send>[0][number]) => queue.send([m]) } : undefined;
  const { failed, deferred } = await processBatch(records, { ...deps, queue, ...(follow ? { follow } : {}) });
  // A deferred message (a gate, a settle window) waits in the queue: invisible for its delay, reported failed so
  // the event source mapping does not delete it.
  await deferMessages(queue.client, queue.queueUrl, event.Records.map((r) => ({ MessageId: r.messageId, ReceiptHandle: r.receiptHandle })), deferred, runtime.telemetry);
  return { batchItemFailures: [...failed, ...deferred.map((d) => d.messageId)].map((itemIdentifier) => ({ itemIdentifier })) };
}
