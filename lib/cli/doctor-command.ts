import { runDoctor } from '../deploy/doctor.ts';
import { table as textTable } from '../report/table.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { counted, printData, withWaitIndicator } from './output.ts';
import { parseCommand } from './spec.ts';
import { doctor as spec } from './specs.ts';

/** `vault-rollout doctor`: checks every cluster of the routing table; exit 1 on any problem, with what to fix. */
export async function doctorCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined) return usageError(io, 'doctor', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  const table = await loadRoutes(io, values.routes, { command: 'doctor', values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  const clients = cliClusterClients(io, values.routes);
  const checks = await withWaitIndicator(io, values.quiet, `checking ${table.clusters.size} clusters`, () =>
    runDoctor(table, { access: (name, config) => clients.get(name, config) }),
  );
  const problems = checks.filter((c) => !c.ok);
  printData(
    io,
    values.output,
    () => ({ ok: problems.length === 0, checks }),
    () =>
      `${textTable(
        ['CLUSTER', 'CHECK', 'RESULT', 'DETAIL'],
        checks.map((c) => [c.cluster, c.check, c.ok ? 'ok' : 'PROBLEM', c.detail]),
      )}\n` +
      (problems.length > 0
        ? `\n${counted(problems.length, 'problem')}. To fix:\n${problems.map((p) => `  ${p.cluster}: ${p.check}: ${p.detail}${p.fix ? `\n    fix: ${p.fix}` : ''}`).join('\n')}\n`
        : '\nNo problems.\n'),
  );
  return problems.length === 0 ? EXIT.ok : EXIT.failure;
}
