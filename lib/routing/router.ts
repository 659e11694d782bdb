/** Which routes a change matches, with the values its path captured. Pure. */
import type { SecretChange } from '../sources/secret-change.ts';
import type { Captures } from './path-pattern.ts';
import type { CompiledRoute, RoutingTable } from './routing-table.ts';

export interface RouteMatch {
  route: CompiledRoute;
  captures: Captures;
}

export function matchRoutes(table: RoutingTable, change: SecretChange): RouteMatch[] {
  const index = table.index.get(change.namespace);
  if (!index) return [];
  const matches: RouteMatch[] = [];
  for (const [id, captures] of index.match(change.path)) {
    const route = table.routes[id];
    if (route && route.operations.has(change.operation)) matches.push({ route, captures });
  }
  return matches;
}
