/** Waiting between attempts: jittered exponential backoff and a sleep that an AbortSignal cuts short. */

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/**
 * The one backoff of vault-rollout: the delay before attempt `attempt + 1` grows as base·2^(attempt−1) up to `capMs`,
 * and `fixedShare` of it is fixed, the rest random. The default, "equal jitter" (half fixed, half random), is never
 * zero, so a peer that fails at once is not hammered, and still spread, so many processes restarted together do not
 * retry in lockstep. The Kubernetes retries draw all of it at random (`fixedShare` 0: "full jitter", many workers on
 * one API server); the queues' redeliveries draw none of it (1: a plain doubling).
 */
export function backoffDelayMs(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number = Math.random,
  fixedShare = 0.5,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, Math.min(60, attempt - 1)));
  return Math.round(ceiling * (fixedShare + random() * (1 - fixedShare)));
}

/** Resolves after `ms`, or at once when the signal aborts; never rejects. */
export const abortableSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
