/**
 * Maintenance windows in the foreground (`apply`): a wave whose window is closed is not restarted and not waited
 * for here (a window may be days away): its targets, and those of every later wave, are read (never patched) and
 * reported `deferred`, "waits for its window (opens …)". The change restarts when it is applied again inside the
 * window, or through serve or the queue, whose worker waits for the window as a continuation.
 */
import type { RolloutResult } from '../engine/types.ts';
import { NOT_RESTARTED_YET } from '../engine/rollout-executor.ts';
import type { RolloutTarget } from '../plan/planner.ts';
import { clusterWindows, waitsForWindow, windowState } from '../plan/restart-window.ts';
import type { ChangeSet } from '../plan/waves.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { executeRollouts, type ExecutorSettings } from './kube-executor.ts';

/** When the wave's window opens, or undefined when it is open (or it has none). */
export function waveWindowClosedUntil(set: ChangeSet, index: number, now: number): number | undefined {
  const wave = set.waves[index];
  const cluster = wave?.clusters[0];
  if (cluster === undefined) return undefined;
  const state = windowState(clusterWindows([set], cluster), now);
  return state.open ? undefined : state.opensAt;
}

/** The targets of a closed window, read and reported deferred (what is already on the version stays `unchanged`). */
export async function deferredForWindow(
  table: RoutingTable,
  targets: readonly RolloutTarget[],
  executor: ExecutorSettings,
  opensAt: number,
): Promise<RolloutResult[]> {
  const { follow: _follow, ...reading } = executor;
  const results = await executeRollouts(table, [...targets], { ...reading, observeOnly: true });
  return results.map((r) =>
    r.outcome === 'skipped' && r.reason === NOT_RESTARTED_YET
      ? { ...r, outcome: 'deferred', reason: waitsForWindow(opensAt), detail: '' }
      : r,
  );
}
