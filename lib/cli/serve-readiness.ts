/**
 * `serve`'s /readyz: not ready (503, with the reasons) when accepted work would not be kept or not be worked — the
 * queue file cannot be written (a real, empty write), or no worker loop has started an iteration for longer than
 * the bound (an idle loop polls several times a second, so only a stuck one is silent) — or while serve stops.
 * /healthz stays the cheap liveness answer.
 */

/** No loop iteration for this long means the worker is stuck (VAULT_ROLLOUT_READY_STUCK_SECONDS). */
export const DEFAULT_STUCK_AFTER_MS = 300_000;

export interface ServeReadinessState {
  queue: { probeWrite(): void };
  worker: { lastIterationAt(): number };
  stuckAfterMs: number;
  stopping: () => boolean;
  now?: () => number;
}

export function serveNotReady(state: ServeReadinessState): string[] {
  const reasons: string[] = [];
  if (state.stopping()) reasons.push('serve is stopping');
  try {
    state.queue.probeWrite();
  } catch (e) {
    // SQLite's messages name the condition (read-only, disk full, locked), never message content.
    reasons.push(`the queue cannot be written: ${e instanceof Error ? e.message : String(e)}`);
  }
  const silentMs = (state.now ?? Date.now)() - state.worker.lastIterationAt();
  if (silentMs > state.stuckAfterMs)
    reasons.push(
      `the worker loops are stuck: no iteration for ${Math.round(silentMs / 1000)} s (bound ${Math.round(state.stuckAfterMs / 1000)} s)`,
    );
  return reasons;
}

/** VAULT_ROLLOUT_READY_STUCK_SECONDS, or the default. */
export function stuckAfterMsFromEnv(env: Readonly<Record<string, string | undefined>>): number {
  const text = env.VAULT_ROLLOUT_READY_STUCK_SECONDS;
  if (text === undefined || text === '') return DEFAULT_STUCK_AFTER_MS;
  const seconds = Number(text);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 86_400)
    throw new Error('VAULT_ROLLOUT_READY_STUCK_SECONDS must be a whole number of seconds from 1 to 86400');
  return seconds * 1000;
}
