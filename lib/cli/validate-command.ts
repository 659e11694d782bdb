import { EXIT, type CliIo } from './io.ts';
import { counted, printData } from './output.ts';
import { readRoutes } from './shared.ts';
import { parseCommand } from './spec.ts';
import { validate as spec } from './specs.ts';
import { formatProblem } from '../routing/routing-table.ts';

/**
 * `vault-rollout validate FILE`: ok with a summary, or every problem. With -o json|yaml the verdict is a document on
 * stdout either way (`ok: false` and the problems with line, column and field), so a script or an editor reads one
 * format; the exit code says the same.
 */
export async function validateCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const file = args.args[0] ?? '';
  const output = args.values.output;
  const read = await readRoutes(io, file);
  if ('table' in read) {
    const { table } = read;
    const summary = {
      file,
      ok: true,
      clusters: table.clusters.size,
      routes: table.routes.length,
      targets: table.routes.reduce((n, r) => n + r.targets.length, 0),
      mounts: table.mounts.size,
    };
    const counts = [
      counted(summary.clusters, 'cluster'),
      counted(summary.routes, 'route'),
      counted(summary.targets, 'target'),
      counted(summary.mounts, 'KV mount'),
    ];
    printData(io, output, () => summary, () => `${file}: ok (${counts.join(', ')})\n`);
    return EXIT.ok;
  }
  // A file that cannot be read is one problem of the whole file: no line, no field.
  const problems =
    'problems' in read
      ? read.problems
      : [{ file, line: 0, column: 0, field: '', message: `cannot read the routing table: ${read.unreadable}` }];
  if (output === 'json' || output === 'yaml') {
    const listed = problems.map(({ line, column, field, message }) => ({ line, column, field, message }));
    const document = { file, ok: false, problems: listed };
    printData(io, output, () => document, () => '');
    return EXIT.failure;
  }
  if ('unreadable' in read) io.stderr(`vault-rollout validate: cannot read the routing table: ${read.unreadable}\n`);
  else {
    const count = counted(problems.length, 'problem');
    io.stderr(`${problems.map(formatProblem).join('\n')}\nvault-rollout validate: ${file}: ${count}\n`);
  }
  return EXIT.failure;
}
