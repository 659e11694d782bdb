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
import { KEY_DIGEST_LIMITS } from '../sources/key-digests.ts';
import {
  CHANGE_LIMITS,
  ChangeSources,
  KvVersionOrigins,
  Operations,
  Transports,
  type SecretChange,
} from '../sources/secret-change.ts';
import {
  changeIdentity,
  changeSetHash,
  chunkChanges,
  MAX_MESSAGE_CHANGES,
  queuedChange,
  type QueuedChange,
} from '../plan/change-sets.ts';

export {
  changeIdentity,
  changeSetHash,
  chunkChanges,
  MAX_MESSAGE_BYTES,
  MAX_MESSAGE_CHANGES,
  queuedChange,
  type QueuedChange,
} from '../plan/change-sets.ts';

/** 2: changes. Version 1 carried planned targets and patches, which made the queue a command channel. */
export const ROLLOUT_MESSAGE_VERSION = 2;

export interface RolloutMessage {
  v: typeof ROLLOUT_MESSAGE_VERSION;
  /** The cluster whose targets the worker restarts; must equal the message group. */
  cluster: string;
  changes: QueuedChange[];
  /** When the change was accepted (ISO), for the lag metric. */
  acceptedAt: string;
  /**
   * Set on a continuation: the same changes, handed to the queue in a group of their own
   * (`followGroupId`) because something they restarted is still under way — a rollout, an operator's sync, a slot
   * to free. The cluster step sends it before its own message is acknowledged, so the cluster's next message runs at
   * once; each look decides finish | expire | look again later (lib/plan/look-again.ts). `since` is when the first
   * attempt patched (deadlines count from it), `round` counts fresh copies, `until` is when the looks give up, and
   * `pending` names the workloads still waited on (`namespace/Kind/name`; absent when there were too many to list),
   * `lookAt` is when to look (a FIFO queue has no per-message delay: a copy received earlier is only held).
   * None of it can restart anything: the changes and the table decide that; `pending` only narrows what is reported.
   */
  follow?: { since: string; round: number; until?: string; pending?: string[]; lookAt?: string };
  /** Set when a gate queued it: the index of the wave it belongs to (part of the deduplication id). */
  wave?: number;
  /**
   * Set on a change waiting for its maintenance window (`rollout.window`): the same changes, in a group of their own
   * (`windowGroupId`: its cluster and when the window opens) so the wait never holds the cluster's next change.
   * `opensAt` is when the window opened as the worker computed it, `lookAt` when to look (at most a hold away),
   * `round` counts fresh copies. None of it can restart anything: at each look the worker computes the window again
   * from its own table and clock, and restarts only inside it.
   */
  window?: { opensAt: string; round: number; lookAt?: string };
  /**
   * The hash of the sender's routing table: a refusal says when the sender's table is not the worker's. Decides
   * nothing.
   */
  table?: string;
}

/**
 * A wave's gate: the same CHANGES, never targets, and which wave of their plan to check. The worker
 * plans them with its own table, reads that wave's targets in their clusters, and then queues the next wave (and
 * its gate), halts, or hands the gate back to the queue to look again later. Its message group is
 * `gate-<hash of the changes>`, so a gate that waits never holds a cluster's messages.
 */
export interface GateMessage {
  v: typeof ROLLOUT_MESSAGE_VERSION;
  kind: 'gate';
  changes: QueuedChange[];
  /** The wave whose health this gate checks (0 = the first); the next one starts when it passes. */
  wave: number;
  /**
   * Read and ignored, as `completeAt`: what gates before the rotation store kept the wave's times carried. The
   * gate's timeout and pause count from the times the rotation store holds (RotationStore.markWave), which a
   * queue sender cannot write: a forged `since: 1970` halted any rotation, a forged `completeAt` skipped the pause.
   */
  since?: string;
  acceptedAt: string;
  /** Ignored (see `since`). */
  completeAt?: string;
  /** Re-sends of this gate (a fresh message keeps SQS's receive count below the redrive limit). */
  round: number;
  /**
   * When to look (ISO): a fresh copy received earlier is only held until then (a FIFO queue has no per-message
   * delay). Part of the deduplication id, so a forged copy that would only be held cannot take a real gate's id.
   */
  lookAt?: string;
  /** The hash of the sender's routing table (see RolloutMessage.table). */
  table?: string;
}

export type QueueMessage = RolloutMessage | GateMessage;

export const isGateMessage = (m: QueueMessage): m is GateMessage => 'kind' in m && m.kind === 'gate';

/** Re-sends of one gate: at one look every 10 s or more, well past the longest gate timeout (24 h). */
export const MAX_GATE_ROUNDS = 10_000;

/**
 * Fresh copies of one continuation: at three looks of 15 s or more a copy, past the longest rollout deadline (24 h).
 */
export const MAX_FOLLOW_ROUNDS = 10_000;

/** Workloads a continuation names (`pending`); past this it names none and looks at every one its changes plan. */
export const MAX_PENDING_NAMES = 500;

