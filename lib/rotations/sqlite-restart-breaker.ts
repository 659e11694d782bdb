/**
 * `rollout.breaker`'s counted restarts in the rotation store's SQLite file (sqlite-rotation-store.ts): one row per
 * workload, its history as JSON, read, decided and written in one immediate transaction, so two workers sharing
 * the file never both take the last restart the breaker allows.
 */
import type { DatabaseSync } from 'node:sqlite';
import { immediateTransaction } from '../kernel/sqlite-transaction.ts';
import { decideBreaker, parseBreakerHistory, type BreakerLimit, type BreakerVerdict } from '../plan/restart-breaker.ts';

export const RESTART_BREAKER_TABLE =
  'CREATE TABLE IF NOT EXISTS restart_breaker (workload TEXT PRIMARY KEY, history TEXT NOT NULL) WITHOUT ROWID;';

export function admitRestartSqlite(
  db: DatabaseSync,
  workload: string,
  token: string,
  now: number,
  limit: BreakerLimit,
): BreakerVerdict {
  return immediateTransaction(db, () => {
    const row = db.prepare('SELECT history FROM restart_breaker WHERE workload = ?').get(workload) as
      { history: string } | undefined;
    const { verdict, history } = decideBreaker(parseBreakerHistory(row?.history), token, now, limit);
    db.prepare(
      'INSERT INTO restart_breaker (workload, history) VALUES (?, ?) ON CONFLICT (workload) DO UPDATE SET history = excluded.history',
    ).run(workload, JSON.stringify(history));
    return verdict;
  });
}

export function resetRestartsSqlite(db: DatabaseSync, workload: string): void {
  db.prepare('DELETE FROM restart_breaker WHERE workload = ?').run(workload);
}
