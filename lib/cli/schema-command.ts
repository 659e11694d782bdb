import { routingTableJsonSchema } from '../routing/json-schema.ts';
import { EXIT, type CliIo } from './io.ts';

/** `vault-rollout schema`: prints the routing table's JSON Schema (for editors: yaml-language-server, VS Code). */
export async function schemaCommand(_argv: string[], io: CliIo): Promise<number> {
  io.stdout(`${JSON.stringify(routingTableJsonSchema(), null, 2)}\n`);
  return EXIT.ok;
}
