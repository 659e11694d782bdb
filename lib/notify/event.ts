/**
 * A rotation event as notifications carry it: what happened to which rotation, where, and why — paths,
 * versions, clusters, workloads and reasons only, never a secret value, token, URL or HMAC. Its id is derived from
 * the rotation, the kind and where (wave, cluster, workload), so every worker that sees the same event computes the
 * same id: the outbox keeps one of them (lib/rotations/notification-outbox.ts).
 */
import { createHash } from 'node:crypto';
import type { NotificationEventKind } from '../routing/notifications-schema.ts';

export interface NotificationEvent {
  /** Stable: the same event seen again (a redelivery, a restart) has the same id. */
  id: string;
  kind: NotificationEventKind;
  /** The rotation (change set) key, as `vault-rollout halts` names it; for a dead letter, the message id. */
  rotation: string;
  route?: string;
  /** When it was seen (ISO). */
  at: string;
  /** The changes as people read them: `secret/app/db version 2`. */
  secrets: string[];
  wave?: number;
  waves?: number;
  cluster?: string;
  workload?: { namespace: string; kind: string; name: string };
  reason?: string;
  /** Halted: the clusters of the later waves, never restarted. */
  notRestarted?: string[];
  /** The rotation's clusters (complete). */
  clusters?: string[];
  /** A notify-only route's targets that would restart (would-restart): `Kind namespace/name`, bounded. */
  targets?: string[];
  /** Approval requested: the exact command that approves the waiting wave. */
  command?: string;
}

/** Bounds on what an event carries, so every sink's payload stays far below its limit (Slack, Teams, SNS 256 KiB). */
export const EVENT_BOUNDS = { text: 500, list: 20, item: 300 } as const;

const cut = (s: string, n: number): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const cutList = (list: readonly string[]): string[] => {
  const kept = list.slice(0, EVENT_BOUNDS.list).map((s) => cut(s, EVENT_BOUNDS.item));
  return list.length > EVENT_BOUNDS.list ? [...kept, `… and ${list.length - EVENT_BOUNDS.list} more`] : kept;
};

/** The event id: a hash of the rotation, the kind and where (a wave, a cluster, a workload). */
export function eventId(kind: NotificationEventKind, rotation: string, where = ''): string {
  return createHash('sha256').update(`${rotation}\u0000${kind}\u0000${where}`).digest('hex').slice(0, 32);
}

/** A bounded event with its id. */
export function rotationEvent(fields: Omit<NotificationEvent, 'id'>, where = ''): NotificationEvent {
  const e: NotificationEvent = {
    ...fields,
    id: eventId(fields.kind, fields.rotation, where),
    secrets: cutList(fields.secrets),
  };
  if (e.reason !== undefined) e.reason = cut(e.reason, EVENT_BOUNDS.text);
  if (e.notRestarted) e.notRestarted = cutList(e.notRestarted);
  if (e.clusters) e.clusters = cutList(e.clusters);
  if (e.targets) e.targets = cutList(e.targets);
  if (e.command !== undefined) e.command = cut(e.command, EVENT_BOUNDS.item);
  return e;
}

const TITLES: Record<NotificationEventKind, string> = {
  halted: 'Rotation halted',
  'target-failed': 'Restart failed',
  'rollout-failed': 'Rollout failed',
  complete: 'Rotation complete',
  progressing: 'Rollout still progressing',
  'dead-letter': 'Message dead-lettered',
  'would-restart': 'Would restart (notify-only route)',
  'approval-requested': 'Approval requested',
};

export const eventTitle = (e: Pick<NotificationEvent, 'kind'>): string => TITLES[e.kind];

/** One plain line per fact, shared by every sink's rendering. */
export function eventLines(e: NotificationEvent): string[] {
  const w = e.workload ? `${e.workload.kind} ${e.workload.namespace}/${e.workload.name}` : undefined;
  return [
    e.secrets.length > 0 ? `Secrets: ${e.secrets.join(', ')}` : '',
    e.route ? `Route: ${e.route}` : '',
    e.wave !== undefined ? `Wave: ${e.wave} of ${e.waves ?? '?'}` : '',
    e.cluster ? `Cluster: ${e.cluster}` : '',
    w ? `Workload: ${w}` : '',
    e.reason ? `Why: ${e.reason}` : '',
    e.notRestarted && e.notRestarted.length > 0 ? `Not restarted: ${e.notRestarted.join(', ')}` : '',
    e.clusters && e.clusters.length > 0 ? `Clusters: ${e.clusters.join(', ')}` : '',
    e.targets && e.targets.length > 0 ? `Would restart: ${e.targets.join(', ')}` : '',
    e.command ? `Approve: ${e.command}` : '',
    `Rotation: ${e.rotation}`,
  ].filter(Boolean);
}

/** Reads an outbox body back; anything else is undefined (never sent half-read). */
export function parseEvent(body: string): NotificationEvent | undefined {
  try {
    const v = JSON.parse(body) as Partial<NotificationEvent>;
    if (
      typeof v.id !== 'string' ||
      typeof v.kind !== 'string' ||
      !(v.kind in TITLES) ||
      typeof v.rotation !== 'string' ||
      typeof v.at !== 'string' ||
      !Array.isArray(v.secrets)
    )
      return undefined;
    return v as NotificationEvent;
  } catch {
    return undefined;
  }
}
