/**
 * The safety controls a plan's routes carry, as a person reads them before anything happens: a maintenance window,
 * an approval before each later wave, a restart breaker, notify-only. Without them here, a plan would read as if
 * everything restarted now.
 */
import { formatDuration } from '../kernel/duration.ts';
import type { Plan } from '../plan/planner.ts';
import type { CompiledRoute } from '../routing/table-model.ts';

/** One route's controls, in the order they act; none: undefined. */
export function routeControls(route: CompiledRoute): string | undefined {
  const { policy } = route;
  // A notify-only route patches nothing: its windows, approvals and breaker never act.
  if (route.mode === 'notify') return 'notify-only: nothing is patched, its sinks get what would restart';
  const parts: string[] = [];
  if (policy.window) parts.push(`window ${policy.window.text}`);
  policy.waveWindows?.forEach((w, i) => {
    if (w) parts.push(`wave ${i + 1} window ${w.text}`);
  });
  if (policy.gate.approval === true && (policy.waves?.length ?? 0) > 1)
    parts.push('each later wave waits for vault-rollout approve');
  if (policy.breaker)
    parts.push(
      `breaker: at most ${policy.breaker.restarts} restarts of a workload within ${formatDuration(policy.breaker.withinMs)}, then a halt`,
    );
  return parts.length === 0 ? undefined : parts.join('; ');
}

/** The controls of the routes this plan reaches, one line each; nothing when none has any. */
export function controlsText(plan: Plan, routes: readonly CompiledRoute[]): string[] {
  const reached = new Set(plan.routed.flat());
  const lines = routes.flatMap((route) => {
    const controls = reached.has(route.name) ? routeControls(route) : undefined;
    return controls === undefined ? [] : [`  ${route.name}: ${controls}`];
  });
  return lines.length === 0 ? [] : ['', 'Controls:', ...lines];
}
