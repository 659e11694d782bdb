import { routingTableJsonSchema } from '../routing/json-schema.ts';
import { EXIT, type CliIo } from './io.ts';
import { printData } from './output.ts';
import { parseCommand } from './spec.ts';
import { schema as spec } from './specs.ts';

/** `vault-rollout schema`: prints the routing table's JSON Schema (for editors: yaml-language-server, VS Code). */
export async function schemaCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  printData(
    io,
    args.values.output,
    () => routingTableJsonSchema(),
    () => `${JSON.stringify(routingTableJsonSchema(), null, 2)}\n`,
  );
  return EXIT.ok;
}
