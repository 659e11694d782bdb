/**
 * Batches planned here and queued straight onto the rollout queue (SQS FIFO), for sites where the relay may
 * reach SQS but not the function: the same intake as the function (lib/pipeline/intake.ts — parse, route, plan,
 * one message per cluster) with the routing table given by `--routes`. A queue that cannot take the messages
 * means retry; what was queued before is deduplicated by the queue.
 */
import { intake } from '../pipeline/intake.ts';
import { QueueUnavailableError, type RolloutQueue } from '../queue/rollout-message.ts';
import type { KeyBaselineStore } from '../rotations/key-baselines.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { BatchSender, SendOutcome } from './batch-sender.ts';
import type { RecordKind } from './record-kind.ts';

export interface SqsSenderOptions {
  table: RoutingTable;
  queue: RolloutQueue;
  /** The queue URL, for logs. */
  queueUrl: string;
  now?: () => number;
  /** Key-level restarts: where this relay keeps the key baselines of the paths it sees. */
  baselines?: KeyBaselineStore;
}

export class SqsBatchSender implements BatchSender {
  readonly target: string;
  readonly #options: SqsSenderOptions;

  constructor(options: SqsSenderOptions) {
    this.#options = options;
    this.target = options.queueUrl;
  }

  // The format is detected per record, as the function's routes do, so both kinds take the same path.
  async send(_kind: RecordKind, body: string): Promise<SendOutcome> {
    try {
      const { table, queue, baselines } = this.#options;
      const { summary } = await intake(body, {
        table,
        queue,
        now: this.#options.now ?? Date.now,
        ...(baselines ? { baselines } : {}),
      });
      return { type: 'delivered', summary: { ...summary } };
    } catch (error) {
      if (error instanceof QueueUnavailableError) return { type: 'retry', reason: error.message };
      return {
        type: 'retry',
        reason: `unexpected: ${error instanceof Error ? error.name : String(error)}`,
        loud: true,
      };
    }
  }
}
