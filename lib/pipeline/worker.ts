/**
 * The worker: rollout messages in, restarts out. A message carries Vault changes for one cluster, never targets:
 * the worker plans them with its own routing table and restarts only what that plan puts in the cluster of the
 * message group. Messages of one cluster arrive in order (FIFO group = cluster); when one fails, the later
 * messages of its group in the batch are returned unprocessed too, so order holds on redelivery. A message with a
 * failed target is redelivered and, after the queue's maxReceiveCount, lands in the dead-letter queue: nothing is
 * dropped. Re-running a message is safe: targets already restarted are `unchanged`.
 *
 * A message that cannot be honoured — unreadable, another format, a cluster that is not its group or not in the
 * table, changes that plan nothing in its cluster — is REFUSED: logged with the reason, counted in the
 * RefusedMessages metric, and acknowledged without executing anything. It is not redelivered, so a forged
 * message can neither run nor hold the real messages of its group behind it.
 */
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../kube/rollout-executor.ts';
import { METRICS, type Telemetry } from '../observability/telemetry.ts';
import { planRollouts, type RolloutTarget } from '../plan/planner.ts';
import { changeFromQueue, followUpMessage, MAX_FOLLOW_ROUNDS, parseRolloutMessage, type RolloutMessage } from '../queue/rollout-message.ts';
import type { RoutingTable } from '../routing/routing-table.ts';

export interface QueueRecord {
  messageId: string;
  body: string;
  groupId: string;
}

export interface WorkerDeps {
  table: RoutingTable;
  executor: ExecutorOptions;
  telemetry: Telemetry;
  /** Called for a cluster whose credentials were refused, so the next attempt resolves them again. */
  invalidate?: (cluster: string) => void;
  now?: () => number;
  /**
   * Follow each restart's rollout for at most `budgetMs()` (in Lambda: the invocation's remaining time minus a
   * margin), then hand what is still progressing back to the queue as a follow-up message — the same changes, which
   * the next attempt finds `unchanged` and follows again. Nothing waits longer than the budget; nothing restarts
   * twice. Without it, a restart's result is the patch alone.
   */
  follow?: { budgetMs: () => number; requeue: (message: RolloutMessage) => Promise<void> };
}

/** How long one attempt follows rollouts before handing them back to the queue (VAULT_ROLLOUT_FOLLOW_SECONDS). */
export const DEFAULT_FOLLOW_BUDGET_MS = 60_000;

/** The follow budget from the environment: seconds, 0 to only patch (results then carry no rollout state). */
export function followBudgetFromEnv(env: Readonly<Record<string, string | undefined>>): number {
  const raw = env.VAULT_ROLLOUT_FOLLOW_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_FOLLOW_BUDGET_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds < 0 || seconds > 900) throw new Error(`VAULT_ROLLOUT_FOLLOW_SECONDS=${raw.slice(0, 20)} must be a number of seconds from 0 to 900`);
  return seconds * 1000;
}

export interface BatchOutcome {
  /** Message ids to redeliver (SQS `batchItemFailures`). */
  failed: string[];
  /** Message ids refused (acknowledged, never executed), with the reason. */
  refused: Array<{ messageId: string; reason: string }>;
  results: RolloutResult[];
}

export type MessagePlan = { message: RolloutMessage; targets: RolloutTarget[]; changeIds: string[]; ignoredElsewhere: number } | { refused: string };

/**
 * What a message may restart: the plan of its changes under this worker's routing table, in the message group's
 * cluster only. Pure, so the refusal rules are table-tested.
 */
export function planMessage(table: RoutingTable, record: Pick<QueueRecord, 'messageId' | 'body' | 'groupId'>): MessagePlan {
  const message = parseRolloutMessage(record.body);
  if ('error' in message) return { refused: message.error };
  if (message.cluster !== record.groupId) return { refused: `the message names cluster "${message.cluster.slice(0, 63)}" but was sent to group "${record.groupId.slice(0, 63)}"` };
  if (!table.clusters.has(record.groupId)) return { refused: `cluster "${record.groupId.slice(0, 63)}" is not in the routing table` };
  const plan = planRollouts(table, message.changes.map((c, i) => changeFromQueue(c, `message ${record.messageId} changes[${i}]`)));
  const targets = plan.targets.filter((t) => t.cluster === record.groupId);
  if (targets.length === 0) return { refused: `its ${message.changes.length} change(s) plan nothing in cluster "${record.groupId}" under this routing table` };
  return { message, targets, changeIds: [...new Set(message.changes.map((c) => c.id))], ignoredElsewhere: plan.targets.length - targets.length };
}

