/**
 * A routing table as plain data, for comparing a compiled table's (whose routes build their parts on first read)
 * with a YAML table's: every route's parts read through, and, for the index, the routes a set of paths matches.
 */
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { matchRoutes } from '../../../lib/routing/router.ts';
import type { RoutingTable } from '../../../lib/routing/routing-table.ts';

/** A path each pattern matches: captures and `*` filled in, `**` as two segments. */
const pathOf = (source: string): string =>
  source
    .split('/')
    .map((s) => (s === '**' ? 'a/b' : s.replace(/\{[^}]*\}/g, 'x1').replace(/\*/g, 'y')))
    .join('/');

export function tableShape(table: RoutingTable): unknown {
  const { routes, index: _index, ...rest } = table;
  const paths = routes.map((r) => ({ namespace: r.namespace, path: pathOf(r.pattern.source) }));
  return {
    ...rest,
    routes: routes.map((r) => ({
      name: r.name,
      namespace: r.namespace,
      operations: r.operations,
      pattern: r.pattern,
      targets: r.targets,
      rolloutTimeoutMs: r.rolloutTimeoutMs,
      maxUnavailable: r.maxUnavailable,
      policy: r.policy,
      notifications: r.notifications,
      mode: r.mode,
    })),
    matches: paths.map(({ namespace, path }) =>
      matchRoutes(table, { namespace, path, operation: 'write' } as SecretChange).map((m) => [
        m.route.name,
        m.captures,
      ]),
    ),
  };
}
