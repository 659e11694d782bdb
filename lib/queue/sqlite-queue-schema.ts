/** The file format of `serve`'s queue (sqlite-queue.ts): its tables, their version, and the bound on replay keys. */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT NOT NULL UNIQUE,
  group_id TEXT NOT NULL,
  body TEXT NOT NULL,
  receive_count INTEGER NOT NULL DEFAULT 0,
  receipt_handle TEXT UNIQUE,
  visible_at INTEGER
);
CREATE INDEX IF NOT EXISTS messages_by_group ON messages (group_id, seq);
CREATE TABLE IF NOT EXISTS dedup (dedup_id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen_keys (key TEXT PRIMARY KEY, until INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS seen_keys_by_until ON seen_keys (until);
CREATE TABLE IF NOT EXISTS dead_letters (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id TEXT NOT NULL,
  group_id TEXT NOT NULL,
  body TEXT NOT NULL,
  receive_count INTEGER NOT NULL,
  dead_lettered_at INTEGER NOT NULL
);
`;

/** At most this many keys in seen_keys (only authenticated requests add one; the oldest go first past it). */
export const MAX_SEEN_KEYS = 100_000;

/** The file's format: a file written by another format is refused rather than misread. (seen_keys was added
 *  without a new format: a table an older reader ignores.) */
export const SCHEMA_VERSION = 1;