/**
 * The FIFO message group: one per cluster for the step that patches; one per change set for gates; one per
 * (cluster, change set) for a continuation, so a rollout being followed never holds the cluster's next change.
 */
export const messageGroupId = (m: QueueMessage): string =>
  isGateMessage(m)
    ? gateGroupId(m.changes)
    : m.follow
      ? followGroupId(m.cluster, m.changes)
      : m.window
        ? windowGroupId(m.cluster, m.window.opensAt)
        : m.cluster;

/**
 * A window wait's group: `window-`, its cluster and a hash of when the window opens. Every change of the cluster
 * waiting for the same opening shares it, so they come back together when it opens and are worked as one plan (the
 * newest version of each secret restarts, once).
 */
export const windowGroupId = (cluster: string, opensAt: string): string =>
  `window-${cluster}-${createHash('sha256').update(opensAt).digest('hex').slice(0, 16)}`;

/** Fresh copies of one window wait: one a hold of 15 min or more, three holds a copy, well past a week. */
export const MAX_WINDOW_ROUNDS = 2_000;

/** A continuation's group: `follow-`, its cluster and a hash of its changes (at most 128 characters, SQS's limit). */
export const followGroupId = (cluster: string, changes: readonly QueuedChange[]): string =>
  `follow-${cluster}-${changeSetHash(changes)}`.slice(0, 128);

/**
 * A gate's group: `gate-` and a hash of its changes. The worker tells gates by their kind and checks the group against
 * the changes.
 */
export const gateGroupId = (changes: readonly QueuedChange[]): string => `gate-${changeSetHash(changes)}`;

/**
 * The FIFO deduplication id: the same cluster and changes give the same id (<= 128 chars). The changed keys count:
 * a change that names other keys of the same version is another claim, never dropped as a copy of the first. A
 * gate's id covers everything the worker reads from it (its changes, wave, round, and when to look); two gates
 * with the same id do the same, whatever else they say.
 */
export function deduplicationId(m: QueueMessage): string {
  const changes = m.changes
    .map(
      (c) =>
        `${changeIdentity(c)}${c.changedKeys === undefined ? '' : ` keys ${JSON.stringify([...c.changedKeys].sort())}`}`,
    )
    .sort();
  if (isGateMessage(m))
    return createHash('sha256')
      .update(
        `gate ${m.wave} round ${m.round}${m.lookAt === undefined ? '' : ` look ${m.lookAt}`}\n${changes.join('\n')}`,
      )
      .digest('hex');
  const round = m.follow ? `\nfollow ${m.follow.round}` : '';
  const wave = m.wave === undefined ? '' : `\nwave ${m.wave}`;
  const window = m.window ? `\nwindow ${m.window.opensAt} round ${m.window.round} look ${m.window.lookAt ?? ''}` : '';
  return createHash('sha256')
    .update(`${m.cluster}\n${changes.join('\n')}${round}${wave}${window}`)
    .digest('hex');
}

/**
 * The continuation of a message whose restarts are still under way: the same changes, one round later, in its own
 * group. `pending` lists the workloads still waited on (dropped past MAX_PENDING_NAMES); `until` is kept from the
 * first continuation, or set from `untilMs` on it.
 */
export function followUpMessage(
  m: RolloutMessage,
  since: string,
  pending?: readonly string[],
  untilMs?: number,
  lookAt?: string,
): RolloutMessage {
  const until = m.follow?.until ?? (untilMs === undefined ? undefined : new Date(untilMs).toISOString());
  const unique = [...new Set(pending ?? [])].sort();
  // Changes take at most MAX_MESSAGE_BYTES (200 KiB) and a body at most 256 KiB: names take at most 40 KiB.
  const fits =
    unique.length > 0 &&
    unique.length <= MAX_PENDING_NAMES &&
    unique.reduce((n, p) => n + p.length + 3, 0) <= MAX_PENDING_BYTES;
  const names = fits ? { pending: unique } : {};
  // A window wait that opened and restarted: its continuation waits for the rollout, not the window.
  const { window: _window, ...base } = m;
  return {
    ...base,
    follow: {
      since: m.follow?.since ?? since,
      round: (m.follow?.round ?? 0) + 1,
      ...(until === undefined ? {} : { until }),
      ...names,
      ...(lookAt === undefined ? {} : { lookAt }),
    },
  };
}

const MAX_PENDING_BYTES = 40 * 1024;

/** How a continuation names a workload it waits on. */
export const pendingName = (w: { namespace: string; kind: string; name: string }): string =>
  `${w.namespace}/${w.kind}/${w.name}`;

/** Splits one cluster's changes into messages under the size and count limits, in a stable order. */
export function rolloutMessages(
  cluster: string,
  changes: readonly (SecretChange | QueuedChange)[],
  acceptedAt: string,
  wave?: number,
  table?: string,
): RolloutMessage[] {
  return chunkChanges(changes).map((chunk) => ({
    v: ROLLOUT_MESSAGE_VERSION,
    cluster,
    changes: chunk.map((c) => queuedChange(c as SecretChange)),
    acceptedAt,
    ...(wave === undefined ? {} : { wave }),
    ...(table === undefined ? {} : { table }),
  }));
}

