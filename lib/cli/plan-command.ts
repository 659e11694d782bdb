import { parseArgs } from 'node:util';
import { planRollouts } from '../plan/planner.ts';
import { planJson, planText } from '../report/plan-report.ts';
import { InputFormats, parseStream, type InputFormat } from '../sources/parse.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';

export async function planCommand(argv: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { routes: { type: 'string' }, input: { type: 'string', default: '-' }, format: { type: 'string', default: 'auto' }, json: { type: 'boolean', default: false } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    return usageError(io, 'plan', e);
  }
  if (values.routes === undefined) return usageError(io, 'plan', 'missing --routes FILE');
  if (!(InputFormats as readonly string[]).includes(values.format)) return usageError(io, 'plan', `--format must be one of ${InputFormats.join(', ')}`);

  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  let parsed;
  try {
    parsed = await parseStream(io.openInput(values.input), { format: values.format as InputFormat, mounts: table.mounts });
  } catch (e) {
    io.stderr(`vault-rollout plan: cannot read ${values.input === '-' ? 'standard input' : values.input}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
    return EXIT.failure;
  }
  const plan = planRollouts(table, parsed.changes);
  io.stdout(values.json ? `${JSON.stringify(planJson(parsed, plan), null, 2)}\n` : planText(parsed, plan));
  for (const r of parsed.rejected) io.stderr(`vault-rollout plan: ${values.input === '-' ? 'stdin' : values.input}: ${r.record}: ${r.error}\n`);
  return parsed.rejected.length > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
