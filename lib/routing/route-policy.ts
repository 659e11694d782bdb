/**
 * The policies of a route in the routing table (lib/routing/routing-table.ts): how its restarts roll out (waves,
 * gate, failure, settle) and where its notifications go, each the top level's with the route's own over it.
 */
import type { BreakerSettings } from './breaker-schema.ts';
import type { NotificationsSettings } from './notifications-schema.ts';
import { NotificationEvents } from './notifications-schema.ts';
import { parseDuration, type RolloutSettings, type Route, type RoutingTableDocument } from './schema.ts';
import { policyWindows } from './restart-window.ts';
import { selectClusters } from './select-clusters.ts';
import { compileWaveTargets } from './wave-targets.ts';
import type { FieldPath } from './table-problems.ts';
import {
  DEFAULT_GATE_TIMEOUT_MS,
  DEFAULT_PROGRESSING_AFTER_MS,
  type CompiledRoute,
  type NotificationPolicy,
  type RolloutPolicy,
} from './table-model.ts';

/**
 * The top-level notifications with a route's over them: sinks merged by name, events replaced, the limit overridden.
 */
export function notificationPolicy(
  top: NotificationsSettings | undefined,
  own: NotificationsSettings | undefined,
): NotificationPolicy {
  const after = own?.progressingAfter ?? top?.progressingAfter;
  return {
    sinks: new Map(Object.entries({ ...top?.sinks, ...own?.sinks })),
    events: new Set(own?.events ?? top?.events ?? NotificationEvents),
    progressingAfterMs: (after === undefined ? undefined : parseDuration(after)) ?? DEFAULT_PROGRESSING_AFTER_MS,
  };
}

/** `rollout.breaker` compiled: the route's own, else the top level's (a whole block, never merged field by field). */
const breakerPolicy = (b: BreakerSettings | undefined): Pick<RolloutPolicy, 'breaker'> => {
  const withinMs = b === undefined ? undefined : parseDuration(b.within);
  return b === undefined || withinMs === undefined ? {} : { breaker: { restarts: b.restarts, withinMs } };
};

/** `mode: notify` on the compiled routes whose route says so (route names are unique). */
export function markNotifyRoutes(compiled: readonly CompiledRoute[], routes: readonly Pick<Route, 'name' | 'mode'>[]) {
  const notify = new Set(routes.filter((r) => r.mode === 'notify').map((r) => r.name));
  for (const route of compiled) if (notify.has(route.name)) route.mode = 'notify';
}

/**
 * Cluster names per wave; a cluster already in an earlier wave is not repeated, unless that wave selected only some
 * of its targets (`targets:`): the rest of them may follow in a later wave.
 */
export function compileWaves(
  doc: RoutingTableDocument,
  waves: NonNullable<RolloutSettings['waves']>,
  report: (path: FieldPath, message: string) => void,
): string[][] {
  const seen = new Set<string>();
  return waves.map((wave, i) => {
    const names = selectClusters(doc, wave.clusters, (m) => report([i, 'clusters'], m)).filter((n) => !seen.has(n));
    if (wave.targets === undefined) for (const n of names) seen.add(n);
    return names;
  });
}

/** The rollout policy of a route: its own settings over the top level's, with the defaults for what neither gives. */
export function compilePolicy(
  doc: RoutingTableDocument,
  top: RolloutSettings | undefined,
  own: RolloutSettings | undefined,
  report: (path: FieldPath, message: string) => void,
  defaultWaves: string[][] | undefined,
): RolloutPolicy {
  const ms = (t: string | undefined, fallback: number) => (t === undefined ? fallback : (parseDuration(t) ?? fallback));
  const gate = { ...top?.gate, ...own?.gate };
  const waves =
    own?.waves !== undefined
      ? compileWaves(doc, own.waves, (path, message) => report(['waves', ...path], message))
      : defaultWaves;
  const waveTargets = compileWaveTargets(own?.waves ?? top?.waves);
  return {
    ...(waves === undefined ? {} : { waves }),
    ...(waves === undefined || waveTargets === undefined ? {} : { waveTargets }),
    gate: {
      healthy: gate.healthy ?? true,
      timeoutMs: ms(gate.timeout, DEFAULT_GATE_TIMEOUT_MS),
      pauseMs: ms(gate.pause, 0),
      ...(gate.approval === true ? { approval: true } : {}),
    },
    onFailure: own?.onFailure ?? top?.onFailure ?? 'halt',
    settleMs: ms(own?.settle ?? top?.settle, 0),
    ...breakerPolicy(own?.breaker ?? top?.breaker),
    ...policyWindows(top, own),
  };
}
