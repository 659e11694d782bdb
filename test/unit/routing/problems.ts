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

/**
 * Two clusters and two routes: `app` (secret/app -> Deployment ns/app in a and b) and `other` (secret/other -> the
 * same Deployment in a). `top` goes above `routes:`, `cluster` inside cluster a's braces, `route` inside route `app`.
 */
export const twoRouteTable = (extra: { top?: string; cluster?: string; route?: string }): string => `clusters:
  a: { kubeconfig: { env: A }${extra.cluster ?? ''} }
  b: { kubeconfig: { env: B } }
${extra.top ?? ''}routes:
  - name: app
    match: { path: "secret/app" }
${extra.route ?? ''}    targets:
      - { clusters: [a, b], namespace: ns, kind: Deployment, name: app }
  - name: other
    match: { path: "secret/other" }
    targets:
      - { clusters: [a], namespace: ns, kind: Deployment, name: app }
`;
