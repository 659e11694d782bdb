/**
 * Which slot store a process uses, from its environment (read once at start-up): `VAULT_ROLLOUT_SLOTS_TABLE` names
 * a DynamoDB table (Lambda; serverless.yml sets it), `VAULT_ROLLOUT_SLOTS_DB` a SQLite file (`serve`, `worker`, or
 * several processes on one machine). Neither: undefined, and the executor keeps the slots in memory, bounding
 * only what this one process restarts.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Env } from '../kernel/env.ts';
import { DynamoDbSlotStore } from './dynamodb-slot-store.ts';
import type { SlotStore } from './slot-store.ts';

export async function slotStoreFromEnv(env: Env): Promise<SlotStore | undefined> {
  const table = env.VAULT_ROLLOUT_SLOTS_TABLE;
  if (table)
    return new DynamoDbSlotStore({
      client: new DynamoDBClient({ region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION }),
      table,
    });
  const file = env.VAULT_ROLLOUT_SLOTS_DB;
  if (file) {
    // Loaded only here: a Lambda bundle never runs node:sqlite.
    const { SqliteSlotStore } = await import('./sqlite-slot-store.ts');
    return new SqliteSlotStore(file);
  }
  return undefined;
}
