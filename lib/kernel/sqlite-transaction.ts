/** What every SQLite store of vault-rollout does the same way: its transactions and its file's mode. */
import { chmodSync, closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';

/** One SQLite IMMEDIATE transaction: the write lock first, so a read-then-write is one step across processes. */
export function immediateTransaction<T>(db: DatabaseSync, work: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const out = work();
    db.exec('COMMIT');
    return out;
  } catch (e) {
    db.exec('ROLLBACK');
    throw e;
  }
}

/**
 * A SQLite file and its directory, private to the user before SQLite writes a byte (the WAL and -shm inherit the
 * mode): queues, rotation state and key baselines hold what only vault-rollout should read.
 */
export function createPrivateFile(file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  closeSync(openSync(file, 'a', 0o600));
  chmodSync(file, 0o600);
}
