/**
 * What travels through the queue: one message per (batch, cluster), carrying that cluster's planned targets.
 * The message group is the cluster, so each cluster is worked in order and at a bounded rate while clusters
 * proceed in parallel; the deduplication id derives from the restart tokens, so a re-sent payload is not
 * queued twice (within SQS's 5-minute deduplication window; the restart record covers the rest).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { RolloutTarget } from '../plan/planner.ts';

export const ROLLOUT_MESSAGE_VERSION = 1;

export interface RolloutMessage {
  v: typeof ROLLOUT_MESSAGE_VERSION;
  cluster: string;
  targets: RolloutTarget[];
  /** Correlation: the Vault request or event ids behind the targets (for logs). */
  changeIds: string[];
  /** When the change was accepted (ISO), for the lag metric. */
  acceptedAt: string;
}

/** SQS allows 256 KiB per message; stay well below it, leaving room for attributes. */
export const MAX_MESSAGE_BYTES = 200 * 1024;

/** The FIFO message group: one per cluster. */
export const messageGroupId = (m: Pick<RolloutMessage, 'cluster'>): string => m.cluster;

/** The FIFO deduplication id: the same cluster and restart tokens give the same id (<= 128 chars). */
export function deduplicationId(m: Pick<RolloutMessage, 'cluster' | 'targets'>): string {
  const tokens = m.targets.map((t) => `${t.namespace}/${t.kind}/${t.type === 'resource' ? t.name : (t.name ?? t.selector ?? 'annotated')}:${t.restartToken}`).sort();
  return createHash('sha256').update(`${m.cluster}\n${tokens.join('\n')}`).digest('hex');
}

/** Splits one cluster's targets into messages under the size limit, in a stable order. */
export function rolloutMessages(cluster: string, targets: readonly RolloutTarget[], changeIds: readonly string[], acceptedAt: string): RolloutMessage[] {
  const messages: RolloutMessage[] = [];
  let current: RolloutTarget[] = [];
  let size = 0;
  const ids = [...new Set(changeIds)].slice(0, 50);
  for (const target of targets) {
    const bytes = Buffer.byteLength(JSON.stringify(target));
    if (current.length > 0 && size + bytes > MAX_MESSAGE_BYTES) {
      messages.push({ v: ROLLOUT_MESSAGE_VERSION, cluster, targets: current, changeIds: ids, acceptedAt });
      current = [];
      size = 0;
    }
    current.push(target);
    size += bytes;
  }
  if (current.length > 0) messages.push({ v: ROLLOUT_MESSAGE_VERSION, cluster, targets: current, changeIds: ids, acceptedAt });
  return messages;
}

const SecretRefSchema = z.object({ path: z.string(), operation: z.enum(['write', 'delete', 'destroy', 'undelete']), version: z.number().int().nullable(), id: z.string(), time: z.string() });
const TargetBase = {
  cluster: z.string(),
  namespace: z.string(),
  routes: z.array(z.string()),
  paths: z.array(z.string()),
  secrets: z.array(SecretRefSchema).min(1),
  restartToken: z.string(),
  restartedAt: z.string().nullable(),
};

export const RolloutMessageSchema = z.object({
  v: z.literal(ROLLOUT_MESSAGE_VERSION),
  cluster: z.string().min(1),
  targets: z.array(
    z.discriminatedUnion('type', [
      z.object({ ...TargetBase, type: z.literal('workload'), kind: z.enum(['Deployment', 'StatefulSet', 'DaemonSet', 'Rollout', 'CronJob']), name: z.string().optional(), selector: z.string().optional(), annotated: z.literal(true).optional() }),
      z.object({ ...TargetBase, type: z.literal('resource'), apiVersion: z.string(), kind: z.string(), name: z.string(), patch: z.record(z.string(), z.unknown()), wait: z.object({ condition: z.string() }).optional() }),
    ]),
  ),
  changeIds: z.array(z.string()),
  acceptedAt: z.string(),
});

/** Parses a message body; a malformed one is an error naming the field (it will end in the dead-letter queue). */
export function parseRolloutMessage(body: string): RolloutMessage | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { error: 'the message body is not JSON' };
  }
  const parsed = RolloutMessageSchema.safeParse(value);
  if (!parsed.success) return { error: `not a rollout message: ${parsed.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}` };
  return parsed.data as RolloutMessage;
}

/** The queue the HTTP function and the relay write to. Rejects with QueueUnavailableError when it cannot take the messages. */
export interface RolloutQueue {
  send(messages: readonly RolloutMessage[]): Promise<void>;
}

export class QueueUnavailableError extends Error {
  override readonly name = 'QueueUnavailableError';
}
