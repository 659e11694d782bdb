/** The problems `loadRoutingTable` reports for a table, formatted `file:line:column: field: message`; none when it loads. */
import { formatProblem, loadRoutingTable, RoutingTableError } from '../../../lib/routing/routing-table.ts';

export function problemsOf(text: string): string[] {
  try {
    loadRoutingTable(text, 'routes.yaml');
  } catch (e) {
    if (e instanceof RoutingTableError) return e.problems.map(formatProblem);
    throw e;
  }
  return [];
}
