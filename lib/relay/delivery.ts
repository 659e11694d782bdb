/**
 * Delivers the spool, strictly in order: the oldest batch is sent until it is done with, then deleted, then the
 * next. Done with means delivered (2xx), or dropped for good: rejected (400) or a single record too large (413).
 * A 413 splits the batch in halves, each delivered (and split again if needed) in order; a crash midway resends
 * the first half — delivery is at least once, and the function's planning makes a repeat restart nothing.
 * Everything else is retried with jittered backoff (Retry-After when given) for as long as it takes: a function
 * outage fills the spool, it never loses a batch.
 */
import { abortableSleep, backoffDelayMs, type Sleep } from '../kernel/backoff.ts';
import type { BatchSender, SendOutcome } from './batch-sender.ts';
import { DROP_REASONS, type RelayCounters } from './counters.ts';
import type { RecordKind } from './record-kind.ts';
import type { RelayLog } from '../kernel/log.ts';
import { batchBody, type Spool } from './spool.ts';
import { errnoWords } from '../kernel/file-errors.ts';

export interface DelivererOptions {
  spool: Spool;
  sender: BatchSender;
  counters: RelayCounters;
  log: RelayLog;
  sleep?: Sleep;
  random?: () => number;
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Retry-After is honoured up to this (default 5 minutes). */
  maxRetryAfterMs?: number;
}

type Done = 'done' | 'aborted';

export class Deliverer {
  readonly #options: DelivererOptions;
  readonly #sleep: Sleep;

  constructor(options: DelivererOptions) {
    this.#options = options;
    this.#sleep = options.sleep ?? abortableSleep;
  }

  /** Runs until the signal aborts; a batch in flight then stays in the spool for the next start. */
  async run(signal: AbortSignal): Promise<void> {
    const { spool, log } = this.#options;
    for (;;) {
      const entry = await spool.next(signal);
      if (!entry) return;
      let text: string;
      try {
        text = await spool.read(entry);
      } catch (error) {
        log.error('cannot read a spooled batch: skipping it', {
          file: entry.file,
          error: errnoWords((error as NodeJS.ErrnoException).code) ?? String(error),
        });
        await spool.remove(entry);
        continue;
      }
      const lines = text.split('\n').filter((line) => line !== '');
      if ((await this.#deliver(entry.kind, lines, signal)) === 'aborted') return;
      await spool.remove(entry);
    }
  }

  async #deliver(kind: RecordKind, lines: string[], signal: AbortSignal): Promise<Done> {
    const { sender, counters, log } = this.#options;
    const body = batchBody(lines);
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) return 'aborted';
      const outcome = await sender.send(kind, body, signal);
      switch (outcome.type) {
        case 'delivered':
          counters.delivered += lines.length;
          log.info('delivered a batch', {
            kind,
            records: lines.length,
            bytes: Buffer.byteLength(body),
            attempts: attempt,
            ...(outcome.summary ? { result: outcome.summary } : {}),
          });
          return 'done';
        case 'rejected':
          counters.drop(DROP_REASONS.rejected, lines.length);
          log.error('the receiver rejected a batch: dropped', {
            kind,
            records: lines.length,
            reason: DROP_REASONS.rejected,
            error: outcome.error,
          });
          return 'done';
        case 'too-large':
          return this.#deliverInHalves(kind, lines, body, signal);
        case 'retry':
          if (signal.aborted) return 'aborted';
          await this.#sleep(this.#retryDelay(outcome, attempt, kind, lines.length), signal);
      }
    }
  }

  /** A batch the receiver found too large: each half delivered in order; a single record is dropped for good. */
  async #deliverInHalves(kind: RecordKind, lines: string[], body: string, signal: AbortSignal): Promise<Done> {
    const { counters, log } = this.#options;
    if (lines.length === 1) {
      counters.drop(DROP_REASONS.tooLarge, 1);
      log.error('the receiver refuses a single record as too large: dropped', {
        kind,
        bytes: Buffer.byteLength(body),
        reason: DROP_REASONS.tooLarge,
      });
      return 'done';
    }
    const half = Math.ceil(lines.length / 2);
    log.warn('the receiver found a batch too large: sending it in halves', {
      kind,
      records: lines.length,
      bytes: Buffer.byteLength(body),
    });
    if ((await this.#deliver(kind, lines.slice(0, half), signal)) === 'aborted') return 'aborted';
    return this.#deliver(kind, lines.slice(half), signal);
  }

  /** How long to wait before the next attempt (Retry-After up to its bound, else backoff), said in the log. */
  #retryDelay(
    outcome: Extract<SendOutcome, { type: 'retry' }>,
    attempt: number,
    kind: RecordKind,
    records: number,
  ): number {
    const { sender, log } = this.#options;
    const backoff = backoffDelayMs(
      attempt,
      this.#options.retryBaseMs ?? 200,
      this.#options.retryCapMs ?? 30_000,
      this.#options.random,
    );
    const delay =
      outcome.retryAfterMs !== undefined
        ? Math.min(outcome.retryAfterMs, this.#options.maxRetryAfterMs ?? 300_000)
        : backoff;
    const fields = {
      kind,
      records,
      attempt,
      reason: outcome.reason,
      retryInMs: delay,
      spooledBatches: this.#options.spool.entries().length,
    };
    if (outcome.loud)
      log.error(
        'DELIVERY BLOCKED: the receiver refuses our credentials or URL; batches stay in the spool until this is fixed',
        { ...fields, target: sender.target },
      );
    else log.warn('delivery failed: retrying', fields);
    return delay;
  }
}
