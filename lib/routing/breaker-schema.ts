/**
 * Two route settings that bound what a route's changes may do: `rollout.breaker` (at most N restarts of one workload
 * within a window; the next is refused as a halt) and the route's `mode` (`notify`: say what would restart, patch
 * nothing). Kept apart from schema.ts so the table's schema gains each as one line.
 */
import { z } from 'zod';
import { durationSchema } from './schema-fields.ts';

/** The most restarts a breaker may allow in its window: a bound on the history the store keeps per workload. */
export const MAX_BREAKER_RESTARTS = 1000;
/** The breaker's window: from a minute to 30 days (the store forgets restarts older than the longest window). */
export const MIN_BREAKER_WINDOW_MS = 60_000;
export const MAX_BREAKER_WINDOW_MS = 30 * 86_400_000;

export const BreakerSchema = z
  .strictObject({
    restarts: z
      .number({ error: 'must be a whole number of restarts, 1 to 1000' })
      .int('must be a whole number of restarts, 1 to 1000')
      .min(1, 'allow at least 1 restart')
      .max(MAX_BREAKER_RESTARTS, `at most ${MAX_BREAKER_RESTARTS} restarts`)
      .describe('restarts of one workload (cluster/namespace/kind/name) allowed within the window'),
    within: durationSchema(MIN_BREAKER_WINDOW_MS, MAX_BREAKER_WINDOW_MS).describe(
      'the window the restarts are counted in, 1m to 720h (30 days)',
    ),
  })
  .describe(
    'a restart breaker per workload: the restart beyond `restarts` within `within` is refused as a halt (vault-rollout halts clear resets it)',
  );
export type BreakerSettings = z.infer<typeof BreakerSchema>;

export const RouteModes = ['restart', 'notify'] as const;
export type RouteMode = (typeof RouteModes)[number];

export const RouteModeSchema = z
  .enum(RouteModes)
  .describe(
    "restart (default): restart the targets; notify: plan as usual, patch nothing, and send the targets that would restart to the route's sinks",
  );
