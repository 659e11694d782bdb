/**
 * The slot store of the Lambda worker: one DynamoDB table (key `pk`, `sk`; TTL attribute `ttl`). A scope of limit
 * N is N slot items, `pk = slot#<scope>`, `sk = 0000`..: a lease is a slot item whose `expiresAt` is in the
 * future. Acquiring reads each scope (one consistent Query), picks a free slot in each at random (so concurrent
 * workers seldom pick the same one) and writes them in ONE TransactWriteItems, each Put conditional on its slot
 * being absent or expired: every scope or none, and two workers never hold the same slot. A lost race cancels the
 * transaction and is tried again with a fresh read, a few times. Releasing deletes the holder's slot items,
 * conditional on the holder. Expired items are ignored by every read; TTL removes them later.
 *
 * The count check and the write are not one step for slots at indices >= the limit (left by a larger limit
 * before a configuration change): until those expire or are released, the new, smaller limit can be exceeded by
 * them. Within one limit the bound is exact.
 */
import {
  DeleteItemCommand,
  QueryCommand,
  TransactWriteItemsCommand,
  TransactionCanceledException,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { backoffDelayMs } from '../kernel/backoff.ts';
import type { AcquireResult, Lease, SlotScope, SlotStore } from './slot-store.ts';

const ATTEMPTS = 5;
/** Items a scope's read may page through: the largest limit (lib/routing/schema.ts) plus leftovers, with room. */
const MAX_PAGES = 10;
/** TTL removes an item this long after it expired (reads ignore it from the moment it expires). */
const TTL_GRACE_S = 3600;

interface SlotItem {
  index: number;
  holder: string;
  acquiredAt: number;
  expiresAt: number;
}

export class DynamoDbSlotStore implements SlotStore {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly now: () => number;

  constructor(options: { client: DynamoDBClient; table: string; now?: () => number }) {
    this.client = options.client;
    this.table = options.table;
    this.now = options.now ?? Date.now;
  }

  async acquire(holder: string, scopes: readonly SlotScope[], ttlMs: number): Promise<AcquireResult> {
    for (let attempt = 1; ; attempt++) {
      const now = this.now();
      const picks: Array<{ scope: SlotScope; index: number }> = [];
      for (const scope of scopes) {
        const live = (await this.slots(scope.key)).filter((s) => s.expiresAt > now);
        if (live.some((s) => s.holder === holder)) continue;
        if (live.length >= scope.limit) return { acquired: false, full: scope, held: live.length };
        const taken = new Set(live.map((s) => s.index));
        const free = Array.from({ length: scope.limit }, (_, i) => i).filter((i) => !taken.has(i));
        picks.push({ scope, index: free[Math.floor(Math.random() * free.length)] as number });
      }
      if (picks.length === 0) return { acquired: true };
      const expiresAt = now + ttlMs;
      try {
        await this.client.send(
          new TransactWriteItemsCommand({
            TransactItems: picks.map(({ scope, index }) => ({
              Put: {
                TableName: this.table,
                Item: {
                  ...slotKey(scope.key, index),
                  holder: { S: holder },
                  acquiredAt: { N: String(now) },
                  expiresAt: { N: String(expiresAt) },
                  ttl: { N: String(Math.ceil(expiresAt / 1000) + TTL_GRACE_S) },
                },
                ConditionExpression: 'attribute_not_exists(pk) OR expiresAt <= :now',
                ExpressionAttributeValues: { ':now': { N: String(now) } },
              },
            })),
          }),
        );
        return { acquired: true };
      } catch (e) {
        // Another worker took one of the picked slots first (or wrote the same items at the same time): read again.
        if (!(e instanceof TransactionCanceledException) || attempt >= ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, backoffDelayMs(attempt, 50, 200)));
      }
    }
  }

  async release(holder: string, scopeKeys: readonly string[]): Promise<void> {
    for (const key of scopeKeys) {
      for (const slot of (await this.slots(key)).filter((s) => s.holder === holder)) {
        try {
          await this.client.send(
            new DeleteItemCommand({
              TableName: this.table,
              Key: slotKey(key, slot.index),
              ConditionExpression: 'holder = :holder',
              ExpressionAttributeValues: { ':holder': { S: holder } },
            }),
          );
        } catch (e) {
          // Taken over by another holder after it expired: not ours to delete.
          if (!(e instanceof Error && e.name === 'ConditionalCheckFailedException')) throw e;
        }
      }
    }
  }

  async leases(scopeKey: string): Promise<Lease[]> {
    const now = this.now();
    return (await this.slots(scopeKey))
      .filter((s) => s.expiresAt > now)
      .map(({ holder, acquiredAt, expiresAt }) => ({ holder, acquiredAt, expiresAt }));
  }

  private async slots(scopeKey: string): Promise<SlotItem[]> {
    const items: SlotItem[] = [];
    let start: Record<string, AttributeValue> | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const out = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `slot#${scopeKey}` } },
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        items.push({
          index: Number(item.sk?.S ?? -1),
          holder: item.holder?.S ?? '',
          acquiredAt: Number(item.acquiredAt?.N ?? 0),
          expiresAt: Number(item.expiresAt?.N ?? 0),
        });
      }
      start = out.LastEvaluatedKey;
      if (!start) break;
    }
    return items;
  }
}

const slotKey = (scopeKey: string, index: number): Record<string, AttributeValue> => ({
  pk: { S: `slot#${scopeKey}` },
  sk: { S: String(index).padStart(4, '0') },
});
