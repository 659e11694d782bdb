import { loadRoutingTable, RoutingTableError, type RoutingTable } from '../routing/routing-table.ts';
import { EXIT, type CliIo } from './io.ts';

export function usageError(io: CliIo, command: string, e: unknown): number {
  io.stderr(`vault-rollout ${command}: ${e instanceof Error ? e.message : String(e)}\nRun "vault-rollout --help" for usage.\n`);
  return EXIT.usage;
}

/** Loads the routing table, or prints why not and returns the exit code. */
export async function loadRoutes(io: CliIo, file: string): Promise<RoutingTable | number> {
  let text: string;
  try {
    text = await io.readText(file);
  } catch (e) {
    io.stderr(`vault-rollout: cannot read routing table ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}\n`);
    return EXIT.failure;
  }
  try {
    return loadRoutingTable(text, file);
  } catch (e) {
    if (e instanceof RoutingTableError) {
      io.stderr(`${e.message}\n`);
      return EXIT.failure;
    }
    throw e;
  }
}
