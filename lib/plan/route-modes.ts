/**
 * A route's `mode`: `restart` (the default) or `notify`. A notify route's targets are planned as any others and
 * decided from their records, then announced instead of patched: the engine answers them `skipped` with
 * NOTIFY_ONLY_REASON, and the worker sends what would restart to the route's sinks (lib/pipeline/route-refusals.ts).
 */
import type { RoutingTable } from '../routing/routing-table.ts';

/** The skip reason of a target only notify routes reach: `apply` prints it, the notification lists it. */
export const NOTIFY_ONLY_REASON = 'would restart (notify-only route)';

/**
 * True when every route of the target that the table knows is a notify route: a target that a restart route also
 * reaches restarts (that route asks for it).
 */
export function notifyOnly(table: RoutingTable, routes: readonly string[]): boolean {
  const own = table.routes.filter((r) => routes.includes(r.name));
  return own.length > 0 && own.every((r) => r.mode === 'notify');
}
