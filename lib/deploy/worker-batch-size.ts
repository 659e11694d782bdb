/**
 * The worker's SQS batch size, derived from a stage's routing table (serverless.yml `param:workerBatchSize: auto`,
 * through infra/serverless/iam.js), and the same rule for `vault-rollout worker`.
 *
 * Why it depends on the table: `rollout.settle` coalesces the messages of one cluster that ONE receive returns
 * (lib/pipeline/worker.ts `unitsOf`). On a FIFO queue a cluster's group is locked while one of its messages is in
 * flight, so while the first change of a burst is held (invisible for the settle window) the rest of the burst queues
 * behind it, and the next receive returns them together — but only if a receive may return more than one message.
 * With a batch of 1 every change of a burst restarts again. Without settle, 1 keeps each invocation to one cluster.
 *
 * What AWS does with a FIFO event source (cited for the choice of 10, not of a batching window):
 * - "For FIFO queues, the maximum is 10" (BatchSize), and "Batching window is not supported for FIFO queues"
 *   (MaximumBatchingWindowInSeconds): https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-parameters.html
 *   — so a batch holds what is visible at the poll; the settle hold is what lets the burst become visible together.
 * - "each batch may contain messages from more than one message group, but the order of the messages is
 *   maintained": https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html
 * - A receive "attempts to return as many messages with the same message group ID as possible", and no further
 *   message of that group until those are deleted or visible again:
 *   https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues-understanding-logic.html
 *
 * Pure: the table (or just its routes' settle windows) and the parameter in, a number out, or an error that fails
 * packaging.
 */
import type { RoutingTable } from '../routing/routing-table.ts';

/** SQS FIFO event sources take at most 10 messages per batch. */
export const MAX_FIFO_BATCH_SIZE = 10;

/** The routes that set a settle window, by name: what makes a batch larger than 1 worth it. */
export function settlingRoutes(table: Pick<RoutingTable, 'routes'>): string[] {
  return table.routes.filter((r) => r.policy.settleMs > 0).map((r) => r.name);
}

export class WorkerBatchSizeError extends Error {
  override name = 'WorkerBatchSizeError';
}

/**
 * `auto` (or empty): 10 when any route sets `rollout.settle`, else 1. A number from 1 to 10 is taken as given, except
 * 1 with settling routes, which would silently coalesce nothing: that is refused with the routes named.
 */
export function workerBatchSize(table: Pick<RoutingTable, 'routes'>, param: string | number | undefined): number {
  const settling = settlingRoutes(table);
  const raw = String(param ?? 'auto').trim();
  if (raw === '' || raw === 'auto') return settling.length > 0 ? MAX_FIFO_BATCH_SIZE : 1;
  const size = Number(raw);
  if (!Number.isInteger(size) || size < 1 || size > MAX_FIFO_BATCH_SIZE) {
    throw new WorkerBatchSizeError(
      `workerBatchSize "${raw.slice(0, 20)}": give auto or a whole number from 1 to ${MAX_FIFO_BATCH_SIZE} (the FIFO event source maximum)`,
    );
  }
  if (size === 1 && settling.length > 0) {
    const names = settling.slice(0, 5).join(', ') + (settling.length > 5 ? `, … (${settling.length} routes)` : '');
    throw new WorkerBatchSizeError(
      `workerBatchSize 1 with rollout.settle on route(s) ${names}: a batch of 1 coalesces nothing; use auto (10) or 2-${MAX_FIFO_BATCH_SIZE}, or remove settle`,
    );
  }
  return size;
}
