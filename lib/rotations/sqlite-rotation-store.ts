/**
 * Rotation state in a SQLite file (node:sqlite): `serve` keeps it in its queue file, so the queue and the halts that
 * hold it back live and die together; `worker` and the CLI name a file with VAULT_ROLLOUT_STATE_DB. Several processes
 * may share the file (WAL, a busy timeout); each write is one statement or one immediate transaction.
 */
import { DatabaseSync } from 'node:sqlite';
import { createPrivateFile, immediateTransaction } from '../kernel/sqlite-transaction.ts';
import type { KeyBaseline } from '../plan/changed-keys.ts';
import { parseStoredBaseline, pathKey, storedBaseline, type KeyBaselineStore } from './key-baselines.ts';
import type { BreakerLimit, BreakerVerdict } from '../plan/restart-breaker.ts';
import { admitRestartSqlite, resetRestartsSqlite, RESTART_BREAKER_TABLE } from './sqlite-restart-breaker.ts';
import { SqliteApprovalStore } from './sqlite-approvals.ts';
import type { NotificationOutbox, OutboxDelivery, TakeResult } from './notification-outbox.ts';
import {
  clearanceOf,
  identityKey,
  MAX_LISTED_CLEARANCES,
  MAX_LISTED_HALTS,
  parseStoredClearance,
  parseStoredHalt,
  type ClearedBy,
  type HaltClearance,
  type RotationHalt,
  type RotationStore,
  type WaveMark,
  type WaveTimes,
} from './rotation-store.ts';

/** The column of each wave time (never a name from input). */
const WAVE_COLUMNS: Readonly<Record<WaveMark, string>> = { startedAt: 'started_at', completeAt: 'complete_at' };

/** Also the key baselines and the notifications' outbox: the same file, so `serve` needs no other. */
export class SqliteRotationStore implements RotationStore, KeyBaselineStore, NotificationOutbox {
  private readonly db: DatabaseSync;
  readonly approvals: SqliteApprovalStore;

