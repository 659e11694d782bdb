/**
 * The one answer to "which descriptor does this target read, decide and patch with?", shared by the engine,
 * reconcile and status so that what one writes is what the others read:
 * - a workload target: its kind's (Deployment, StatefulSet, DaemonSet, Rollout, CronJob); a Rollout with
 *   `restartBy: template`, the Rollout's that patches its pod template instead of spec.restartAt;
 * - a resource target: the route's own resource, patched with the route's template and waited for by its `wait`,
 *   whatever its kind (an ExternalSecret routed as `resource:` is patched as the route says, not nudged);
 * - a consumers target of an operator's kind (`sync:` routes): the operator's resource (ExternalSecret,
 *   VaultStaticSecret), nudged and waited for as its operator needs;
 * - a consumers target of a Secret or SecretProviderClass has none of its own: each consumer found has its kind's.
 */
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import {
  resourceDescriptor,
  ROLLOUT_BY_TEMPLATE,
  WORKLOAD_KINDS,
  type WorkloadDescriptor,
} from '../workloads/workload-kinds.ts';
import type { RolloutTarget } from './planner.ts';

export function descriptorOf(t: RolloutTarget): WorkloadDescriptor {
  if (t.type === 'workload') return t.restartBy === 'template' ? ROLLOUT_BY_TEMPLATE : WORKLOAD_KINDS[t.kind];
  if (t.type === 'resource') return resourceDescriptor(t.apiVersion, t.kind, t.patch, t.wait);
  if (isSyncKind(t.kind)) return SYNC_KINDS[t.kind];
  throw new Error(`a ${t.kind} target has no descriptor of its own`);
}
