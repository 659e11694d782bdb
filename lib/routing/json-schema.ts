/** The routing table's JSON Schema, generated from the zod schema so the two never disagree. */
import { z } from 'zod';
import { RoutingTableSchema } from './schema.ts';

export function routingTableJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(RoutingTableSchema, { io: 'input', unrepresentable: 'any' }),
    $id: 'https://vault-rollout.dev/schemas/routing-table.json',
    title: 'vault-rollout routing table',
  };
}
