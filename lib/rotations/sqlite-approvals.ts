/**
 * Approvals in the rotation store's SQLite file (lib/rotations/approvals.ts): one row per waiting wave, its request
 * as JSON, and who approved it and when. Each write is one statement: the first request and the first approval stay.
 */
import type { DatabaseSync } from 'node:sqlite';
import {
  MAX_LISTED_APPROVALS,
  parseStoredApproval,
  storedRequest,
  type ApprovalRecord,
  type ApprovalRequest,
  type ApprovalStore,
} from './approvals.ts';

interface Row {
  record: string;
  approved_by: string | null;
  approved_at: string | null;
}

const fromRow = (row: Row | undefined): ApprovalRecord | undefined =>
  row && parseStoredApproval(row.record, row.approved_by ?? undefined, row.approved_at ?? undefined);

export class SqliteApprovalStore implements ApprovalStore {
  private readonly db: DatabaseSync;

  constructor(db: DatabaseSync) {
    this.db = db;
    this.db.exec(
      'CREATE TABLE IF NOT EXISTS rotation_approvals (rotation TEXT NOT NULL, wave INTEGER NOT NULL, since TEXT NOT NULL, record TEXT NOT NULL, approved_by TEXT, approved_at TEXT, PRIMARY KEY (rotation, wave)) WITHOUT ROWID',
    );
  }

  async request(request: ApprovalRequest): Promise<ApprovalRecord> {
    this.db
      .prepare(
        'INSERT INTO rotation_approvals (rotation, wave, since, record) VALUES (?, ?, ?, ?) ON CONFLICT (rotation, wave) DO NOTHING',
      )
      .run(request.rotation, request.wave, request.since, storedRequest(request));
    return (await this.get(request.rotation, request.wave)) ?? request;
  }

  get(rotation: string, wave: number): Promise<ApprovalRecord | undefined> {
    const row = this.db
      .prepare('SELECT record, approved_by, approved_at FROM rotation_approvals WHERE rotation = ? AND wave = ?')
      .get(rotation, wave) as Row | undefined;
    return Promise.resolve(fromRow(row));
  }

  ofRotation(rotation: string): Promise<ApprovalRecord[]> {
    const rows = this.db
      .prepare('SELECT record, approved_by, approved_at FROM rotation_approvals WHERE rotation = ? ORDER BY wave')
      .all(rotation) as unknown as Row[];
    return Promise.resolve(rows.flatMap((r) => fromRow(r) ?? []));
  }

  approve(rotation: string, wave: number, by: string, at: string): Promise<ApprovalRecord | undefined> {
    this.db
      .prepare(
        'UPDATE rotation_approvals SET approved_by = coalesce(approved_by, ?), approved_at = coalesce(approved_at, ?) WHERE rotation = ? AND wave = ?',
      )
      .run(by, at, rotation, wave);
    return this.get(rotation, wave);
  }

  pending(): Promise<ApprovalRecord[]> {
    const rows = this.db
      .prepare(
        'SELECT record, approved_by, approved_at FROM rotation_approvals WHERE approved_at IS NULL ORDER BY since LIMIT ?',
      )
      .all(MAX_LISTED_APPROVALS) as unknown as Row[];
    return Promise.resolve(rows.flatMap((r) => fromRow(r) ?? []));
  }

  forget(rotation: string): Promise<void> {
    this.db.prepare('DELETE FROM rotation_approvals WHERE rotation = ?').run(rotation);
    return Promise.resolve();
  }
}
