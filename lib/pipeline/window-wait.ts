/**
 * Maintenance windows in the worker: a cluster message whose restarts may start only inside a window
 * (`rollout.window`, `rollout.waves[i].window`) that is closed now waits for it as a continuation, never in line.
 * It leaves the cluster's group at once — a fresh copy goes to the group of the window's opening
 * (`windowGroupId`) — and that copy is held, at most MAX_WINDOW_LOOK_MS a time, until the window opens. Every change
 * of the cluster waiting for the same opening shares that group, so they come back together and are worked as one
 * plan (lib/pipeline/message-units.ts): the newest version of each secret restarts, once, and an older version
 * that comes back on its own finds the workload recording the newer one (skipped as an older version).
 *
 * The window is computed at every look from the worker's own table and clock; a message's `window` only says where
 * it waits, so no sender can make a restart start outside its window.
 */
import { changeSets } from '../plan/cluster-changes.ts';
import type { Plan } from '../plan/planner.ts';
import { clusterWindows, waitsForWindow, windowState } from '../plan/restart-window.ts';
import { MAX_WINDOW_ROUNDS, type RolloutMessage } from '../queue/rollout-message.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { lookAgainAfter } from './look-again.ts';
import type { BatchOutcome, QueueRecord, WorkerDeps } from './worker-deps.ts';

/** The longest one wait for a window lasts before the message is looked at again (as a held copy's longest hold). */
export const MAX_WINDOW_LOOK_MS = 15 * 60_000;

/** What the window check needs of a planned cluster unit. */
export interface WindowedUnit {
  records: readonly QueueRecord[];
  planned: { message: RolloutMessage; changes: readonly SecretChange[]; plan: Plan };
}

/**
 * True when the unit's window is closed: the unit was handed back to wait for it (or, when it could not be, marked
 * for redelivery) and must not be worked now. False: open (or no window), work it.
 */
export async function waitsForItsWindow(
  unit: WindowedUnit,
  deps: WorkerDeps,
  outcome: BatchOutcome,
  now: number,
): Promise<boolean> {
  const { message, changes, plan } = unit.planned;
  if (message.follow) return false;
  const state = windowState(clusterWindows(changeSets(deps.table, changes, plan), message.cluster), now);
  if (state.open) return false;
  const opensAt = new Date(state.opensAt).toISOString();
  const ms = Math.max(1, Math.min(MAX_WINDOW_LOOK_MS, state.opensAt - now));
  const fields = {
    messageId: unit.records.map((r) => r.messageId).join(','),
    cluster: message.cluster,
    window: state.window,
    why: waitsForWindow(state.opensAt),
  };
  if (deps.windowClosed) {
    deps.telemetry.info('not restarted: outside its maintenance window', fields);
    deps.windowClosed({ cluster: message.cluster, window: state.window, opensAt });
    return true;
  }
  const waiting = message.window;
  const handed = await lookAgainAfter(deps, outcome, {
    records: unit.records,
    ms,
    // From the cluster's group it always leaves (a wait there would hold the cluster's next change).
    resend: waiting === undefined,
    fields,
    fresh: (lookAt) =>
      waiting === undefined
        ? { ...message, window: { opensAt, round: 0, lookAt } }
        : waiting.round >= MAX_WINDOW_ROUNDS
          ? undefined
          : { ...message, window: { opensAt: waiting.opensAt, round: waiting.round + 1, lookAt } },
  });
  if (!handed) outcome.failed.push(...unit.records.map((r) => r.messageId));
  return true;
}
