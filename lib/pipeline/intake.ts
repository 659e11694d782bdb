/**
 * The intake: raw change records in, rollout messages durably queued out. It plans (pure) and queues one message
 * per cluster; restarting is the worker's job, so a down cluster never fails the intake.
 */
import { planRollouts, targetsByCluster, type Plan } from '../plan/planner.ts';
import { rolloutMessages, type RolloutQueue } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { parseInput, type InputFormat } from '../sources/parse.ts';
import type { ParseResult } from '../sources/secret-change.ts';

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
  const changeIds = parsed.changes.map((c) => c.id);
  const messages = [...targetsByCluster(plan.targets)].flatMap(([cluster, targets]) => rolloutMessages(cluster, targets, changeIds, acceptedAt));
  if (messages.length > 0) await deps.queue.send(messages);
  return {
    summary: { accepted: parsed.changes.length, ignored: parsed.ignored.length, rejected: parsed.rejected.length, queued: messages.length },
    parsed,
    plan,
  };
}
