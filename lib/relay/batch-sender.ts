/**
 * How a batch leaves the relay — to the function over HTTP, or planned here and queued on SQS — and what came of it.
 */
import type { RecordKind } from './record-kind.ts';

export type SendOutcome =
  | { type: 'delivered'; summary?: Record<string, unknown> }
  /** Try again later: the function or queue is down, throttled or unreachable. `loud`: a human must fix something. */
  | { type: 'retry'; reason: string; retryAfterMs?: number; loud?: boolean }
  /** The receiver will never take this batch (400): drop it, with the receiver's reason. */
  | { type: 'rejected'; error: string }
  /** Too large (413): smaller batches may pass. */
  | { type: 'too-large' };

export interface BatchSender {
  /** Where batches go, for logs (no credentials). */
  readonly target: string;
  send(kind: RecordKind, body: string, signal: AbortSignal): Promise<SendOutcome>;
}
