/**
 * The restart breaker (`rollout.breaker`), pure: one workload's counted restarts, and whether one more may go. A
 * restart is counted by its restart token, so a redelivered message, a retry after a conflict or a worker killed
 * after its patch counts the same restart once; the store (lib/rotations) keeps the history and applies this
 * decision in one conditional write. Counted before the patch: a restart whose patch then fails still counts, so the
 * breaker errs toward refusing, never toward one restart too many.
 */
import { formatDuration } from '../kernel/duration.ts';
import { MAX_BREAKER_RESTARTS, MAX_BREAKER_WINDOW_MS } from '../routing/breaker-schema.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';

export interface BreakerLimit {
  restarts: number;
  withinMs: number;
}

/** One counted restart: its token and when it was counted (epoch ms). */
export interface BreakerEntry {
  token: string;
  at: number;
}

export type BreakerVerdict = { allowed: true } | { allowed: false; why: string; counted: number };

/** The halt's `failing.state` of a breaker's refusal: what `halts clear` recognises to reset the breaker. */
export const BREAKER_STATE = 'breaker';

/** The engine's port: counts this restart of the workload unless it would be one too many. */
export type RestartBreakerPort = (
  workload: WorkloadRef,
  restartToken: string,
  limit: BreakerLimit,
) => Promise<BreakerVerdict>;

/** The key the store counts under: the workload, as cluster/namespace/kind/name. */
export const breakerKey = (w: Pick<WorkloadRef, 'cluster' | 'namespace' | 'kind' | 'name'>): string =>
  `${w.cluster}/${w.namespace}/${w.kind}/${w.name}`;

/** The breaker of a target: that of the first of its routes, in table order, that sets one. */
export function breakerFor(table: RoutingTable, routes: readonly string[]): BreakerLimit | undefined {
  return table.routes.find((r) => routes.includes(r.name) && r.policy.breaker !== undefined)?.policy.breaker;
}

/**
 * Whether the restart `token` may go now, and the history to keep: what the longest window (30 days) still
 * covers, at most MAX_BREAKER_RESTARTS entries, with this token added when it goes. A token already counted goes
 * again without counting (the same restart, seen again).
 */
export function decideBreaker(
  history: readonly BreakerEntry[],
  token: string,
  now: number,
  limit: BreakerLimit,
): { verdict: BreakerVerdict; history: BreakerEntry[] } {
  const kept = history
    .filter((e) => typeof e.token === 'string' && Number.isFinite(e.at) && now - e.at < MAX_BREAKER_WINDOW_MS)
    .sort((a, b) => a.at - b.at);
  if (kept.some((e) => e.token === token)) return { verdict: { allowed: true }, history: kept };
  const inWindow = kept.filter((e) => now - e.at < limit.withinMs);
  if (inWindow.length >= limit.restarts) {
    const oldest = inWindow[0] as BreakerEntry;
    const window = formatDuration(limit.withinMs);
    const why =
      `restart breaker: ${inWindow.length} restart${inWindow.length === 1 ? '' : 's'} within ${window} ` +
      `(rollout.breaker allows ${limit.restarts}), the first at ${new Date(oldest.at).toISOString()}; this one is ` +
      `refused until ${new Date(oldest.at + limit.withinMs).toISOString()}, or until the halt is cleared`;
    return { verdict: { allowed: false, why, counted: inWindow.length }, history: kept };
  }
  return {
    verdict: { allowed: true },
    history: [...kept, { token, at: now }].slice(-MAX_BREAKER_RESTARTS),
  };
}

/** Reads a stored history back; entries that are not ones are dropped, anything unreadable is an empty history. */
export function parseBreakerHistory(text: string | undefined): BreakerEntry[] {
  if (text === undefined) return [];
  try {
    const v: unknown = JSON.parse(text);
    if (!Array.isArray(v)) return [];
    return v.flatMap((e: unknown) => {
      const { token, at } = (e ?? {}) as Partial<BreakerEntry>;
      return typeof token === 'string' && typeof at === 'number' && Number.isFinite(at) ? [{ token, at }] : [];
    });
  } catch {
    return [];
  }
}
