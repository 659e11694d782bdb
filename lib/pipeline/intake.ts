/**
 * The intake: raw change records in, rollout messages durably queued out. It plans (pure) to know which clusters
 * each change reaches and queues, per cluster, the changes themselves; the worker plans again from its own table
 * and restarts, so a down cluster never fails the intake and the queue never carries a patch.
 */
import { planRollouts, type Plan } from '../plan/planner.ts';
import { changeSets, changesByCluster } from '../plan/cluster-changes.ts';
import {
  queuedChange,
  ROLLOUT_MESSAGE_VERSION,
  rolloutMessages,
  type QueueMessage,
  type RolloutQueue,
} from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { parseInput, type InputFormat } from '../sources/parse.ts';
import type { ParseResult, SecretChange } from '../sources/secret-change.ts';
import type { KeyBaselineStore } from '../rotations/key-baselines.ts';
import { resolveKeyChanges, tableUsesKeys } from './key-changes.ts';

export { changeSets, changesByCluster, secretIdentity } from '../plan/cluster-changes.ts';

export interface IntakeSummary {
  accepted: number;
  ignored: number;
  rejected: number;
  queued: number;
  /** Changes whose key baseline could not be read or written (restarted as every key). */
  keyStoreErrors?: number;
}

export interface IntakeResult {
  summary: IntakeSummary;
  parsed: ParseResult;
  plan: Plan;
}

/** Parses, plans and queues. Throws QueueUnavailableError when the queue cannot take the messages. */
export async function intake(
  text: string,
  deps: {
    table: RoutingTable;
    queue: RolloutQueue;
    now: () => number;
    format?: InputFormat;
    baselines?: KeyBaselineStore;
  },
): Promise<IntakeResult> {
  const parsed = parseInput(text, { mounts: deps.table.mounts, format: deps.format ?? 'auto' });
  let plan = planRollouts(deps.table, parsed.changes);
  // Key-level restarts: which keys each change changed, where a target says which keys it uses.
  let keyStoreErrors: number | undefined;
  if (deps.baselines !== undefined && tableUsesKeys(deps.table)) {
    const resolved = await resolveKeyChanges(parsed.changes, plan.routed, deps.baselines, deps.now());
    parsed.changes = resolved.changes;
    keyStoreErrors = resolved.storeErrors;
    plan = planRollouts(deps.table, parsed.changes);
  }
  const acceptedAt = new Date(deps.now()).toISOString();
  const messages = firstWaveMessages(deps.table, parsed.changes, plan, acceptedAt);
  if (messages.length > 0) await deps.queue.send(messages);
  return {
    summary: {
      accepted: parsed.changes.length,
      ignored: parsed.ignored.length,
      rejected: parsed.rejected.length,
      queued: messages.length,
      ...(keyStoreErrors ? { keyStoreErrors } : {}),
    },
    parsed,
    plan,
  };
}

/**
 * What every path that restarts queues (the intake, the relay's SQS sender, reconcile): per cluster, its changes —
 * all clusters at once for changes whose route has no waves; for a route with waves, the first wave's
 * clusters and the gate that will queue the next wave once this one is healthy. Later waves are never queued here:
 * a halt then needs nothing taken back, and the worker refuses a later-wave message no passed gate released
 * (lib/pipeline/wave-guard.ts). Each message of a rotation carries the rotation's whole change set, so the worker,
 * planning it again, finds the same set (the same key, the same waves) as the gate does.
 */
export function firstWaveMessages(
  table: RoutingTable,
  changes: readonly SecretChange[],
  plan: Plan,
  acceptedAt: string,
  needs: (cluster: string, changes: readonly SecretChange[]) => boolean = () => true,
): QueueMessage[] {
  const byCluster = changesByCluster(changes, plan);
  if (!table.routes.some((r) => r.policy.waves !== undefined))
    return [...byCluster]
      .filter(([cluster, cs]) => needs(cluster, cs))
      .flatMap(([cluster, cs]) => rolloutMessages(cluster, cs, acceptedAt, undefined, table.hash));
  const messages: QueueMessage[] = [];
  for (const set of changeSets(table, changes, plan, byCluster)) {
    const [first, second] = set.waves;
    if (!first) continue;
    const inSet = new Set(set.changes);
    for (const cluster of first.clusters) {
      const here = (byCluster.get(cluster) ?? []).filter((c) => inSet.has(c));
      if (here.length > 0 && needs(cluster, here))
        messages.push(...rolloutMessages(cluster, set.changes, acceptedAt, second ? 0 : undefined, table.hash));
    }
    if (second)
      messages.push({
        v: ROLLOUT_MESSAGE_VERSION,
        kind: 'gate',
        changes: set.changes.map(queuedChange),
        wave: 0,
        acceptedAt,
        round: 0,
        table: table.hash,
      });
  }
  return messages;
}
