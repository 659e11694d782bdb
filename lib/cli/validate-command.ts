import { EXIT, type CliIo } from './io.ts';
import { printData } from './output.ts';
import { loadRoutes } from './shared.ts';
import { parseCommand } from './spec.ts';
import { validate as spec } from './specs.ts';

export async function validateCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const file = args.args[0] ?? '';
  const table = await loadRoutes(io, file);
  if (typeof table === 'number') return table;
  const summary = { file, ok: true, clusters: table.clusters.size, routes: table.routes.length, targets: table.routes.reduce((n, r) => n + r.targets.length, 0), mounts: table.mounts.size };
  printData(io, args.values.output, () => summary, () => `${file}: ok (${summary.clusters} clusters, ${summary.routes} routes, ${summary.targets} targets, ${summary.mounts} KV mounts)\n`);
  return EXIT.ok;
}
