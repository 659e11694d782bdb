/**
 * Lambda: the SQS FIFO consumer that restarts workloads, reporting partial batch failures. No invocation waits on
 * a rollout: a cluster message patches, looks once, and hands what is still rolling to a continuation
 * message; each later look is a short invocation of its own, held in the queue in between.
 *
 * A batch holds one message per invocation unless a route sets `rollout.settle` (then up to 10, so a cluster's held
 * burst comes back as one batch: lib/deploy/worker-batch-size.ts). Then a batch can hold several clusters: each
 * cluster's messages are handed back the moment that cluster is worked — the worked ones deleted, the held ones made
 * invisible for their hold — so a cluster that hangs delays no other cluster's next message, only its own.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { followFromEnv, processBatch, type GroupOutcome } from '../lib/pipeline/worker.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';
import { lambdaWorkerDeps } from '../lib/runtime/lambda-worker.ts';
import { deferMessages, handBackGroup } from '../lib/runtime/sqs-hand-back.ts';
import { sqsDeadLetter } from '../lib/runtime/sqs-worker.ts';

const runtime = lambdaRuntime(process.env);
const deps = lambdaWorkerDeps(runtime);
const follows = followFromEnv(process.env);

export async function handler(
  event: SQSEvent,
  _context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<SQSBatchResponse> {
  const records = event.Records.map((r) => ({
    messageId: r.messageId,
    body: r.body,
    groupId: r.attributes.MessageGroupId ?? r.messageId,
    receiveCount: Number(r.attributes.ApproximateReceiveCount) || 1,
  }));
  const queue = runtime.intakeDeps().queue;
  const received = event.Records.map((r) => ({ MessageId: r.messageId, ReceiptHandle: r.receiptHandle }));
  const follow = follows ? { requeue: (m: Parameters<typeof queue.send>[0][number]) => queue.send([m]) } : undefined;
  // Several clusters in one batch: hand each one's messages back as soon as it is worked (see above). After the
  // response the event source mapping deletes the worked messages again and finds them gone (ElasticMQ answers that
  // entry ReceiptHandleIsInvalid): nothing comes back either way. A delete that fails here is left to the mapping
  // (the message is not reported failed).
  const several = new Set(records.map((r) => r.groupId)).size > 1;
  const onGroupDone = (group: GroupOutcome) =>
    handBackGroup(queue.client, queue.queueUrl, received, group, runtime.telemetry);
  // A refused message goes to the DLQ with its reason (serverless.yml sets VAULT_ROLLOUT_DLQ_URL), then is deleted.
  const deadLetter = sqsDeadLetter(queue.client, process.env.VAULT_ROLLOUT_DLQ_URL);
  const { failed, deferred } = await processBatch(records, {
    ...deps,
    deadLetter,
    queue,
    ...(follow ? { follow } : {}),
    ...(several ? { onGroupDone } : {}),
  });
  // A deferred message (every wait: a continuation, a gate, a settle window) waits in the queue: invisible for its
  // delay, reported failed so
  // the event source mapping does not delete it.
  if (!several) await deferMessages(queue.client, queue.queueUrl, received, deferred, runtime.telemetry);
  return {
    batchItemFailures: [...failed, ...deferred.map((d) => d.messageId)].map((itemIdentifier) => ({ itemIdentifier })),
  };
}
