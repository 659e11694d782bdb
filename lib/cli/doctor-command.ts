import { parseArgs } from 'node:util';
import { runDoctor } from '../deploy/doctor.ts';
import { table as textTable } from '../report/table.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';

/** `vault-rollout doctor`: checks every cluster of the routing table; exit 1 on any problem, with what to fix. */
export async function doctorCommand(argv: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { routes: { type: 'string' }, json: { type: 'boolean', default: false } }, strict: true, allowPositionals: false }));
  } catch (e) {
    return usageError(io, 'doctor', e);
  }
  if (values.routes === undefined) return usageError(io, 'doctor', 'missing --routes FILE');
  const table = await loadRoutes(io, values.routes);
  if (typeof table === 'number') return table;
  const clients = cliClusterClients(io, values.routes);
  const checks = await runDoctor(table, { access: (name, config) => clients.get(name, config) });
  const problems = checks.filter((c) => !c.ok);
  if (values.json) io.stdout(`${JSON.stringify({ ok: problems.length === 0, checks }, null, 2)}\n`);
  else {
    io.stdout(`${textTable(['CLUSTER', 'CHECK', 'RESULT', 'DETAIL'], checks.map((c) => [c.cluster, c.check, c.ok ? 'ok' : 'PROBLEM', c.detail]))}\n`);
    if (problems.length > 0) io.stdout(`\n${problems.length} problem(s). To fix:\n${problems.map((p) => `  ${p.cluster}: ${p.check}: ${p.detail}${p.fix ? `\n    fix: ${p.fix}` : ''}`).join('\n')}\n`);
    else io.stdout('\nNo problems.\n');
  }
  return problems.length === 0 ? EXIT.ok : EXIT.failure;
}