  constructor(file: string) {
    if (file !== ':memory:') createPrivateFile(file);
    this.db = new DatabaseSync(file);
    this.db.exec('PRAGMA busy_timeout = 5000');
    if (file !== ':memory:') this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS rotation_waves (rotation TEXT PRIMARY KEY, released INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_wave_times (rotation TEXT NOT NULL, wave INTEGER NOT NULL, started_at TEXT, complete_at TEXT, PRIMARY KEY (rotation, wave)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_halts (rotation TEXT PRIMARY KEY, halted_at TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_halted_changes (change_key TEXT NOT NULL, rotation TEXT NOT NULL, PRIMARY KEY (change_key, rotation)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS key_baselines (path_key TEXT NOT NULL, device TEXT NOT NULL, version INTEGER NOT NULL, expires_at INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (path_key, device)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS notification_events (event_id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS notification_deliveries (event_id TEXT NOT NULL, sink TEXT NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, due_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (event_id, sink)) WITHOUT ROWID;
      CREATE INDEX IF NOT EXISTS notification_deliveries_due ON notification_deliveries (state, due_at);
      CREATE TABLE IF NOT EXISTS rotation_clearances (cleared_at TEXT NOT NULL, rotation TEXT NOT NULL, record TEXT NOT NULL,
        PRIMARY KEY (cleared_at, rotation)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS rotation_notes (rotation TEXT NOT NULL, fact TEXT NOT NULL, expires_at INTEGER NOT NULL, PRIMARY KEY (rotation, fact)) WITHOUT ROWID;
      ${RESTART_BREAKER_TABLE}`);
    this.approvals = new SqliteApprovalStore(this.db);
  }

  admitRestart(workload: string, token: string, now: number, limit: BreakerLimit): Promise<BreakerVerdict> {
    return Promise.resolve(admitRestartSqlite(this.db, workload, token, now, limit));
  }

  resetRestarts(workload: string): Promise<void> {
    resetRestartsSqlite(this.db, workload);
    return Promise.resolve();
  }

  releasedWave(rotation: string): Promise<number> {
    const row = this.db.prepare('SELECT released FROM rotation_waves WHERE rotation = ?').get(rotation) as
      { released: number } | undefined;
    return Promise.resolve(Number(row?.released ?? 0));
  }

  releaseWave(rotation: string, wave: number): Promise<void> {
    this.db
      .prepare(
        'INSERT INTO rotation_waves (rotation, released) VALUES (?, ?) ON CONFLICT (rotation) DO UPDATE SET released = max(released, excluded.released)',
      )
      .run(rotation, wave);
    return Promise.resolve();
  }

  markWave(rotation: string, wave: number, mark: WaveMark, at: string): Promise<WaveTimes> {
    const column = WAVE_COLUMNS[mark];
    // One statement: the first time written stays (coalesce), whoever writes after.
    this.db
      .prepare(
        `INSERT INTO rotation_wave_times (rotation, wave, ${column}) VALUES (?, ?, ?) ON CONFLICT (rotation, wave) DO UPDATE SET ${column} = coalesce(${column}, excluded.${column})`,
      )
      .run(rotation, wave, at);
    return this.waveTimes(rotation, wave);
  }

  waveTimes(rotation: string, wave: number): Promise<WaveTimes> {
    const row = this.db
      .prepare('SELECT started_at, complete_at FROM rotation_wave_times WHERE rotation = ? AND wave = ?')
      .get(rotation, wave) as { started_at: string | null; complete_at: string | null } | undefined;
    return Promise.resolve({
      ...(row?.started_at ? { startedAt: row.started_at } : {}),
      ...(row?.complete_at ? { completeAt: row.complete_at } : {}),
    });
  }

  forgetWave(rotation: string, wave: number): Promise<void> {
    this.db.prepare('DELETE FROM rotation_wave_times WHERE rotation = ? AND wave = ?').run(rotation, wave);
    return Promise.resolve();
  }

  halt(halt: RotationHalt): Promise<void> {
    immediateTransaction(this.db, () => {
      this.db
        .prepare('INSERT OR REPLACE INTO rotation_halts (rotation, halted_at, record) VALUES (?, ?, ?)')
        .run(halt.rotation, halt.haltedAt, JSON.stringify(halt));
      const insert = this.db.prepare(
        'INSERT OR IGNORE INTO rotation_halted_changes (change_key, rotation) VALUES (?, ?)',
      );
      for (const identity of halt.changes) insert.run(identityKey(identity), halt.rotation);
    });
    return Promise.resolve();
  }

  haltsOf(changeIdentities: readonly string[]): Promise<RotationHalt[]> {
    const rotations = new Set<string>();
    const find = this.db.prepare('SELECT rotation FROM rotation_halted_changes WHERE change_key = ?');
    for (const identity of new Set(changeIdentities))
      for (const row of find.all(identityKey(identity)) as Array<{ rotation: string }>) rotations.add(row.rotation);
    const read = this.db.prepare('SELECT record FROM rotation_halts WHERE rotation = ?');
    return Promise.resolve(
      [...rotations].flatMap((r) => {
        const row = read.get(r) as { record: string } | undefined;
        const halt = row && parseStoredHalt(row.record);
        return halt ? [halt] : [];
      }),
    );
  }

  halts(): Promise<RotationHalt[]> {
    const rows = this.db
      .prepare('SELECT record FROM rotation_halts ORDER BY halted_at LIMIT ?')
      .all(MAX_LISTED_HALTS) as Array<{ record: string }>;
    return Promise.resolve(rows.flatMap((r) => parseStoredHalt(r.record) ?? []));
  }

  clear(rotation: string, by?: ClearedBy): Promise<RotationHalt | undefined> {
    return Promise.resolve(
      immediateTransaction(this.db, () => {
        const row = this.db.prepare('SELECT record FROM rotation_halts WHERE rotation = ?').get(rotation) as
          { record: string } | undefined;
        const halt = row ? parseStoredHalt(row.record) : undefined;
        // The trail in the same transaction as the clear: one is never there without the other.
        const trail = 'INSERT OR REPLACE INTO rotation_clearances (cleared_at, rotation, record) VALUES (?, ?, ?)';
        if (halt && by) this.db.prepare(trail).run(by.clearedAt, rotation, JSON.stringify(clearanceOf(halt, by)));
        this.db.prepare('DELETE FROM rotation_halts WHERE rotation = ?').run(rotation);
        this.db.prepare('DELETE FROM rotation_halted_changes WHERE rotation = ?').run(rotation);
        this.db.prepare('DELETE FROM rotation_waves WHERE rotation = ?').run(rotation);
        this.db.prepare('DELETE FROM rotation_wave_times WHERE rotation = ?').run(rotation);
        void this.approvals.forget(rotation);
        return halt;
      }),
    );
  }

  clearances(): Promise<HaltClearance[]> {
    const latest = this.db.prepare('SELECT record FROM rotation_clearances ORDER BY cleared_at DESC LIMIT ?');
    const rows = latest.all(MAX_LISTED_CLEARANCES) as Array<{ record: string }>;
    return Promise.resolve(rows.flatMap((r) => parseStoredClearance(r.record) ?? []));
  }

  baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined> {
    const row = this.db
      .prepare('SELECT record FROM key_baselines WHERE path_key = ? AND device = ? AND expires_at > ?')
      .get(pathKey(path), device, nowMs) as { record: string } | undefined;
    return Promise.resolve(row ? parseStoredBaseline(row.record, device) : undefined);
  }

  putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void> {
    // Versions only move forward: an older write's baseline, arriving late, never replaces a newer one.
    this.db
      .prepare(
        'INSERT INTO key_baselines (path_key, device, version, expires_at, record) VALUES (?, ?, ?, ?, ?) ON CONFLICT (path_key, device) DO UPDATE SET version = excluded.version, expires_at = excluded.expires_at, record = excluded.record WHERE version < excluded.version OR expires_at <= ?',
      )
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

  enqueueOnce(eventId: string, sinks: readonly string[], body: string, nowMs: number, ttlMs: number): Promise<boolean> {
    return Promise.resolve(
      immediateTransaction(this.db, () => {
        // Expired ids go first (a bounded sweep per event), so an id is refused only within its TTL.
        this.db
          .prepare(
            'DELETE FROM notification_events WHERE event_id IN (SELECT event_id FROM notification_events WHERE expires_at <= ? LIMIT 100)',
          )
          .run(nowMs);
        this.db
          .prepare(
            'DELETE FROM notification_deliveries WHERE (event_id, sink) IN (SELECT event_id, sink FROM notification_deliveries WHERE expires_at <= ? LIMIT 100)',
          )
          .run(nowMs);
        // The conditional insert is the deduplication: a second emit of the same event changes nothing.
        const inserted = this.db
          .prepare('INSERT OR IGNORE INTO notification_events (event_id, expires_at) VALUES (?, ?)')
          .run(eventId, nowMs + ttlMs);
        if (Number(inserted.changes) === 0) return false;
        const insert = this.db.prepare(
          "INSERT OR REPLACE INTO notification_deliveries (event_id, sink, body, state, attempts, due_at, expires_at) VALUES (?, ?, ?, 'pending', 0, ?, ?)",
        );
        for (const sink of sinks) insert.run(eventId, sink, body, nowMs, nowMs + ttlMs);
        return true;
      }),
    );
  }

  takeDue(nowMs: number, limit: number, leaseMs: number): Promise<OutboxDelivery[]> {
    return Promise.resolve(
      immediateTransaction(this.db, () => {
        const rows = this.db
          .prepare(
            "SELECT event_id, sink, body, attempts FROM notification_deliveries WHERE state = 'pending' AND due_at <= ? ORDER BY due_at LIMIT ?",
          )
          .all(nowMs, limit) as Array<{ event_id: string; sink: string; body: string; attempts: number }>;
        const lease = this.db.prepare('UPDATE notification_deliveries SET due_at = ? WHERE event_id = ? AND sink = ?');
        for (const r of rows) lease.run(nowMs + leaseMs, r.event_id, r.sink);
        return rows.map((r) => ({ eventId: r.event_id, sink: r.sink, body: r.body, attempts: Number(r.attempts) }));
      }),
    );
  }

  take(eventId: string, sink: string, nowMs: number, leaseMs: number): Promise<TakeResult> {
    return Promise.resolve(
      immediateTransaction(this.db, (): TakeResult => {
        const row = this.db
          .prepare('SELECT body, state, attempts, due_at FROM notification_deliveries WHERE event_id = ? AND sink = ?')
          .get(eventId, sink) as { body: string; state: string; attempts: number; due_at: number } | undefined;
        if (!row || row.state !== 'pending') return 'done';
        if (Number(row.due_at) > nowMs) return { notBefore: Number(row.due_at) };
        this.db
          .prepare('UPDATE notification_deliveries SET due_at = ? WHERE event_id = ? AND sink = ?')
          .run(nowMs + leaseMs, eventId, sink);
        return { delivery: { eventId, sink, body: row.body, attempts: Number(row.attempts) } };
      }),
    );
  }

  sent(eventId: string, sink: string): Promise<void> {
    this.db
      .prepare("UPDATE notification_deliveries SET state = 'sent' WHERE event_id = ? AND sink = ?")
      .run(eventId, sink);
    return Promise.resolve();
  }

  failed(eventId: string, sink: string, attempts: number, retryAtMs: number | undefined): Promise<void> {
    if (retryAtMs === undefined)
      this.db
        .prepare("UPDATE notification_deliveries SET state = 'gave-up', attempts = ? WHERE event_id = ? AND sink = ?")
        .run(attempts, eventId, sink);
    else
      this.db
        .prepare('UPDATE notification_deliveries SET attempts = ?, due_at = ? WHERE event_id = ? AND sink = ?')
        .run(attempts, retryAtMs, eventId, sink);
    return Promise.resolve();
  }

  note(rotation: string, fact: string, nowMs: number, ttlMs: number): Promise<void> {
    this.db
      .prepare(
        'INSERT INTO rotation_notes (rotation, fact, expires_at) VALUES (?, ?, ?) ON CONFLICT (rotation, fact) DO UPDATE SET expires_at = excluded.expires_at',
      )
      .run(rotation, fact, nowMs + ttlMs);
    return Promise.resolve();
  }

  notes(rotation: string, nowMs: number): Promise<string[]> {
    const rows = this.db
      .prepare('SELECT fact FROM rotation_notes WHERE rotation = ? AND expires_at > ? ORDER BY fact')
      .all(rotation, nowMs) as Array<{ fact: string }>;
    return Promise.resolve(rows.map((r) => r.fact));
  }

  close(): void {
    this.db.close();
  }
}
