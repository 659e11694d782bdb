/**
 * The notification outbox in the rotation table (dynamodb-rotation-store.ts names its items): each event put once
 * with a delivery per sink in one transaction; a delivery leased by a conditional update, so one sender at a time
 * has it; pending deliveries found through the sparse index `outbox-due`; and a rotation's notes for "complete".
 */
import {
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { ignoreConditionFailed, key, MAX_PAGES } from './dynamodb-items.ts';
import type { NotificationOutbox, OutboxDelivery, TakeResult } from './notification-outbox.ts';

/** The sparse index of pending deliveries (serverless.yml RotationStateTable): hash outboxDue, range dueAt. */
export const OUTBOX_DUE_INDEX = 'outbox-due';
/** A transaction holds at most 100 items: the event and 99 sinks. */
const MAX_SINKS_PER_EVENT = 99;

export class DynamoDbNotificationOutbox implements NotificationOutbox {
  private readonly client: DynamoDBClient;
  private readonly table: string;

  constructor(options: { client: DynamoDBClient; table: string }) {
    this.client = options.client;
    this.table = options.table;
  }

  async enqueueOnce(
    eventId: string,
    sinks: readonly string[],
    body: string,
    nowMs: number,
    ttlMs: number,
  ): Promise<boolean> {
    if (sinks.length > MAX_SINKS_PER_EVENT) throw new Error(`an event goes to at most ${MAX_SINKS_PER_EVENT} sinks`);
    const ttl = { N: String(Math.ceil((nowMs + ttlMs) / 1000)) };
    try {
      // One transaction: the event's conditional put (the deduplication) and its deliveries, so an event is never
      // recorded without them. An expired id not yet deleted by TTL counts as gone.
      await this.client.send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              Put: {
                TableName: this.table,
                Item: { ...key(notifyKey(eventId), 'event'), ttl },
                ConditionExpression: 'attribute_not_exists(pk) OR #ttl <= :now',
                ExpressionAttributeNames: { '#ttl': 'ttl' },
                ExpressionAttributeValues: { ':now': { N: String(Math.floor(nowMs / 1000)) } },
              },
            },
            ...sinks.map((sink) => ({
              Put: {
                TableName: this.table,
                Item: {
                  ...key(notifyKey(eventId), sinkKey(sink)),
                  body: { S: body },
                  state: { S: 'pending' },
                  attempts: { N: '0' },
                  dueAt: { N: String(nowMs) },
                  outboxDue: { S: 'pending' },
                  ttl,
                },
              },
            })),
          ],
        }),
      );
      return true;
    } catch (e) {
      if (
        e instanceof Error &&
        e.name === 'TransactionCanceledException' &&
        (e as Error & { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons?.[0]?.Code ===
          'ConditionalCheckFailed'
      )
        return false;
      throw e;
    }
  }

  async takeDue(nowMs: number, limit: number, leaseMs: number): Promise<OutboxDelivery[]> {
    // The index is eventually consistent: the lease below checks each item itself, and skips one another poller took.
    const out = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: OUTBOX_DUE_INDEX,
        KeyConditionExpression: 'outboxDue = :p AND dueAt <= :now',
        ExpressionAttributeValues: { ':p': { S: 'pending' }, ':now': { N: String(nowMs) } },
        Limit: limit,
      }),
    );
    const taken: OutboxDelivery[] = [];
    for (const item of out.Items ?? []) {
      const eventId = item.pk?.S?.slice('notify#'.length);
      const sink = item.sk?.S?.slice('sink#'.length);
      if (eventId === undefined || sink === undefined || item.dueAt?.N === undefined) continue;
      const leased = await this.lease(
        eventId,
        sink,
        { expression: 'dueAt = :seen', values: { ':seen': { N: item.dueAt.N } } },
        nowMs + leaseMs,
      );
      if (leased) taken.push(leased);
    }
    return taken;
  }

  async take(eventId: string, sink: string, nowMs: number, leaseMs: number): Promise<TakeResult> {
    const leased = await this.lease(
      eventId,
      sink,
      { expression: 'dueAt <= :now', values: { ':now': { N: String(nowMs) } } },
      nowMs + leaseMs,
    );
    if (leased) return { delivery: leased };
    const out = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: key(notifyKey(eventId), sinkKey(sink)), ConsistentRead: true }),
    );
    return out.Item?.state?.S === 'pending' && out.Item.dueAt?.N !== undefined
      ? { notBefore: Number(out.Item.dueAt.N) }
      : 'done';
  }

  async sent(eventId: string, sink: string): Promise<void> {
    await this.client
      .send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(notifyKey(eventId), sinkKey(sink)),
          UpdateExpression: 'SET #state = :sent REMOVE outboxDue',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':sent': { S: 'sent' } },
        }),
      )
      .catch(ignoreConditionFailed);
  }

  async failed(eventId: string, sink: string, attempts: number, retryAtMs: number | undefined): Promise<void> {
    const update: Pick<
      UpdateItemCommandInput,
      'UpdateExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'
    > =
      retryAtMs === undefined
        ? {
            UpdateExpression: 'SET #state = :gaveUp, attempts = :a REMOVE outboxDue',
            ExpressionAttributeNames: { '#state': 'state' },
            ExpressionAttributeValues: { ':gaveUp': { S: 'gave-up' }, ':a': { N: String(attempts) } },
          }
        : {
            UpdateExpression: 'SET attempts = :a, dueAt = :due',
            ExpressionAttributeValues: { ':a': { N: String(attempts) }, ':due': { N: String(retryAtMs) } },
          };
    await this.client
      .send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(notifyKey(eventId), sinkKey(sink)),
          ConditionExpression: 'attribute_exists(pk)',
          ...update,
        }),
      )
      .catch(ignoreConditionFailed);
  }

  async note(rotation: string, fact: string, nowMs: number, ttlMs: number): Promise<void> {
    await this.client.send(
      new PutItemCommand({
        TableName: this.table,
        Item: { ...key(`notes#${rotation}`, fact), ttl: { N: String(Math.ceil((nowMs + ttlMs) / 1000)) } },
      }),
    );
  }

  async notes(rotation: string, nowMs: number): Promise<string[]> {
    const facts: string[] = [];
    let start: Record<string, AttributeValue> | undefined;
    // A rotation has a fact or two per cluster: a page or two.
    for (let page = 0; page < MAX_PAGES; page++) {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `notes#${rotation}` } },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? [])
        if (item.sk?.S && Number(item.ttl?.N ?? 0) * 1000 > nowMs) facts.push(item.sk.S);
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    return facts.sort();
  }

  /**
   * Leases a pending delivery until `untilMs` when `condition` holds too: the delivery, or undefined (not pending, not
   * due, taken by another).
   */
  private async lease(
    eventId: string,
    sink: string,
    condition: { expression: string; values: Record<string, AttributeValue> },
    untilMs: number,
  ): Promise<OutboxDelivery | undefined> {
    try {
      const out = await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: key(notifyKey(eventId), sinkKey(sink)),
          UpdateExpression: 'SET dueAt = :until',
          ConditionExpression: `outboxDue = :p AND ${condition.expression}`,
          ExpressionAttributeValues: { ':p': { S: 'pending' }, ':until': { N: String(untilMs) }, ...condition.values },
          ReturnValues: 'ALL_NEW',
        }),
      );
      const item = out.Attributes;
      return item?.body?.S === undefined
        ? undefined
        : { eventId, sink, body: item.body.S, attempts: Number(item.attempts?.N ?? 0) };
    } catch (e) {
      if (e instanceof Error && e.name === 'ConditionalCheckFailedException') return undefined;
      throw e;
    }
  }
}

const notifyKey = (eventId: string): string => `notify#${eventId}`;
const sinkKey = (sink: string): string => `sink#${sink}`;
