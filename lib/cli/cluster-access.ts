/** The CLI's cluster access: the real credential sources, relative to the routing table, warnings on stderr. */
import { dirname, resolve } from 'node:path';
import { ClusterClients } from '../kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../kube/credentials/resolve.ts';
import type { CliIo } from './io.ts';

export function cliClusterClients(io: CliIo, routesFile: string): ClusterClients {
  const logger = {
    warn: (message: string, fields?: Record<string, unknown>) =>
      io.stderr(`warning: ${message}${fields ? ` ${JSON.stringify(fields)}` : ''}\n`),
  };
  return new ClusterClients(
    createClusterAccessResolver(
      defaultClusterAccessDeps({
        routingTableDir: dirname(resolve(routesFile)),
        env: io.env,
        logger,
        runtime: 'local',
      }),
    ),
  );
}
