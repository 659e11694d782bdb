/**
 * Which rotation store a process uses (read once at start-up): `VAULT_ROLLOUT_STATE_TABLE` names a DynamoDB table
 * (Lambda; serverless.yml sets it), `VAULT_ROLLOUT_STATE_DB` a SQLite file; else the SQLite file given as the
 * default (`defaultStateFile`), so `serve`, `worker`, `apply`, `reconcile`, `status` and `halts` on one machine agree
 * with no setting. (Not serve's queue file: that one is locked by the serve that owns it.)
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbRotationStore } from './dynamodb-rotation-store.ts';
import type { RotationStore } from './rotation-store.ts';

export type StoreEnv = Readonly<Record<string, string | undefined>>;

export async function rotationStoreFromEnv(env: StoreEnv, defaultFile?: string): Promise<RotationStore | undefined> {
  const table = env.VAULT_ROLLOUT_STATE_TABLE;
  if (table) return new DynamoDbRotationStore({ client: new DynamoDBClient({ region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION }), table });
  const file = env.VAULT_ROLLOUT_STATE_DB || defaultFile;
  if (!file) return undefined;
  // Loaded only here: a Lambda bundle never runs node:sqlite.
  const { SqliteRotationStore } = await import('./sqlite-rotation-store.ts');
  return new SqliteRotationStore(file);
}

/** Where the state lives, for messages: never a credential. */
export function rotationStoreName(env: StoreEnv, defaultFile?: string): string {
  if (env.VAULT_ROLLOUT_STATE_TABLE) return `DynamoDB table ${env.VAULT_ROLLOUT_STATE_TABLE}`;
  return `SQLite file ${env.VAULT_ROLLOUT_STATE_DB || defaultFile || '(none)'}`;
}

/** The CLI's default state file: beside serve's queue, under XDG_STATE_HOME (or ~/.local/state). */
export function defaultStateFile(env: StoreEnv, home: string): string {
  const state = env.XDG_STATE_HOME || `${home}/.local/state`;
  return `${state}/vault-rollout/rotations.sqlite`;
}
