/**
 * The slot store of `serve` and the CLI: a table in a SQLite file (Node's built-in node:sqlite), one row per
 * (scope, holder). `BEGIN IMMEDIATE` takes SQLite's write lock first, so counting the live leases of a scope and
 * adding one is a single step even when several processes share the file (WAL, a busy timeout). `:memory:` gives
 * one process its own store (`apply`, tests).
 */
import { DatabaseSync } from 'node:sqlite';
import { immediateTransaction } from '../kernel/sqlite-transaction.ts';
import type { AcquireResult, Lease, SlotScope, SlotStore } from './slot-store.ts';

export class SqliteSlotStore implements SlotStore {
  private readonly db: DatabaseSync;
  private readonly now: () => number;

  constructor(file: string, options: { now?: () => number } = {}) {
    this.now = options.now ?? Date.now;
    this.db = new DatabaseSync(file);
    this.db.exec('PRAGMA busy_timeout = 5000');
    if (file !== ':memory:') this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`CREATE TABLE IF NOT EXISTS rollout_slots (
      scope TEXT NOT NULL,
      holder TEXT NOT NULL,
      acquired_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (scope, holder)
    ) WITHOUT ROWID`);
  }

  acquire(holder: string, scopes: readonly SlotScope[], ttlMs: number): Promise<AcquireResult> {
    const now = this.now();
    return Promise.resolve(
      immediateTransaction(this.db, (): AcquireResult => {
        const missing: SlotScope[] = [];
        for (const scope of scopes) {
          this.db.prepare('DELETE FROM rollout_slots WHERE scope = ? AND expires_at <= ?').run(scope.key, now);
          if (this.db.prepare('SELECT 1 FROM rollout_slots WHERE scope = ? AND holder = ?').get(scope.key, holder))
            continue;
          const held = Number(
            (this.db.prepare('SELECT count(*) AS n FROM rollout_slots WHERE scope = ?').get(scope.key) as { n: number })
              .n,
          );
          if (held >= scope.limit) return { acquired: false, full: scope, held };
          missing.push(scope);
        }
        const insert = this.db.prepare(
          'INSERT INTO rollout_slots (scope, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?)',
        );
        for (const scope of missing) insert.run(scope.key, holder, now, now + ttlMs);
        return { acquired: true };
      }),
    );
  }

  release(holder: string, scopeKeys: readonly string[]): Promise<void> {
    immediateTransaction(this.db, () => {
      const remove = this.db.prepare('DELETE FROM rollout_slots WHERE scope = ? AND holder = ?');
      for (const key of scopeKeys) remove.run(key, holder);
    });
    return Promise.resolve();
  }

  leases(scopeKey: string): Promise<Lease[]> {
    const rows = this.db
      .prepare('SELECT holder, acquired_at, expires_at FROM rollout_slots WHERE scope = ? AND expires_at > ?')
      .all(scopeKey, this.now()) as Array<{ holder: string; acquired_at: number; expires_at: number }>;
    return Promise.resolve(
      rows.map((r) => ({ holder: r.holder, acquiredAt: Number(r.acquired_at), expiresAt: Number(r.expires_at) })),
    );
  }

  close(): void {
    this.db.close();
  }
}
