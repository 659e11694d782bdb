/** Waiting between attempts: jittered exponential backoff and a sleep that an AbortSignal cuts short. */

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/**
 * "Equal jitter": half the exponential delay fixed, half random. Never zero, so a peer that fails at once is not
 * hammered, and still spread, so many relays restarted together do not retry in lockstep.
 */
export function backoffDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
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
