import { parseArgs } from 'node:util';
import { executeRollouts } from '../kube/rollout-executor.ts';
import { planRollouts } from '../plan/planner.ts';
import { resultsJson, resultsText } from '../report/results-report.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { INPUT_OPTIONS, loadChanges, reportRejected, usageError } from './shared.ts';

/** `vault-rollout apply`: plan, then restart. Exit 0 when no target failed, 3 when any did, 2 for unparsable records. */
export async function applyCommand(argv: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { ...INPUT_OPTIONS, 'dry-run': { type: 'boolean', default: false } }, strict: true, allowPositionals: false }));
  } catch (e) {
    return usageError(io, 'apply', e);
  }
  const loaded = await loadChanges(io, 'apply', values);
  if (typeof loaded === 'number') return loaded;
  const { table, parsed } = loaded;
  const plan = planRollouts(table, parsed.changes);
  const clients = cliClusterClients(io, values.routes ?? '');
  const results = await executeRollouts(table, plan.targets, {
    access: (name, config) => clients.get(name, config),
    dryRun: values['dry-run'],
    logger: { warn: (m, f) => io.stderr(`warning: ${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`) },
  });
  io.stdout(values.json ? `${JSON.stringify(resultsJson(parsed, plan, results), null, 2)}\n` : resultsText(parsed, plan, results));
  reportRejected(io, 'apply', values.input, parsed);
  if (results.some((r) => r.outcome === 'failed')) return EXIT.targetsFailed;
  return parsed.rejected.length > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
