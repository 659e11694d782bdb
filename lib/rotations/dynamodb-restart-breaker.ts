/**
 * `rollout.breaker`'s counted restarts in the rotation store's DynamoDB table (dynamodb-rotation-store.ts): item
 * `breaker#<workload key>` / `restarts` with the history as JSON and a revision. Read consistently, decided, and
 * written by a Put conditional on the revision read, so two workers never both take the last restart the breaker
 * allows; the one that loses reads again. Only GetItem and PutItem: what the worker's role already has. `ttl` lets
 * DynamoDB drop a workload's history once its longest window has passed.
 */
import { GetItemCommand, PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { MAX_BREAKER_WINDOW_MS } from '../routing/breaker-schema.ts';
import { decideBreaker, parseBreakerHistory, type BreakerLimit, type BreakerVerdict } from '../plan/restart-breaker.ts';
import { key } from './dynamodb-items.ts';
import { identityKey } from './rotation-store.ts';

/** Conditional writes lost to other workers before giving up (the message is then redelivered). */
const MAX_TRIES = 16;

const itemKey = (workload: string) => key(`breaker#${identityKey(workload)}`, 'restarts');

export async function admitRestartDynamoDb(
  db: { client: DynamoDBClient; table: string },
  workload: string,
  token: string,
  now: number,
  limit: BreakerLimit,
): Promise<BreakerVerdict> {
  for (let attempt = 1; ; attempt++) {
    const read = await db.client.send(
      new GetItemCommand({ TableName: db.table, Key: itemKey(workload), ConsistentRead: true }),
    );
    const revision = read.Item?.rev?.N;
    const { verdict, history } = decideBreaker(parseBreakerHistory(read.Item?.history?.S), token, now, limit);
    try {
      await db.client.send(
        new PutItemCommand({
          TableName: db.table,
          Item: {
            ...itemKey(workload),
            workload: { S: workload.slice(0, 1024) },
            history: { S: JSON.stringify(history) },
            rev: { N: String(Number(revision ?? 0) + 1) },
            ttl: { N: String(Math.ceil((now + MAX_BREAKER_WINDOW_MS) / 1000)) },
          },
          ...(revision === undefined
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : { ConditionExpression: 'rev = :rev', ExpressionAttributeValues: { ':rev': { N: revision } } }),
        }),
      );
      return verdict;
    } catch (e) {
      const lost = e instanceof Error && e.name === 'ConditionalCheckFailedException';
      if (!lost || attempt >= MAX_TRIES) throw e;
    }
  }
}

/**
 * An empty history, not a delete: the worker's role deletes no rotation item, and `halts clear` runs as an operator.
 */
export async function resetRestartsDynamoDb(db: { client: DynamoDBClient; table: string }, workload: string) {
  const read = await db.client.send(
    new GetItemCommand({ TableName: db.table, Key: itemKey(workload), ConsistentRead: true }),
  );
  if (!read.Item) return;
  await db.client.send(
    new PutItemCommand({
      TableName: db.table,
      Item: {
        ...itemKey(workload),
        workload: { S: workload.slice(0, 1024) },
        history: { S: '[]' },
        rev: { N: String(Number(read.Item.rev?.N ?? 0) + 1) },
      },
    }),
  );
}
