/**
 * Lambda: the SQS FIFO consumer that restarts workloads, reporting partial batch failures. It follows each
 * restart's rollout within the invocation's remaining time (less a margin) and hands what is still progressing
 * back to the queue, so no invocation waits out a rollout.
 *
 * A batch holds one message per invocation unless a route sets `rollout.settle` (then up to 10, so a cluster's held
 * burst comes back as one batch: lib/deploy/worker-batch-size.ts). Then a batch can hold several clusters: each
 * cluster's messages are handed back the moment that cluster is worked — the worked ones deleted, the held ones made
 * invisible for their hold — so a cluster that hangs delays no other cluster's next message, only its own.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { followBudgetFromEnv, processBatch, type GroupOutcome } from '../lib/pipeline/worker.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';
import { lambdaWorkerDeps } from '../lib/runtime/lambda-worker.ts';
import { deferMessages, handBackGroup, sqsDeadLetter } from '../lib/runtime/sqs-worker.ts';

const runtime = lambdaRuntime(process.env);
const deps = lambdaWorkerDeps(runtime);
const followBudgetMs = followBudgetFromEnv(process.env);
/** Left for the patches of the batch, the follow-up send and the response after following. */
const MARGIN_MS = 20_000;

export async function handler(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
  const records = event.Records.map((r) => ({ messageId: r.messageId, body: r.body, groupId: r.attributes.MessageGroupId ?? r.messageId, receiveCount: Number(r.attributes.ApproximateReceiveCount) || 1 }));
  const queue = runtime.intakeDeps().queue;
  const received = event.Records.map((r) => ({ MessageId: r.messageId, ReceiptHandle: r.receiptHandle }));
  // Without an invocation context (a test calling the handler) there is no remaining time to follow in.
  const follow = followBudgetMs > 0 && context ? { budgetMs: () => Math.min(followBudgetMs, context.getRemainingTimeInMillis() - MARGIN_MS), requeue: (m: Parameters<typeof queue.send>[0][number]) => queue.send([m]) } : undefined;
  // Several clusters in one batch: hand each one's messages back as soon as it is worked (see above). After the
  // response the event source mapping deletes the worked messages again and finds them gone (ElasticMQ answers that
  // entry ReceiptHandleIsInvalid): nothing comes back either way. A delete that fails here is left to the mapping
  // (the message is not reported failed).
  const several = new Set(records.map((r) => r.groupId)).size > 1;
  const onGroupDone = (group: GroupOutcome) => handBackGroup(queue.client, queue.queueUrl, received, group, runtime.telemetry);
  // A refused message goes to the DLQ with its reason (serverless.yml sets VAULT_ROLLOUT_DLQ_URL), then is deleted.
  const deadLetter = sqsDeadLetter(queue.client, process.env.VAULT_ROLLOUT_DLQ_URL);
  const { failed, deferred } = await processBatch(records, { ...deps, deadLetter, queue, ...(follow ? { follow } : {}), ...(several ? { onGroupDone } : {}) });
  // A deferred message (a gate, a settle window) waits in the queue: invisible for its delay, reported failed so
  // the event source mapping does not delete it.
  if (!several) await deferMessages(queue.client, queue.queueUrl, received, deferred, runtime.telemetry);
  return { batchItemFailures: [...failed, ...deferred.map((d) => d.messageId)].map((itemIdentifier) => ({ itemIdentifier })) };
}