const QueuedChangeSchema = z.strictObject({
  // The same bounds as where changes are built; what a path may look like is the routing table's business, which
  // the worker applies to these changes exactly as the intake did.
  namespace: z.string().max(CHANGE_LIMITS.namespace),
  mount: z.string().min(1).max(CHANGE_LIMITS.mount),
  key: z.string().min(1).max(CHANGE_LIMITS.key),
  operation: z.enum(Operations),
  version: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1)
    .nullable(),
  kvVersion: z.union([z.literal(1), z.literal(2)]),
  kvVersionFrom: z.enum(KvVersionOrigins),
  source: z.enum(ChangeSources),
  via: z.enum(Transports),
  id: z.string().max(CHANGE_LIMITS.id),
  // Some feeds give no time (''); the planner then has none to record, as it does for the feed itself.
  time: z.string().max(CHANGE_LIMITS.time),
  // The keys the intake found changed (absent: every key). Names only. A sender of the queue can now also
  // say "none of your keys": a keyed target whose record is at the version before is then skipped and its record
  // moved on (docs/how-to/key-level-restarts.md, what the feed's integrity decides).
  changedKeys: z.array(z.string().min(1).max(KEY_DIGEST_LIMITS.length)).max(KEY_DIGEST_LIMITS.keys).optional(),
});

/** A time a message carries: RFC 3339, as the worker wrote it. */
const isoTime = z
  .string()
  .max(64)
  .refine((t) => !Number.isNaN(Date.parse(t)), 'must be an RFC 3339 time');

export const RolloutMessageSchema = z.strictObject({
  v: z.literal(ROLLOUT_MESSAGE_VERSION),
  cluster: z.string().min(1).max(63),
  changes: z.array(QueuedChangeSchema).min(1).max(MAX_MESSAGE_CHANGES),
  acceptedAt: z.string().max(64),
  follow: z
    .strictObject({
      since: isoTime,
      round: z.number().int().min(1).max(MAX_FOLLOW_ROUNDS),
      until: isoTime.optional(),
      // namespace (63) / Kind (63) / name (253)
      pending: z.array(z.string().max(400)).max(MAX_PENDING_NAMES).optional(),
      lookAt: isoTime.optional(),
    })
    .optional(),
  wave: z.number().int().min(0).max(100).optional(),
  window: z
    .strictObject({
      opensAt: isoTime,
      round: z.number().int().min(0).max(MAX_WINDOW_ROUNDS),
      lookAt: isoTime.optional(),
    })
    .optional(),
  table: z
    .string()
    .regex(/^[0-9a-f]{1,64}$/)
    .optional(),
});

export const GateMessageSchema = z.strictObject({
  v: z.literal(ROLLOUT_MESSAGE_VERSION),
  kind: z.literal('gate'),
  changes: z.array(QueuedChangeSchema).min(1).max(MAX_MESSAGE_CHANGES),
  wave: z.number().int().min(0).max(100),
  since: isoTime.optional(),
  acceptedAt: z.string().max(64),
  completeAt: isoTime.optional(),
  round: z.number().int().min(0).max(MAX_GATE_ROUNDS),
  lookAt: isoTime.optional(),
  table: z
    .string()
    .regex(/^[0-9a-f]{1,64}$/)
    .optional(),
});

/** Message bodies larger than SQS allows are not read at all. */
const MAX_BODY_BYTES = 256 * 1024;

/**
 * Parses a message body. A malformed one is an error naming the field, never a value. The error is final:
 * delivering the same body again cannot make it readable.
 */
export function parseRolloutMessage(body: string): QueueMessage | { error: string } {
  if (body.length > MAX_BODY_BYTES) return { error: `the message body is larger than ${MAX_BODY_BYTES} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { error: 'the message body is not JSON' };
  }
  if (typeof value === 'object' && value !== null && (value as { v?: unknown }).v === 1) {
    return {
      error:
        'format 1 (planned targets) is no longer accepted: the queue carries changes only; re-send the change through the intake',
    };
  }
  if (typeof value === 'object' && value !== null && 'kind' in value) {
    const gate = GateMessageSchema.safeParse(value);
    if (!gate.success)
      return {
        error: `not a gate message: ${gate.error.issues
          .slice(0, 3)
          .map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`)
          .join('; ')}`,
      };
    return gate.data;
  }
  const parsed = RolloutMessageSchema.safeParse(value);
  if (!parsed.success)
    return {
      error: `not a rollout message: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`)
        .join('; ')}`,
    };
  return parsed.data;
}

/** The change a queued one stands for, placed at `record` (for plan problems). */
export function changeFromQueue(c: QueuedChange, record: string): SecretChange {
  return { ...c, path: `${c.mount}/${c.key}`, record };
}

/**
 * The queue the HTTP function and the relay write to. Rejects with QueueUnavailableError when it cannot take the
 * messages.
 */
export interface RolloutQueue {
  send(messages: readonly QueueMessage[]): Promise<void>;
}

export class QueueUnavailableError extends Error {
  override readonly name = 'QueueUnavailableError';
}
