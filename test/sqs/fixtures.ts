/** Rollout messages for the queue tests: distinct restart tokens give distinct deduplication ids. */
import type { RolloutTarget } from '../../lib/plan/planner.ts';
import { ROLLOUT_MESSAGE_VERSION, type RolloutMessage } from '../../lib/queue/rollout-message.ts';

export function rolloutTarget(cluster: string, name: string, version: number, padding = 0): RolloutTarget {
  const path = 'secret/payments/api/db';
  return {
    type: 'workload',
    cluster,
    namespace: 'payments',
    kind: 'Deployment',
    name,
    routes: ['payments-db'],
    // Padding grows the message without changing what it means (a long list of paths), for the size tests.
    paths: padding > 0 ? [path, `secret/padding/${'p'.repeat(padding)}`] : [path],
    secrets: [{ path, operation: 'write', version, id: `req-${version}`, time: '2026-11-20T10:15:02Z' }],
    restartToken: `token-${name}-${version}`,
    restartedAt: '2026-11-20T10:15:02Z',
  };
}

/** One message for `cluster` restarting `name` for secret version `version`. */
export function rolloutMessage(cluster: string, name: string, version = 1, padding = 0): RolloutMessage {
  return {
    v: ROLLOUT_MESSAGE_VERSION,
    cluster,
    targets: [rolloutTarget(cluster, name, version, padding)],
    changeIds: [`req-${version}`],
    acceptedAt: '2026-11-20T10:15:03.000Z',
  };
}
