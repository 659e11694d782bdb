/** Rollout messages for the queue tests: distinct changes give distinct deduplication ids. */
import { planMessage } from '../../lib/pipeline/worker.ts';
import type { RolloutTarget } from '../../lib/plan/planner.ts';
import { ROLLOUT_MESSAGE_VERSION, type QueuedChange, type RolloutMessage } from '../../lib/queue/rollout-message.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';

/** The change of `secret/payments/<name>/db` to `version`. */
export function queuedChange(name: string, version: number, key = `payments/${name}/db`): QueuedChange {
  return {
    namespace: '',
    mount: 'secret',
    key,
    operation: 'write',
    version,
    kvVersion: 2,
    kvVersionFrom: 'routes',
    source: 'audit',
    via: 'direct',
    id: `req-${name}-${version}`,
    time: '2026-11-20T10:15:02Z',
  };
}

/**
 * One message for `cluster` with the change that restarts `name` at `version`. Padding grows the message without
 * changing what it means for `name` (more changes of other paths, 1,000-character keys), for the size tests.
 */
export function rolloutMessage(cluster: string, name: string, version = 1, padding = 0): RolloutMessage {
  const pad = Array.from({ length: Math.ceil(padding / 1000) }, (_, i) =>
    queuedChange(`pad${i}`, version, `padding/${String(i).padStart(4, '0')}${'p'.repeat(995)}`),
  );
  return {
    v: ROLLOUT_MESSAGE_VERSION,
    cluster,
    changes: [queuedChange(name, version), ...pad],
    acceptedAt: '2026-11-20T10:15:03.000Z',
  };
}

/** "cluster/name" of a message built by rolloutMessage. */
export const messageName = (m: RolloutMessage): string => `${m.cluster}/${m.changes[0]?.key.split('/')[1] ?? ''}`;

/** What the worker would restart for a message: its plan under `table`, in the message's cluster. */
export function plannedTargets(table: RoutingTable, m: RolloutMessage): RolloutTarget[] {
  const planned = planMessage(table, { messageId: 'test', body: JSON.stringify(m), groupId: m.cluster });
  if ('refused' in planned) throw new Error(`the worker would refuse this message: ${planned.refused}`);
  return planned.targets;
}
