/**
 * What travels through the queue: one message per (batch, cluster), carrying the Vault CHANGES routed to that
 * cluster — path, operation, version, ids and times — never targets or patches. The worker plans from its own
 * routing table (lib/pipeline/worker.ts), so whatever a message claims, only patches that the table renders for
 * those changes, in the cluster of the message group, are ever sent. A sender of the queue can at most ask "this
 * path changed", which is exactly what a Vault audit entry can say too.
 *
 * The message group is the cluster, so each cluster is worked in order and at a bounded rate while clusters
 * proceed in parallel; the deduplication id derives from the cluster and the changes, so a re-sent payload is
 * not queued twice (within SQS's 5-minute deduplication window; the restart record covers the rest).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { CHANGE_LIMITS, ChangeSources, KvVersionOrigins, Operations, Transports, type SecretChange } from '../sources/secret-change.ts';

/** 2: changes. Version 1 carried planned targets and patches, which made the queue a command channel. */
export const ROLLOUT_MESSAGE_VERSION = 2;

/** A Vault change as the queue carries it: what the worker needs to plan, nothing it would execute. */
export type QueuedChange = Omit<SecretChange, 'path' | 'record'>;

export interface RolloutMessage {
  v: typeof ROLLOUT_MESSAGE_VERSION;
  /** The cluster whose targets the worker restarts; must equal the message group. */
  cluster: string;
  changes: QueuedChange[];
  /** When the change was accepted (ISO), for the lag metric. */
  acceptedAt: string;
  /**
   * Set on a follow-up: the same changes, handed back to the queue because their rollouts were still progressing
   * when the worker's time budget ended. `since` is when the first attempt restarted them (deadlines count from it),
   * `round` counts the hand-backs. Neither can restart anything: the changes and the table decide that.
   */
  follow?: { since: string; round: number };
}

/** Hand-backs per change set: at 60 s a round, far past the longest rollout deadline (24 h). */
export const MAX_FOLLOW_ROUNDS = 2000;

/** SQS allows 256 KiB per message; stay well below it, leaving room for attributes. */
export const MAX_MESSAGE_BYTES = 200 * 1024;
/** Changes per message: a bound on the work one message can ask for, whatever its size. */
export const MAX_MESSAGE_CHANGES = 1000;

/** The FIFO message group: one per cluster. */
export const messageGroupId = (m: Pick<RolloutMessage, 'cluster'>): string => m.cluster;

/** Identity of one change: the same change from two feeds (audit entry, event) has the same path and version. */
function changeIdentity(c: QueuedChange): string {
  const path = `${c.namespace}\u0000${c.mount}/${c.key}`;
  return c.version === null ? `${path}#${c.operation}:${c.id}@${c.time}` : `${path}@${c.version}:${c.operation}`;
}

/** The FIFO deduplication id: the same cluster and changes give the same id (<= 128 chars). */
export function deduplicationId(m: Pick<RolloutMessage, 'cluster' | 'changes' | 'follow'>): string {
  const changes = m.changes.map(changeIdentity).sort();
  const round = m.follow ? `\nfollow ${m.follow.round}` : '';
  return createHash('sha256').update(`${m.cluster}\n${changes.join('\n')}${round}`).digest('hex');
}

/** The follow-up of a message whose rollouts were still progressing: the same changes, one round later. */
export function followUpMessage(m: RolloutMessage, since: string): RolloutMessage {
  return { ...m, follow: { since: m.follow?.since ?? since, round: (m.follow?.round ?? 0) + 1 } };
}

/** The fields of a change the queue carries, in a stable order. */
export function queuedChange(c: SecretChange): QueuedChange {
  return { namespace: c.namespace, mount: c.mount, key: c.key, operation: c.operation, version: c.version, kvVersion: c.kvVersion, kvVersionFrom: c.kvVersionFrom, source: c.source, via: c.via, id: c.id, time: c.time };
}

/** Splits one cluster's changes into messages under the size and count limits, in a stable order. */
export function rolloutMessages(cluster: string, changes: readonly SecretChange[], acceptedAt: string): RolloutMessage[] {
  const messages: RolloutMessage[] = [];
  let current: QueuedChange[] = [];
  let size = 0;
  const flush = () => {
    if (current.length > 0) messages.push({ v: ROLLOUT_MESSAGE_VERSION, cluster, changes: current, acceptedAt });
    current = [];
    size = 0;
  };
  for (const change of changes) {
    const queued = queuedChange(change);
    const bytes = Buffer.byteLength(JSON.stringify(queued));
    if (current.length >= MAX_MESSAGE_CHANGES || (current.length > 0 && size + bytes > MAX_MESSAGE_BYTES)) flush();
    current.push(queued);
    size += bytes;
  }
  flush();
  return messages;
}

const QueuedChangeSchema = z.strictObject({
  // The same bounds as where changes are built; what a path may look like is the routing table's business, which
  // the worker applies to these changes exactly as the intake did.
  namespace: z.string().max(CHANGE_LIMITS.namespace),
  mount: z.string().min(1).max(CHANGE_LIMITS.mount),
  key: z.string().min(1).max(CHANGE_LIMITS.key),
  operation: z.enum(Operations),
  version: z.number().int().min(0).max(2 ** 31 - 1).nullable(),
  kvVersion: z.union([z.literal(1), z.literal(2)]),
  kvVersionFrom: z.enum(KvVersionOrigins),
  source: z.enum(ChangeSources),
  via: z.enum(Transports),
  id: z.string().max(CHANGE_LIMITS.id),
  // Some feeds give no time (''); the planner then has none to record, as it does for the feed itself.
  time: z.string().max(CHANGE_LIMITS.time),
});

export const RolloutMessageSchema = z.strictObject({
  v: z.literal(ROLLOUT_MESSAGE_VERSION),
  cluster: z.string().min(1).max(63),
  changes: z.array(QueuedChangeSchema).min(1).max(MAX_MESSAGE_CHANGES),
  acceptedAt: z.string().max(64),
  follow: z
    .strictObject({ since: z.string().max(64).refine((t) => !Number.isNaN(Date.parse(t)), 'must be an RFC 3339 time'), round: z.number().int().min(1).max(MAX_FOLLOW_ROUNDS) })
    .optional(),
});

/** Message bodies larger than SQS allows are not read at all. */
const MAX_BODY_BYTES = 256 * 1024;

/**
 * Parses a message body. A malformed one is an error naming the field, never a value. The error is final:
 * delivering the same body again cannot make it readable.
 */
export function parseRolloutMessage(body: string): RolloutMessage | { error: string } {
  if (body.length > MAX_BODY_BYTES) return { error: `the message body is larger than ${MAX_BODY_BYTES} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { error: 'the message body is not JSON' };
  }
  if (typeof value === 'object' && value !== null && (value as { v?: unknown }).v === 1) {
    return { error: 'format 1 (planned targets) is no longer accepted: the queue carries changes only; re-send the change through the intake' };
  }
  const parsed = RolloutMessageSchema.safeParse(value);
  if (!parsed.success) return { error: `not a rollout message: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}` };
  return parsed.data;
}

/** The change a queued one stands for, placed at `record` (for plan problems). */
export function changeFromQueue(c: QueuedChange, record: string): SecretChange {
  return { ...c, path: `${c.mount}/${c.key}`, record };
}

/** The queue the HTTP function and the relay write to. Rejects with QueueUnavailableError when it cannot take the messages. */
export interface RolloutQueue {
  send(messages: readonly RolloutMessage[]): Promise<void>;
}

export class QueueUnavailableError extends Error {
  override readonly name = 'QueueUnavailableError';
}
