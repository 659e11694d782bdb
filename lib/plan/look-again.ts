/**
 * The one waiting decision. Nothing in vault-rollout waits in line for the world — a rollout, a wave's
 * gate, an operator's sync, a settle window, a rollout slot: a step acts, takes ONE look at where things stand, and
 * this decides what becomes of it, the way controller-runtime's `Result{RequeueAfter}` and Argo Rollouts'
 * `enqueueRolloutAfter` do:
 *
 * - `finish`: nothing is left to wait for; the message is done.
 * - `expire`: its deadline has passed; what still waits is reported as timed out and the message is done.
 * - `lookAgainAfter(ms)`: hand the message back to the queue to be looked at again after `ms`
 *   (lib/pipeline/look-again.ts turns that into a visibility change or a fresh message for every runtime).
 *
 * Pure, so every wait is table-tested in one place.
 */

export type WaitDecision =
  { action: 'finish' } | { action: 'expire'; why: string } | { action: 'lookAgainAfter'; ms: number };

/** What one look found, and the clock of the wait it belongs to. */
export interface WaitInput {
  /** Something is still under way (a rollout progressing, a sync not written, a slot not free, a gate not ready). */
  pending: boolean;
  now: number;
  /** When the wait began (epoch ms): the first delays are short, later ones longer. */
  since: number;
  /**
   * When the wait gives up (epoch ms); undefined: the look decides its own end (a gate's timeout, a rollout's
   * deadline).
   */
  deadline?: number;
  /** When the thing waited on says itself when to look again (a gate's pause, a settle window), that delay. */
  hintMs?: number;
  /** Shortest and longest delay between looks (default 1 s and 15 s). */
  minMs?: number;
  maxMs?: number;
}

export const LOOK_MIN_MS = 1_000;
export const LOOK_MAX_MS = 15_000;

/**
 * finish | expire | lookAgainAfter(ms). Without a hint the delay grows with the time already waited — a quarter of
 * it, between `minMs` and `maxMs` — so a rollout of seconds is looked at again within a second or two and one of
 * minutes every 15 s (in a long-lived process a watch wakes the look earlier: lib/pipeline/rollout-waker.ts). A
 * delay never runs past the deadline: the last look lands on it.
 */
export function decideWait(input: WaitInput): WaitDecision {
  if (!input.pending) return { action: 'finish' };
  const { now } = input;
  if (input.deadline !== undefined && now >= input.deadline)
    return {
      action: 'expire',
      why: `still waiting ${Math.round((now - input.since) / 1000)} s after it began (deadline)`,
    };
  const minMs = input.minMs ?? LOOK_MIN_MS;
  const maxMs = Math.max(minMs, input.maxMs ?? LOOK_MAX_MS);
  const grown = Math.min(maxMs, Math.max(minMs, Math.round((now - input.since) / 4)));
  const wanted = input.hintMs === undefined ? grown : Math.max(1, input.hintMs);
  const ms = input.deadline === undefined ? wanted : Math.max(1, Math.min(wanted, input.deadline - now));
  return { action: 'lookAgainAfter', ms };
}
