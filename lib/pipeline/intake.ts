/**
 * The intake: raw change records in, rollout messages durably queued out. It plans (pure) to know which clusters
 * each change reaches and queues, per cluster, the changes themselves; the worker plans again from its own table
 * and restarts, so a down cluster never fails the intake and the queue never carries a patch.
 */
import { planRollouts, type Plan, type SecretRef } from '../plan/planner.ts';
import { planChangeSets, type ChangeSet } from '../plan/waves.ts';
import { queuedChange, ROLLOUT_MESSAGE_VERSION, rolloutMessages, type QueueMessage, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { qualify } from '../sources/kv-mounts.ts';
import { parseInput, type InputFormat } from '../sources/parse.ts';
import type { ParseResult, SecretChange } from '../sources/secret-change.ts';

export interface IntakeSummary {
  accepted: number;
  ignored: number;
  rejected: number;
  queued: number;
}

export interface IntakeResult {
  summary: IntakeSummary;
  parsed: ParseResult;
  plan: Plan;
}

/** Parses, plans and queues. Throws QueueUnavailableError when the queue cannot take the messages. */
export async function intake(text: string, deps: { table: RoutingTable; queue: RolloutQueue; now: () => number; format?: InputFormat }): Promise<IntakeResult> {
  const parsed = parseInput(text, { mounts: deps.table.mounts, format: deps.format ?? 'auto' });
  const plan = planRollouts(deps.table, parsed.changes);
  const acceptedAt = new Date(deps.now()).toISOString();
  const messages = firstWaveMessages(deps.table, parsed.changes, plan, acceptedAt);
  if (messages.length > 0) await deps.queue.send(messages);
  return {
    summary: { accepted: parsed.changes.length, ignored: parsed.ignored.length, rejected: parsed.rejected.length, queued: messages.length },
    parsed,
    plan,
  };
}

/**
 * What every path that restarts queues (the intake, the relay's SQS sender, reconcile): per cluster, its changes —
 * all clusters at once for changes whose route has no waves; for a route with waves (issue #12), the first wave's
 * clusters and the gate that will queue the next wave once this one is healthy. Later waves are never queued here:
 * a halt then needs nothing taken back, and the worker refuses a later-wave message no passed gate released
 * (lib/pipeline/wave-guard.ts). Each message of a rotation carries the rotation's whole change set, so the worker,
 * planning it again, finds the same set (the same key, the same waves) as the gate does.
 */
export function firstWaveMessages(table: RoutingTable, changes: readonly SecretChange[], plan: Plan, acceptedAt: string, needs: (cluster: string, changes: readonly SecretChange[]) => boolean = () => true): QueueMessage[] {
  const byCluster = changesByCluster(changes, plan);
  const tableHash = { table: table.hash };
  if (!table.routes.some((r) => r.policy.waves !== undefined)) return [...byCluster].filter(([cluster, cs]) => needs(cluster, cs)).flatMap(([cluster, cs]) => rolloutMessages(cluster, cs, acceptedAt, undefined, table.hash));
  const messages: QueueMessage[] = [];
  for (const set of changeSets(table, changes, plan, byCluster)) {
    const [first, second] = set.waves;
    if (!first) continue;
    const inSet = new Set(set.changes);
    for (const cluster of first.clusters) {
      const here = (byCluster.get(cluster) ?? []).filter((c) => inSet.has(c));
      if (here.length > 0 && needs(cluster, here)) messages.push(...rolloutMessages(cluster, set.changes, acceptedAt, second ? 0 : undefined, table.hash));
    }
    if (second) messages.push({ v: ROLLOUT_MESSAGE_VERSION, kind: 'gate', changes: set.changes.map(queuedChange), wave: 0, since: acceptedAt, acceptedAt, round: 0, ...tableHash });
  }
  return messages;
}

/** The change sets of a batch and their waves (lib/plan/waves.ts), from the clusters the plan puts each change in. */
export function changeSets(table: RoutingTable, changes: readonly SecretChange[], plan: Plan, byCluster = changesByCluster(changes, plan)): ChangeSet[] {
  const clustersOf = new Map<SecretChange, string[]>();
  for (const [cluster, cs] of byCluster) for (const c of cs) clustersOf.set(c, [...(clustersOf.get(c) ?? []), cluster]);
  return planChangeSets(table, changes, plan, (c) => clustersOf.get(c) ?? []);
}

/**
 * Per cluster, in input order, the changes that plan a target there: exactly what the worker, planning them
 * again with the same table, restarts in that cluster. A change whose route renders nothing valid (a problem of
 * the plan) is not queued: the worker would refuse it.
 */
/** One change as a target's secrets name it (its path qualified by its Vault namespace): what ties targets to changes. */
export const secretIdentity = (s: Pick<SecretRef, 'path' | 'operation' | 'version' | 'id' | 'time'>): string => `${s.path}\u0000${s.operation}\u0000${s.version}\u0000${s.id}\u0000${s.time}`;

export function changesByCluster(changes: readonly SecretChange[], plan: Pick<Plan, 'targets'>): Map<string, SecretChange[]> {
  const identity = secretIdentity;
  const clustersOf = new Map<string, Set<string>>();
  for (const target of plan.targets) {
    for (const secret of target.secrets) {
      const key = identity(secret);
      const clusters = clustersOf.get(key);
      if (clusters) clusters.add(target.cluster);
      else clustersOf.set(key, new Set([target.cluster]));
    }
  }
  const byCluster = new Map<string, SecretChange[]>();
  for (const change of changes) {
    const clusters = clustersOf.get(identity({ ...change, path: qualify(change.namespace, change.path) })) ?? [];
    for (const cluster of [...clusters].sort()) {
      const list = byCluster.get(cluster);
      if (list) list.push(change);
      else byCluster.set(cluster, [change]);
    }
  }
  return byCluster;
}
