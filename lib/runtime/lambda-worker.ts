/** The worker function's dependencies: the shared runtime plus cluster access with its cached credentials. */
import { dirname } from 'node:path';
import { ClusterClients } from '../kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../kube/credentials/resolve.ts';
import type { WorkerDeps } from '../pipeline/worker.ts';
import type { LambdaRuntime } from './lambda.ts';

export function lambdaWorkerDeps(runtime: LambdaRuntime): WorkerDeps {
  const { table, telemetry, env, routesFile } = runtime;
  const clients = new ClusterClients(createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: dirname(routesFile), env, logger: telemetry })));
  return {
    table,
    telemetry,
    executor: { access: (name, config) => clients.get(name, config), logger: telemetry },
    invalidate: (cluster) => clients.invalidate(cluster),
  };
}
