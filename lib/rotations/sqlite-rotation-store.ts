/**
 * Rotation state in a SQLite file (node:sqlite): `serve` keeps it in its queue file, so the queue and the halts that
 * hold it back live and die together; `worker` and the CLI name a file with VAULT_ROLLOUT_STATE_DB. Several processes
 * may share the file (WAL, a busy timeout); each write is one statement or one immediate transaction.
 */
import { DatabaseSync } from 'node:sqlite';
import { createPrivateFile, immediateTransaction } from '../kernel/sqlite-transaction.ts';
import type { KeyBaseline } from '../plan/changed-keys.ts';
import { parseStoredBaseline, pathKey, storedBaseline, type KeyBaselineStore } from './key-baselines.ts';
import { identityKey, MAX_LISTED_HALTS, parseStoredHalt, type RotationHalt, type RotationStore } from './rotation-store.ts';

/** Also the key baselines (issue #24): the same file, so `serve` needs no other. */
export class SqliteRotationStore implements RotationStore, KeyBaselineStore {
  private readonly db: DatabaseSync;

  constructor(file: string) {
    if (file !== ':memory:') createPrivateFile(file);
    this.db = new DatabaseSync(file);
    this.db.exec('PRAGMA busy_timeout = 5000');
    if (file !== ':memory:') this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS rotation_waves (rotation TEXT PRIMARY KEY, released INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_halts (rotation TEXT PRIMARY KEY, halted_at TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_halted_changes (change_key TEXT NOT NULL, rotation TEXT NOT NULL, PRIMARY KEY (change_key, rotation)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS key_baselines (path_key TEXT NOT NULL, device TEXT NOT NULL, version INTEGER NOT NULL, expires_at INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (path_key, device)) WITHOUT ROWID;`);
  }

  releasedWave(rotation: string): Promise<number> {
    const row = this.db.prepare('SELECT released FROM rotation_waves WHERE rotation = ?').get(rotation) as { released: number } | undefined;
    return Promise.resolve(Number(row?.released ?? 0));
  }

  releaseWave(rotation: string, wave: number): Promise<void> {
    this.db.prepare('INSERT INTO rotation_waves (rotation, released) VALUES (?, ?) ON CONFLICT (rotation) DO UPDATE SET released = max(released, excluded.released)').run(rotation, wave);
    return Promise.resolve();
  }

  halt(halt: RotationHalt): Promise<void> {
    immediateTransaction(this.db, () => {
      this.db.prepare('INSERT OR REPLACE INTO rotation_halts (rotation, halted_at, record) VALUES (?, ?, ?)').run(halt.rotation, halt.haltedAt, JSON.stringify(halt));
      const insert = this.db.prepare('INSERT OR IGNORE INTO rotation_halted_changes (change_key, rotation) VALUES (?, ?)');
      for (const identity of halt.changes) insert.run(identityKey(identity), halt.rotation);
    });
    return Promise.resolve();
  }

  haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]> {
    const rotations = new Set<string>();
    const find = this.db.prepare('SELECT rotation FROM rotation_halted_changes WHERE change_key = ?');
    for (const identity of new Set(changeIdentities)) for (const row of find.all(identityKey(identity)) as Array<{ rotation: string }>) rotations.add(row.rotation);
    const read = this.db.prepare('SELECT record FROM rotation_halts WHERE rotation = ?');
    return Promise.resolve([...rotations].flatMap((r) => {
      const row = read.get(r) as { record: string } | undefined;
      const halt = row && parseStoredHalt(row.record);
      return halt ? [halt] : [];
    }));
  }

  halts(): Promise<RotationHalt[]> {
    const rows = this.db.prepare('SELECT record FROM rotation_halts ORDER BY halted_at LIMIT ?').all(MAX_LISTED_HALTS) as Array<{ record: string }>;
    return Promise.resolve(rows.flatMap((r) => parseStoredHalt(r.record) ?? []));
  }

  clear(rotation: string): Promise<RotationHalt | undefined> {
    return Promise.resolve(
      immediateTransaction(this.db, () => {
        const row = this.db.prepare('SELECT record FROM rotation_halts WHERE rotation = ?').get(rotation) as { record: string } | undefined;
        this.db.prepare('DELETE FROM rotation_halts WHERE rotation = ?').run(rotation);
        this.db.prepare('DELETE FROM rotation_halted_changes WHERE rotation = ?').run(rotation);
        this.db.prepare('DELETE FROM rotation_waves WHERE rotation = ?').run(rotation);
        return row ? parseStoredHalt(row.record) : undefined;
      }),
    );
  }

  baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined> {
    const row = this.db.prepare('SELECT record FROM key_baselines WHERE path_key = ? AND device = ? AND expires_at > ?').get(pathKey(path), device, nowMs) as { record: string } | undefined;
    return Promise.resolve(row ? parseStoredBaseline(row.record, device) : undefined);
  }

  putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void> {
    // Versions only move forward: an older write's baseline, arriving late, never replaces a newer one.
    this.db
      .prepare('INSERT INTO key_baselines (path_key, device, version, expires_at, record) VALUES (?, ?, ?, ?, ?) ON CONFLICT (path_key, device) DO UPDATE SET version = excluded.version, expires_at = excluded.expires_at, record = excluded.record WHERE version < excluded.version OR expires_at <= ?')
      .run(pathKey(path), baseline.device, baseline.version, expiresAtMs, storedBaseline(baseline), nowMs);
    return Promise.resolve();
  }

  forgetBaseline(device: string, path: string): Promise<void> {
    this.db.prepare('DELETE FROM key_baselines WHERE path_key = ? AND device = ?').run(pathKey(path), device);
    return Promise.resolve();
  }

  clearBaselines(path: string): Promise<void> {
    this.db.prepare('DELETE FROM key_baselines WHERE path_key = ?').run(pathKey(path));
    return Promise.resolve();
  }

  close(): void {
    this.db.close();
  }
}
