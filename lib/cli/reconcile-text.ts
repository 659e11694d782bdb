/**
 * reconcile's report as text: the routes as expanded against Vault, each path's current version, the workloads not
 * current, halted rotations, and what became of what is behind (queued, worked here, or nothing in a dry run).
 */
import type { RolloutResult } from '../engine/types.ts';
import type { ReconcileReport } from '../pipeline/reconcile.ts';
import { table as renderTable } from '../report/table.ts';
import { counted } from './output.ts';

/** A result as the worker logs it (the fields a report needs). */
export type WorkedResult = Pick<RolloutResult, 'cluster' | 'namespace' | 'kind' | 'name' | 'outcome' | 'reason'>;

export function reconcileText(
  report: ReconcileReport,
  results: readonly WorkedResult[],
  vaultRequests: number,
  seconds: number,
  queueUrl?: string,
): string {
  const counts = Object.fromEntries(
    ['current', 'recorded', 'behind', 'failed'].map((s) => [s, report.workloads.filter((w) => w.state === s).length]),
  );
  const out: string[] = [...routesSection(report), ...pathsSection(report), ...workloadsSection(report, counts)];
  for (const p of report.plan.problems) out.push(`plan problem: route ${p.route}, ${p.path}: ${p.error}`);
  for (const h of report.halted)
    out.push(
      '',
      `HALTED, not queued: rotation ${h.rotation} (${h.secrets.join(', ')}) halted at wave ${h.wave} of ${h.waves}: ${h.why}. Clear it with: vault-rollout halts clear ${h.rotation}`,
    );
  out.push(...outcomeSection(report, results, counts.behind ?? 0, queueUrl));
  out.push(`Vault: ${vaultRequests} requests; ${seconds.toFixed(2)} s.`);
  return `${out.join('\n')}\n`;
}

/** The routes, as expanded against Vault, with KV v1 routes and path errors said. */
function routesSection(report: ReconcileReport): string[] {
  const out: string[] = [];
  out.push(`Routes (${report.routes.length}), expanded against Vault's KV v2 metadata:`);
  out.push(
    renderTable(
      ['ROUTE', 'PATTERN', 'MOUNT', 'PATHS', 'LISTS', 'NOTE'],
      report.routes.map((r) => [
        r.route,
        r.namespace ? `${r.namespace}/${r.pattern}` : r.pattern,
        r.mount ?? '-',
        String(r.paths),
        String(r.lists),
        r.truncated ? `TRUNCATED: ${r.truncated}` : (r.reason ?? ''),
      ]),
    ),
  );
  const kv1 = report.routes.filter((r) => r.status === 'kv1');
  if (kv1.length > 0)
    out.push(
      `KV v1 (no versions): reconcile cannot see changes of ${kv1.map((r) => r.route).join(', ')}; only the change feed restarts for them.`,
    );
  for (const e of report.pathErrors) out.push(`ERROR ${e.path}: ${e.error}`);
  return out;
}

/** Each path's current version. */
function pathsSection(report: ReconcileReport): string[] {
  const out: string[] = [];
  out.push('', `Paths (${report.paths.length}): current versions`);
  if (report.paths.length > 0)
    out.push(
      renderTable(
        ['PATH', 'VERSION', 'STATE', 'SINCE'],
        report.paths.map((p) => [
          p.path,
          String(p.version),
          p.operation === 'write' ? 'current' : `${p.operation}d`,
          p.time,
        ]),
      ),
    );
  return out;
}

/** The workloads counted by state, and every one not current in a table. */
function workloadsSection(report: ReconcileReport, counts: Record<string, number>): string[] {
  const out: string[] = [];
  out.push(
    '',
    `Workloads (${report.workloads.length}): ${counts.current} current, ${counts.recorded} running the current version (recorded without a restart), ${counts.behind} behind, ${counts.failed} failed`,
  );
  const shown = report.workloads.filter((w) => w.state !== 'current');
  if (shown.length > 0)
    out.push(
      renderTable(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'STATE', 'PATHS', 'DETAIL'],
        shown.map((w) => [
          w.cluster,
          w.namespace,
          w.kind,
          w.name,
          w.state.toUpperCase(),
          w.paths.join(', '),
          w.detail ?? '',
        ]),
      ),
    );
  return out;
}

/** What became of what is behind: nothing (dry run), queued on SQS, or worked here with each result. */
function outcomeSection(
  report: ReconcileReport,
  results: readonly WorkedResult[],
  behind: number,
  queueUrl: string | undefined,
): string[] {
  const out: string[] = [];
  if (report.dryRun)
    out.push('', `DRY RUN: nothing recorded, nothing queued; ${counted(behind, 'workload')} would restart.`);
  else if (queueUrl)
    out.push(
      '',
      `Queued ${counted(report.queued.changes, 'change')} in ${counted(report.queued.messages, 'message')} on ${queueUrl}.`,
    );
  else if (results.length > 0) {
    out.push(
      '',
      `Worked here (no --queue-url): ${counted(report.queued.changes, 'change')} in ${counted(report.queued.messages, 'message')}:`,
    );
    out.push(
      renderTable(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'OUTCOME', 'REASON'],
        results.map((r) => [r.cluster, r.namespace, r.kind, r.name, r.outcome, r.reason]),
      ),
    );
  } else out.push('', 'Nothing is behind: nothing queued.');
  return out;
}
