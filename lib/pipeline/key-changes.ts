/**
 * The intake's half of key-level restarts: for each routed change, in the order of the input, look up
 * the baseline of its path from the same audit device, decide which keys it changed (lib/plan/changed-keys.ts, pure),
 * store what the next write compares with, and put the changed keys on the change that goes on the queue. A store
 * that cannot be read or written costs nothing but precision: that change counts as every key.
 */
import { resolveChangedKeys, type KeyBaseline, type KeyResolution } from '../plan/changed-keys.ts';
import { KEY_BASELINE_TTL_MS, type KeyBaselineStore } from '../rotations/key-baselines.ts';
import { isSyncTarget, isWorkloadTarget, type RoutingTable } from '../routing/routing-table.ts';
import { qualify } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';

/**
 * Whether a target of the table may restart by keys: one that names them, a sync target (its consumers' keys are found
 * through the operator's resource) or a workload target (Vault Agent templates). Without one, nothing is compared or
 * stored.
 */
export const tableUsesKeys = (table: Pick<RoutingTable, 'routes'>): boolean =>
  table.routes.some((r) =>
    r.targets.some((t) => t.target.keys !== undefined || isSyncTarget(t.target) || isWorkloadTarget(t.target)),
  );

export interface KeyChangesResult {
  changes: SecretChange[];
  /** Changes whose store read or write failed (they count as every key). */
  storeErrors: number;
}

/**
 * The changes with `changedKeys` set where a comparison was possible. `routed[i]` says whether change i matched a
 * route (an unrouted path keeps no baseline). Never logs or returns a digest.
 */
export async function resolveKeyChanges(
  changes: readonly SecretChange[],
  routed: ReadonlyArray<readonly string[]>,
  store: KeyBaselineStore,
  nowMs: number,
  ttlMs = KEY_BASELINE_TTL_MS,
): Promise<KeyChangesResult> {
  const out: SecretChange[] = [];
  let storeErrors = 0;
  for (const [i, change] of changes.entries()) {
    if ((routed[i] ?? []).length === 0 || change.kvVersion !== 2) {
      out.push(change);
      continue;
    }
    const path = qualify(change.namespace, change.path);
    const device = change.keyDigests?.device();
    let resolution: KeyResolution;
    try {
      const previous: KeyBaseline | undefined =
        device === undefined ? undefined : await store.baseline(device, path, nowMs);
      resolution = resolveChangedKeys(previous, change);
      const { next } = resolution;
      if (next === 'clear') await store.clearBaselines(path);
      else if (next === 'forget') {
        if (device !== undefined) await store.forgetBaseline(device, path);
      } else if (next !== 'keep') await store.putBaseline(path, next, nowMs + ttlMs, nowMs);
    } catch {
      storeErrors++;
      resolution = { changed: 'all', next: 'keep', why: 'the baseline store failed: every key' };
    }
    out.push(
      resolution.changed === 'all' ? withoutChangedKeys(change) : { ...change, changedKeys: resolution.changed },
    );
  }
  return { changes: out, storeErrors };
}

/** A change as it came, minus changed keys a caller may have set (only this resolution sets them). */
function withoutChangedKeys(change: SecretChange): SecretChange {
  if (change.changedKeys === undefined) return change;
  const copy = { ...change };
  delete copy.changedKeys;
  return copy;
}
