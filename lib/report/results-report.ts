/** How rollout results are shown: the JSON of `apply --json` and the table a person reads. */
import type { RolloutResult } from '../kube/rollout-executor.ts';
import type { Plan } from '../plan/planner.ts';
import type { ParseResult } from '../sources/secret-change.ts';
import { planJson } from './plan-report.ts';
import { table } from './table.ts';

export function resultsJson(parsed: ParseResult, plan: Plan, results: readonly RolloutResult[]) {
  return { ...planJson(parsed, plan), results };
}

export function summarize(results: readonly RolloutResult[]): string {
  const counts = new Map<string, number>();
  for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ') || 'nothing to do';
}

export function resultsText(parsed: ParseResult, plan: Plan, results: readonly RolloutResult[]): string {
  const records = parsed.changes.length + parsed.ignored.length + parsed.rejected.length;
  const out = [`Changes: ${parsed.changes.length} of ${records} records (${parsed.ignored.length} ignored, ${parsed.rejected.length} rejected); targets: ${plan.targets.length}`, `Results: ${summarize(results)}`];
  if (results.length > 0) {
    out.push(table(['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'OUTCOME', 'REASON', 'ATTEMPTS', 'MS'], results.map((r) => [r.cluster, r.namespace || '-', r.kind, r.name, r.outcome, [r.reason, r.detail].filter(Boolean).join(': '), String(r.attempts), r.durationMs.toFixed(0)])));
  }
  for (const p of plan.problems) out.push(`not planned: ${p.record}: route ${p.route}: ${p.error}`);
  return `${out.join('\n')}\n`;
}