export async function processBatch(records: readonly QueueRecord[], deps: WorkerDeps): Promise<BatchOutcome> {
  const now = deps.now ?? Date.now;
  const blocked = new Set<string>();
  const failed: string[] = [];
  const refused: BatchOutcome['refused'] = [];
  const results: RolloutResult[] = [];
  // Groups (clusters) are independent: work them concurrently, each in order.
  const groups = new Map<string, QueueRecord[]>();
  for (const r of records) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  await Promise.all(
    [...groups.values()].map(async (group) => {
      for (const record of group) {
        if (blocked.has(record.groupId)) {
          failed.push(record.messageId);
          continue;
        }
        const planned = planMessage(deps.table, record);
        if ('refused' in planned) {
          // Never executed, never redelivered: redelivery cannot make it acceptable, and a forged message must not
          // hold the real messages of its group behind it.
          deps.telemetry.error('refused rollout message', { messageId: record.messageId, group: record.groupId.slice(0, 63), reason: planned.refused });
          deps.telemetry.metric(METRICS.refusedMessages, 1, 'Count');
          refused.push({ messageId: record.messageId, reason: planned.refused });
          continue;
        }
        deps.telemetry.setCorrelationId(planned.changeIds[0]);
        const { targets, message } = planned;
        const startedAt = now();
        const since = message.follow ? Date.parse(message.follow.since) : undefined;
        const follow = deps.follow ? { budgetMs: Math.max(0, deps.follow.budgetMs()), ...(since === undefined ? {} : { since }) } : undefined;
        const out = await executeRollouts(deps.table, targets, { ...deps.executor, ...(follow ? { follow } : {}) });
        results.push(...out);
        for (const r of out) {
          deps.telemetry.metric(METRICS.targets, 1, 'Count', { outcome: r.outcome, cluster: r.cluster });
          if (r.outcome === 'restarted') {
            const target = targets.find((t) => t.restartToken === r.restartToken);
            const newest = Math.max(...(target?.secrets ?? []).map((s) => Date.parse(s.time)).filter((t) => !Number.isNaN(t)));
            if (Number.isFinite(newest)) deps.telemetry.metric(METRICS.lag, Math.max(0, now() - newest), 'Milliseconds', { cluster: r.cluster });
          }
        }
        const failures = out.filter((r) => r.outcome === 'failed');
        deps.telemetry.info('rollout message done', { messageId: record.messageId, cluster: record.groupId, results: out.map((r) => ({ namespace: r.namespace, kind: r.kind, name: r.name, outcome: r.outcome, reason: r.reason, attempts: r.attempts, ...(r.rollout ? { rollout: r.rollout, rolloutReason: r.rolloutReason } : {}) })) });
        if (failures.length > 0) {
          if (failures.some((f) => f.reason === 'unauthorized' || f.reason === 'credentials')) deps.invalidate?.(record.groupId);
          failed.push(record.messageId);
          blocked.add(record.groupId);
        } else if (!deps.follow && out.some((r) => r.outcome === 'deferred')) {
          // Waiting for a rollout slot (rollout.maxUnavailable) and no follow-up to hand it to: the message comes back.
          failed.push(record.messageId);
          blocked.add(record.groupId);
        } else if (deps.follow && out.some((r) => r.rollout === 'progressing' || r.outcome === 'deferred') && (message.follow?.round ?? 0) < MAX_FOLLOW_ROUNDS) {
          // The rollouts outlast this attempt's budget, or wait for a slot: hand them back rather than wait. If the
          // queue cannot take the follow-up, the message itself comes back (it is safe to run again).
          const next = followUpMessage(message, new Date(startedAt).toISOString());
          try {
            await deps.follow.requeue(next);
            deps.telemetry.info('rollouts still progressing; follow-up queued', { messageId: record.messageId, cluster: record.groupId, round: next.follow?.round, progressing: out.filter((r) => r.rollout === 'progressing').length, deferred: out.filter((r) => r.outcome === 'deferred').length });
          } catch (e) {
            deps.telemetry.warn('could not queue the follow-up; the message will be redelivered', { messageId: record.messageId, cluster: record.groupId, error: e instanceof Error ? e.name : String(e) });
            failed.push(record.messageId);
            blocked.add(record.groupId);
          }
        }
      }
    }),
  );
  deps.telemetry.flush();
  return { failed, refused, results };
}
