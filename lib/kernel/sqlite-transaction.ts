/** One SQLite IMMEDIATE transaction: the write lock first, so a read-then-write is one step across processes. */
import type { DatabaseSync } from 'node:sqlite';

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
