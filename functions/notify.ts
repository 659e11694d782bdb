/**
 * Lambda: the notifications' sender, out of line. The worker writes each rotation event to the outbox in
 * the rotation-state table (one conditional put per event id, a delivery item per sink); the table's stream invokes
 * this function with the deliveries just written (serverless.yml filters the stream to INSERTs of `notify#` /
 * `sink#` keys; the stream carries keys only). Each delivery is leased by a conditional update, sent (one POST or SNS
 * Publish of at most 5 s) and marked; a failure is handed back to the event source mapping, which invokes again
 * (bounded retries, the batch bisected on a function error), and the next invocation waits out the backoff recorded
 * in the item before its next attempt; after the last attempt it is dropped, counted and logged. Sink secrets come
 * from SSM Parameter Store (VAULT_ROLLOUT_NOTIFY_SSM_PREFIX/<VARIABLE>), read once per container.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SSMClient } from '@aws-sdk/client-ssm';
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { ssmParameterValue } from '../lib/aws/parameter-store.ts';
import { deliverNamed } from '../lib/notify/delivery.ts';
import { resolveSinks, SINK_TIMEOUT_MS, sinkEnvironment, type Sink } from '../lib/notify/sinks.ts';
import { DynamoDbRotationStore } from '../lib/rotations/dynamodb-rotation-store.ts';
import { required } from '../lib/runtime/config.ts';
import { lambdaRuntime } from '../lib/runtime/lambda.ts';

const runtime = lambdaRuntime(process.env);
const region = process.env.AWS_REGION;
const outbox = new DynamoDbRotationStore({
  client: new DynamoDBClient({ region }),
  table: required(process.env, 'VAULT_ROLLOUT_STATE_TABLE', 'the DynamoDB rotation state table'),
});
let sinks: Promise<Map<string, Sink>> | undefined;

async function loadSinks(): Promise<Map<string, Sink>> {
  const { table, telemetry, env } = runtime;
  const prefix = env.VAULT_ROLLOUT_NOTIFY_SSM_PREFIX;
  const ssm = prefix ? new SSMClient({ region }) : undefined;
  const read = async (name: string): Promise<string | undefined> => {
    try {
      return ssm ? await ssmParameterValue(ssm, name) : undefined;
    } catch (e) {
      // A parameter not created: that sink is not usable (logged below). Anything else: the invocation fails and is
      // retried.
      if (e instanceof Error && e.name === 'ParameterNotFound') return undefined;
      throw e;
    }
  };
  const resolved = resolveSinks(table.allSinks, {
    env: prefix ? await sinkEnvironment(table.allSinks, env, prefix, read) : env,
  });
  for (const [name, problem] of resolved.problems)
    telemetry.error('notification sink not usable: its notifications are dropped', { sink: name, problem });
  return resolved.sinks;
}

/** A stream record's delivery: `notify#<event id>` / `sink#<name>`; anything else is no delivery. */
function named(record: DynamoDBStreamEvent['Records'][number]): { eventId: string; sink: string } | undefined {
  const pk = record.dynamodb?.Keys?.pk?.S;
  const sk = record.dynamodb?.Keys?.sk?.S;
  if (record.eventName !== 'INSERT' || !pk?.startsWith('notify#') || !sk?.startsWith('sink#')) return undefined;
  return { eventId: pk.slice('notify#'.length), sink: sk.slice('sink#'.length) };
}

export async function handler(
  event: DynamoDBStreamEvent,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<DynamoDBBatchResponse> {
  const records = event.Records.flatMap((record) => {
    const delivery = named(record);
    return delivery ? [{ ...delivery, sequence: record.dynamodb?.SequenceNumber ?? '' }] : [];
  });
  if (records.length === 0) return { batchItemFailures: [] };
  let resolved: Map<string, Sink>;
  try {
    resolved = await (sinks ??= loadSinks());
  } catch (e) {
    sinks = undefined;
    throw e;
  }
  // What an invocation may spend waiting out a backoff: its time left, less a send and a margin.
  const budget = Math.max(0, (context?.getRemainingTimeInMillis() ?? 60_000) - SINK_TIMEOUT_MS - 5000);
  const { again } = await deliverNamed({ outbox, sinks: resolved, telemetry: runtime.telemetry }, records, budget);
  runtime.telemetry.flush();
  return { batchItemFailures: again.map((i) => ({ itemIdentifier: records[i]?.sequence ?? '' })) };
}
