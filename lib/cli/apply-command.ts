import { parseArgs } from 'node:util';
import { executeRollouts } from '../kube/rollout-executor.ts';
import { planRollouts } from '../plan/planner.ts';
import { resultsJson, resultsText } from '../report/results-report.ts';
import { InputFormats, parseStream, type InputFormat } from '../sources/parse.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';

/** `vault-rollout apply`: plan, then restart. Exit 0 when no target failed, 3 when any did, 2 for unparsable records. */
export async function applyCommand(argv: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { routes: { type: 'string' }, input: { type: 'string', default: '-' }, format: { type: 'string', default: 'auto' }, 'dry-run': { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    return usageError(io, 'apply', e);
  }
  if (values.routes === undefined) return usageError(io, 'apply', 'missing --routes FILE');
  if (!(InputFormats as readonly string[]).includes(values.format)) return usageError(io, 'apply', `--format must be one of ${InputFormats.join(', ')}`);
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  let parsed;
  try {
    parsed = await parseStream(io.openInput(values.input), { format: values.format as InputFormat, mounts: table.mounts });
  } catch (e) {
    io.stderr(`vault-rollout apply: cannot read ${values.input === '-' ? 'standard input' : values.input}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
    return EXIT.failure;
  }
  const plan = planRollouts(table, parsed.changes);
  const clients = cliClusterClients(io, values.routes);
  const results = await executeRollouts(table, plan.targets, {
    access: (name, config) => clients.get(name, config),
    dryRun: values['dry-run'],
    logger: { warn: (m, f) => io.stderr(`warning: ${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`) },
  });
  io.stdout(values.json ? `${JSON.stringify(resultsJson(parsed, plan, results), null, 2)}\n` : resultsText(parsed, plan, results));
  for (const r of parsed.rejected) io.stderr(`vault-rollout apply: ${values.input === '-' ? 'stdin' : values.input}: ${r.record}: ${r.error}\n`);
  if (results.some((r) => r.outcome === 'failed')) return EXIT.targetsFailed;
  return parsed.rejected.length > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
