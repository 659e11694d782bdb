/** What the DynamoDB rotation table's stores share (dynamodb-rotation-store.ts, its outbox): item keys, page bounds. */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';

/** Pages a listing reads at most. */
export const MAX_PAGES = 20;

/** An item's key: partition `pk`, sort `sk`. */
export const key = (pk: string, sk: string): Record<string, AttributeValue> => ({ pk: { S: pk }, sk: { S: sk } });

/**
 * An update of an item that is gone (expired, deleted by TTL) has nothing left to mark: its condition fails, quietly.
 */
export const ignoreConditionFailed = (e: unknown): void => {
  if (!(e instanceof Error && e.name === 'ConditionalCheckFailedException')) throw e;
};
