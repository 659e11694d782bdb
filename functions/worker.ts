/** Lambda: the SQS FIFO consumer that restarts workloads, reporting partial batch failures. */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { processBatch } from '../lib/pipeline/worker.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';
import { lambdaWorkerDeps } from '../lib/runtime/lambda-worker.ts';

const deps = lambdaWorkerDeps(lambdaRuntime(process.env));

export async function handler(event: SQSEvent): Promise<SQSBatchResponse> {
  const records = event.Records.map((r) => ({ messageId: r.messageId, body: r.body, groupId: r.attributes.MessageGroupId ?? r.messageId }));
  const { failed } = await processBatch(records, deps);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}
