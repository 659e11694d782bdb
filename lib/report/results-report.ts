/** How rollout results are shown: the JSON of `apply --json` and the table a person reads. */
import type { RolloutResult } from '../engine/types.ts';
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

export function summarizeRollouts(results: readonly RolloutResult[]): string {
  const counts = new Map<string, number>();
  for (const r of results) if (r.rollout) counts.set(r.rollout, (counts.get(r.rollout) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ') || 'none followed';
}

export function resultsText(parsed: ParseResult, plan: Plan, results: readonly RolloutResult[]): string {
  const records = parsed.changes.length + parsed.ignored.length + parsed.rejected.length;
  const out = [
    `Changes: ${parsed.changes.length} of ${records} records (${parsed.ignored.length} ignored, ${parsed.rejected.length} rejected); targets: ${plan.targets.length}`,
    `Results: ${summarize(results)}`,
  ];
  const followed = results.some((r) => r.rollout !== undefined);
  if (followed) out.push(`Rollouts: ${summarizeRollouts(results)}`);
  if (results.length > 0 && !followed) {
    out.push(
      table(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'OUTCOME', 'REASON', 'ATTEMPTS', 'MS'],
        results.map((r) => [
          r.cluster,
          r.namespace || '-',
          r.kind,
          r.name,
          r.outcome,
          [r.reason, r.detail].filter(Boolean).join(': '),
          String(r.attempts),
          r.durationMs.toFixed(0),
        ]),
      ),
    );
  } else if (results.length > 0) {
    // Followed: the rollout's own columns, and its reason where the patch had none to give.
    out.push(
      table(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'OUTCOME', 'ROLLOUT', 'READY', 'ROLLOUT S', 'REASON'],
        results.map((r) => [
          r.cluster,
          r.namespace || '-',
          r.kind,
          r.name,
          r.outcome,
          r.rollout ?? '-',
          r.pods ? `${r.pods.ready}/${r.pods.desired}` : '-',
          r.rolloutMs === undefined ? '-' : (r.rolloutMs / 1000).toFixed(1),
          [r.reason, r.detail, r.rollout === 'complete' ? undefined : r.rolloutReason].filter(Boolean).join(': '),
        ]),
      ),
    );
  }
  for (const p of plan.problems) out.push(`not planned: ${p.record}: route ${p.route}: ${p.error}`);
  return `${out.join('\n')}\n`;
}
