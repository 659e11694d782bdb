/**
 * Opening `serve`'s queue file (sqlite-queue.ts): created private, locked for this process, its format checked and
 * brought up to date, whatever was in flight made visible again; and the statements the queue runs on it.
 */
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { createPrivateFile } from '../kernel/sqlite-transaction.ts';
import { QueueUnavailableError } from './rollout-message.ts';
import { SCHEMA, SCHEMA_VERSION } from './sqlite-queue-schema.ts';

/** The queue's database, open and current; a QueueUnavailableError says why not (in use by another process, say). */
export function openQueueDatabase(file: string): DatabaseSync {
  if (file !== ':memory:') createPrivateFile(file);
  const db = new DatabaseSync(file, { timeout: 0 });
  try {
    // EXCLUSIVE before the first read: this process owns the file until it closes or dies.
    db.exec(
      'PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;',
    );
    db.exec('BEGIN IMMEDIATE');
    const version = (db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version;
    if (version !== 0 && version !== SCHEMA_VERSION)
      throw new Error(`${file} is a queue of format ${version}; this vault-rollout reads format ${SCHEMA_VERSION}`);
    db.exec(SCHEMA);
    // Added after format 1 shipped: a refused message's reason (NULL for one that ran out of receives).
    const columns = db.prepare('PRAGMA table_info(dead_letters)').all() as Array<{ name: string }>;
    if (!columns.some((c) => c.name === 'reason')) db.exec('ALTER TABLE dead_letters ADD COLUMN reason TEXT');
    db.exec(`PRAGMA user_version = ${SCHEMA_VERSION}`);
    // Whatever was in flight belonged to a process that is gone (the lock says no other one holds the file).
    db.exec('UPDATE messages SET receipt_handle = NULL, visible_at = NULL WHERE receipt_handle IS NOT NULL');
    db.exec('COMMIT');
  } catch (e) {
    db.close();
    const busy = (e as { errcode?: number }).errcode === 5 || /database is locked/.test((e as Error).message);
    throw new QueueUnavailableError(
      busy
        ? `${file} is in use by another process (one serve per queue file)`
        : `cannot open the queue ${file}: ${(e as Error).message}`,
      { cause: e },
    );
  }
  return db;
}

/** The queue's statements, prepared once. */
export function prepareStatements(db: DatabaseSync): Record<string, StatementSync> {
  const s = (sql: string) => db.prepare(sql);
  return {
    dedupPurge: s('DELETE FROM dedup WHERE expires_at <= ?'),
    dedupInsert: s('INSERT OR IGNORE INTO dedup (dedup_id, expires_at) VALUES (?, ?)'),
    insert: s('INSERT INTO messages (message_id, group_id, body) VALUES (?, ?, ?)'),
    // Groups with nothing in flight, oldest first (by their oldest message).
    openGroups: s(`SELECT group_id FROM messages GROUP BY group_id
      HAVING SUM(receipt_handle IS NOT NULL) = 0 ORDER BY MIN(seq) LIMIT ?`),
    groupHead: s(
      'SELECT seq, message_id, group_id, body, receive_count, visible_at FROM messages WHERE group_id = ? ORDER BY seq LIMIT ?',
    ),
    markInFlight: s(
      'UPDATE messages SET receive_count = receive_count + 1, receipt_handle = ?, visible_at = ? WHERE seq = ?',
    ),
    expired: s(
      'SELECT seq, message_id, group_id, body, receive_count FROM messages WHERE receipt_handle IS NOT NULL AND visible_at <= ? ORDER BY seq',
    ),
    byHandle: s('SELECT seq, message_id, group_id, body, receive_count FROM messages WHERE receipt_handle = ?'),
    deleteSeq: s('DELETE FROM messages WHERE seq = ?'),
    makeVisible: s('UPDATE messages SET receipt_handle = NULL, visible_at = NULL WHERE seq = ?'),
    delayVisible: s('UPDATE messages SET visible_at = ? WHERE seq = ?'),
    deadLetter: s(
      'INSERT INTO dead_letters (message_id, group_id, body, receive_count, dead_lettered_at, reason) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    deadLetters: s(
      'SELECT message_id, group_id, body, receive_count, dead_lettered_at, reason FROM dead_letters WHERE dead_lettered_at >= ? ORDER BY seq',
    ),
    recentDeadLetters: s(
      'SELECT message_id, group_id, receive_count, dead_lettered_at, reason FROM dead_letters ORDER BY seq DESC LIMIT ?',
    ),
    seenPurge: s('DELETE FROM seen_keys WHERE until < ?'),
    seenInsert: s('INSERT INTO seen_keys (key, until) VALUES (?, ?) ON CONFLICT (key) DO NOTHING'),
    seenCount: s('SELECT COUNT(*) AS n FROM seen_keys'),
    seenTrim: s('DELETE FROM seen_keys WHERE key IN (SELECT key FROM seen_keys ORDER BY until LIMIT ?)'),
    counts: s(`SELECT COUNT(*) AS total, COALESCE(SUM(receipt_handle IS NOT NULL), 0) AS in_flight,
      (SELECT COUNT(*) FROM dead_letters) AS dead FROM messages`),
    backlog: s(`SELECT COALESCE(SUM(json_extract(body, '$.follow') IS NOT NULL), 0) AS continuations,
      MIN(CASE WHEN json_extract(body, '$.follow') IS NOT NULL THEN json_extract(body, '$.follow.since') END) AS oldest_continuation,
      MIN(CASE WHEN json_extract(body, '$.follow') IS NULL AND json_extract(body, '$.kind') IS NULL THEN json_extract(body, '$.acceptedAt') END) AS oldest_change
      FROM messages WHERE json_valid(body)`),
  };
}
