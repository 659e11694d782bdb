/**
 * The worker: rollout messages in, restarts out. Messages of one cluster arrive in order (FIFO group = cluster);
 * when one fails, the later messages of its group in the batch are returned unprocessed too, so order holds on
 * redelivery. A message with a failed target is redelivered and, after the queue's maxReceiveCount, lands in the
 * dead-letter queue: nothing is dropped. Re-running a message is safe: targets already restarted are `unchanged`.
 */
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../kube/rollout-executor.ts';
import { METRICS, type Telemetry } from '../observability/telemetry.ts';
import { parseRolloutMessage } from '../queue/rollout-message.ts';
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
}

export interface BatchOutcome {
  /** Message ids to redeliver (SQS `batchItemFailures`). */
  failed: string[];
  results: RolloutResult[];
}

export async function processBatch(records: readonly QueueRecord[], deps: WorkerDeps): Promise<BatchOutcome> {
  const now = deps.now ?? Date.now;
  const blocked = new Set<string>();
  const failed: string[] = [];
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
        const message = parseRolloutMessage(record.body);
        if ('error' in message) {
          // Redelivery cannot fix it: let it go to the dead-letter queue, and say so now.
          deps.telemetry.error('unreadable rollout message', { messageId: record.messageId, error: message.error });
          failed.push(record.messageId);
          blocked.add(record.groupId);
          continue;
        }
        deps.telemetry.setCorrelationId(message.changeIds[0]);
        const out = await executeRollouts(deps.table, message.targets, deps.executor);
        results.push(...out);
        for (const r of out) {
          deps.telemetry.metric(METRICS.targets, 1, 'Count', { outcome: r.outcome, cluster: r.cluster });
          if (r.outcome === 'restarted') {
            const target = message.targets.find((t) => t.restartToken === r.restartToken);
            const newest = Math.max(...(target?.secrets ?? []).map((s) => Date.parse(s.time)).filter((t) => !Number.isNaN(t)));
            if (Number.isFinite(newest)) deps.telemetry.metric(METRICS.lag, Math.max(0, now() - newest), 'Milliseconds', { cluster: r.cluster });
          }
        }
        const failures = out.filter((r) => r.outcome === 'failed');
        deps.telemetry.info('rollout message done', { messageId: record.messageId, cluster: message.cluster, results: out.map((r) => ({ namespace: r.namespace, kind: r.kind, name: r.name, outcome: r.outcome, reason: r.reason, attempts: r.attempts })) });
        if (failures.length > 0) {
          if (failures.some((f) => f.reason === 'unauthorized' || f.reason === 'credentials')) deps.invalidate?.(message.cluster);
          failed.push(record.messageId);
          blocked.add(record.groupId);
        }
      }
    }),
  );
  deps.telemetry.flush();
  return { failed, results };
}
