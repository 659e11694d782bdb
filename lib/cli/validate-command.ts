import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';

export async function validateCommand(argv: string[], io: CliIo): Promise<number> {
  const files = argv.filter((a) => a !== '--');
  if (files.length !== 1 || files[0]?.startsWith('-')) return usageError(io, 'validate', 'give exactly one routing table file');
  const file = files[0] ?? '';
  const table = await loadRoutes(io, file);
  if (typeof table === 'number') return table;
  const targets = table.routes.reduce((n, r) => n + r.targets.length, 0);
  io.stdout(`${file}: ok (${table.clusters.size} clusters, ${table.routes.length} routes, ${targets} targets, ${table.mounts.size} KV mounts)\n`);
  return EXIT.ok;
}
