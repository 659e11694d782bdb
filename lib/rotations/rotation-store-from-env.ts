/**
 * Which rotation store a process uses (read once at start-up): `VAULT_ROLLOUT_STATE_TABLE` names a DynamoDB table
 * (Lambda; serverless.yml sets it), `VAULT_ROLLOUT_STATE_DB` a SQLite file; else the SQLite file given as the
 * default (`defaultStateFile`), so `serve`, `worker`, `apply`, `reconcile`, `status` and `halts` on one machine agree
 * with no setting. (Not serve's queue file: that one is locked by the serve that owns it.)
 */
import { resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { RotationStoreRef } from '../routing/schema.ts';
import { DynamoDbRotationStore } from './dynamodb-rotation-store.ts';
import type { RotationStore } from './rotation-store.ts';

export type StoreEnv = Readonly<Record<string, string | undefined>>;

export async function rotationStoreFromEnv(env: StoreEnv, defaultFile?: string): Promise<RotationStore | undefined> {
  const table = env.VAULT_ROLLOUT_STATE_TABLE;
  if (table)
    return new DynamoDbRotationStore({
      client: new DynamoDBClient({ region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION }),
      table,
    });
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

/**
 * Why a process that restarts (`apply`, `reset-version`) must not use its store for a table whose `rotationStore`
 * is another one; undefined when it may. A laptop's state file is not serve's in its pod, nor a Lambda stage's
 * DynamoDB table: the deployment's halts would not hold against it, and its halts not against the deployment. A
 * SQLite file counts only when it already exists: serve creates its own at start-up, so a missing one is not serve's.
 */
export function storeDivergence(
  declared: RotationStoreRef | undefined,
  env: StoreEnv,
  defaultFile: string,
  exists: (file: string) => boolean,
): string | undefined {
  if (!declared) return undefined;
  const here = rotationStoreName(env, defaultFile);
  if ('dynamodb' in declared) {
    if (env.VAULT_ROLLOUT_STATE_TABLE === declared.dynamodb) return undefined;
    return (
      `the table's rotationStore is the DynamoDB table ${declared.dynamodb}, and this would use the ${here}: ` +
      `the deployment's halts would not hold here, nor these there. Point at it: ` +
      `VAULT_ROLLOUT_STATE_TABLE=${declared.dynamodb}, with AWS credentials and AWS_REGION of its stage`
    );
  }
  const file = env.VAULT_ROLLOUT_STATE_TABLE ? undefined : env.VAULT_ROLLOUT_STATE_DB || defaultFile;
  const same = file !== undefined && resolve(file) === resolve(declared.sqlite);
  if (same && exists(resolve(file))) return undefined;
  const missing = same ? ', which does not exist here' : '';
  return (
    `the table's rotationStore is the SQLite file ${declared.sqlite} where serve runs, and this would use the ` +
    `${here}${missing}: serve's halts would not hold here, nor these there. Run it where serve runs ` +
    '(kubectl exec into its pod), or point VAULT_ROLLOUT_STATE_DB at that file'
  );
}
