/**
 * The rotation store of a CLI command: VAULT_ROLLOUT_STATE_TABLE, VAULT_ROLLOUT_STATE_DB, else the default state file.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import type { RotationStore } from '../rotations/rotation-store.ts';
import { defaultStateFile, rotationStoreFromEnv, rotationStoreName } from '../rotations/rotation-store-from-env.ts';
import { storeDivergence } from '../rotations/rotation-store-from-env.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { CliIo } from './io.ts';

export async function cliRotationStore(io: Pick<CliIo, 'env'>): Promise<RotationStore> {
  const store = await rotationStoreFromEnv(io.env, defaultStateFile(io.env, homedir()));
  if (!store) throw new Error('no rotation store'); // cannot happen: a default file is always given
  return store;
}

export const cliRotationStoreName = (io: Pick<CliIo, 'env'>): string =>
  rotationStoreName(io.env, defaultStateFile(io.env, homedir()));

/**
 * `apply` and `reset-version` for a table whose `rotationStore` is not the store they would use: refused (true),
 * with why and how to point at it; a dry run changes nothing, so it goes on with a warning.
 */
export function refusedForOtherStore(
  io: Pick<CliIo, 'env' | 'stderr'>,
  command: string,
  table: Pick<RoutingTable, 'rotationStore' | 'file'>,
  dryRun: boolean,
): boolean {
  const why = storeDivergence(table.rotationStore, io.env, defaultStateFile(io.env, homedir()), existsSync);
  if (why === undefined) return false;
  if (dryRun) {
    const goesOn = "A dry run goes on: the halts it shows are this store's.";
    io.stderr(`vault-rollout ${command}: warning: ${table.file}: ${why}. ${goesOn}\n`);
    return false;
  }
  io.stderr(`vault-rollout ${command}: not started: ${table.file}: ${why}.\n`);
  return true;
}

/**
 * The store for a command that only reads it (`halts`, `status`): undefined when it is a SQLite file that does not
 * exist yet — nothing was recorded, and a read must not create the file (nor its folder).
 */
export async function cliRotationStoreToRead(io: Pick<CliIo, 'env'>): Promise<RotationStore | undefined> {
  const { env } = io;
  const file = env.VAULT_ROLLOUT_STATE_TABLE
    ? undefined
    : env.VAULT_ROLLOUT_STATE_DB || defaultStateFile(env, homedir());
  if (file !== undefined && !existsSync(file)) return undefined;
  return cliRotationStore(io);
}
