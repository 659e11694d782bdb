import { isMap, LineCounter, parseDocument } from 'yaml';
import type { RoutingTable } from '../routing/table-model.ts';
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
    for (const w of kubeconfigWarnings(table))
      io.stderr(`${file}:${await lineOf(io, file, w.field)}: ${w.field}: warning: ${w.message}\n`);
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
    printData(
      io,
      output,
      () => summary,
      () => `${file}: ok (${counts.join(', ')})\n`,
    );
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
    printData(
      io,
      output,
      () => document,
      () => '',
    );
    return EXIT.failure;
  }
  if ('unreadable' in read) io.stderr(`vault-rollout validate: cannot read the routing table: ${read.unreadable}\n`);
  else {
    const count = counted(problems.length, 'problem');
    io.stderr(`${problems.map(formatProblem).join('\n')}\nvault-rollout validate: ${file}: ${count}\n`);
  }
  return EXIT.failure;
}

export interface TableWarning {
  /** The field's path in the table, e.g. clusters.alpha.kubeconfig.env. */
  field: string;
  message: string;
}

/**
 * Valid kubeconfig sources that fail when used, the way kubectl habits write them: `env: KUBECONFIG` (kubectl's
 * variable holds a file's path; `env:` reads the kubeconfig YAML itself from the variable) and `file: ~/…` (no shell
 * reads the routing table, so `~` is a directory named "~" next to it).
 */
export function kubeconfigWarnings(table: Pick<RoutingTable, 'clusters'>): TableWarning[] {
  const warnings: TableWarning[] = [];
  for (const [name, config] of table.clusters) {
    const source = config.kubeconfig;
    if (source === undefined) continue;
    if ('env' in source && source.env === 'KUBECONFIG') {
      warnings.push({
        field: `clusters.${name}.kubeconfig.env`,
        message: `KUBECONFIG holds the path of a kubeconfig file (kubectl's convention), but env: reads the variable's value as the kubeconfig YAML itself; write kubeconfig: { file: /path/to/kubeconfig } (absolute, or relative to the routing table), or keep the table and pass --cluster-kubeconfig ${name}=PATH`,
      });
    }
    if ('file' in source && source.file.startsWith('~')) {
      warnings.push({
        field: `clusters.${name}.kubeconfig.file`,
        message: `${source.file}: ~ is not expanded (no shell reads the routing table, so it names a directory "~" beside the table); write the absolute path (file: /home/you/${source.file.replace(/^~[^/]*\/?/, '')}) or one relative to the routing table, or pass --cluster-kubeconfig ${name}=${source.file} on the command line, where ~/ is your home`,
      });
    }
  }
  return warnings;
}

/** line:column of a field, for the file:line:column that validate's problems use; 1:1 when it cannot be found. */
async function lineOf(io: CliIo, file: string, field: string): Promise<string> {
  const lineCounter = new LineCounter();
  const doc = parseDocument(await io.readText(file), { lineCounter });
  let node: unknown = doc.contents;
  for (const key of field.split('.')) {
    if (!isMap(node)) break;
    node = node.get(key, true);
  }
  const offset = (node as { range?: [number] } | undefined)?.range?.[0];
  if (offset === undefined) return '1:1';
  const { line, col } = lineCounter.linePos(offset);
  return `${line}:${col}`;
}
