/**
 * A change set: the changes one message (and one wave's key) carries. Their identity, the fields kept of each change,
 * and the size bounds that split a cluster's changes into sets, so planning and the queue agree on the same sets
 * without planning knowing the message format (lib/queue/rollout-message.ts builds messages from these).
 */
import { createHash } from 'node:crypto';
import type { SecretChange } from '../sources/secret-change.ts';

/** A Vault change as the queue carries it: what the worker needs to plan, nothing it would execute. */
export type QueuedChange = Omit<SecretChange, 'path' | 'record' | 'keyDigests' | 'vaultIndex'>;

/** SQS allows 256 KiB per message; stay well below it, leaving room for attributes. */
export const MAX_MESSAGE_BYTES = 200 * 1024;
/** Changes per message: a bound on the work one message can ask for, whatever its size. */
export const MAX_MESSAGE_CHANGES = 1000;

/** The identity of a set of changes, whatever their order. */
export function changeSetHash(changes: readonly QueuedChange[]): string {
  return createHash('sha256').update(changes.map(changeIdentity).sort().join('\n')).digest('hex').slice(0, 48);
}

/**
 * Identity of one change: the same write from two feeds (audit entry, event) or from reconcile has the same path and
 * version; any other operation is one event, told apart by its id and time (a delete of version 3 may come again
 * after an undelete, and must not be dropped as a duplicate of the first). Halts are recorded against these
 * (lib/rotations).
 */
export function changeIdentity(c: QueuedChange): string {
  const path = `${c.namespace}\u0000${c.mount}/${c.key}`;
  if (c.version !== null && c.operation === 'write') return `${path}@${c.version}:${c.operation}`;
  return c.version === null
    ? `${path}#${c.operation}:${c.id}@${c.time}`
    : `${path}@${c.version}:${c.operation}:${c.id}@${c.time}`;
}

/** The fields of a change the queue carries, in a stable order. */
export function queuedChange(c: SecretChange): QueuedChange {
  const queued: QueuedChange = {
    namespace: c.namespace,
    mount: c.mount,
    key: c.key,
    operation: c.operation,
    version: c.version,
    kvVersion: c.kvVersion,
    kvVersionFrom: c.kvVersionFrom,
    source: c.source,
    via: c.via,
    id: c.id,
    time: c.time,
  };
  // The keys it changed, never their digests (keyDigests stays in the intake).
  if (c.changedKeys !== undefined) queued.changedKeys = c.changedKeys;
  return queued;
}

/** Changes in chunks that each fit one message (count and bytes), in order. */
export function chunkChanges<T extends SecretChange | QueuedChange>(changes: readonly T[]): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const change of changes) {
    const bytes = Buffer.byteLength(JSON.stringify(queuedChange(change as SecretChange)));
    if (current.length >= MAX_MESSAGE_CHANGES || (current.length > 0 && size + bytes > MAX_MESSAGE_BYTES)) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(change);
    size += bytes;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
