/** The worker function's dependencies: the shared runtime plus cluster access with its cached credentials. */
import { dirname } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ClusterClients } from '../kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../kube/credentials/resolve.ts';
import type { WorkerDeps } from '../pipeline/worker.ts';
import { DynamoDbRotationStore } from '../rotations/dynamodb-rotation-store.ts';
import { MemoryRotationStore } from '../rotations/rotation-store.ts';
import { DynamoDbSlotStore } from '../slots/dynamodb-slot-store.ts';
import { ConfigError } from './config.ts';
import type { LambdaRuntime } from './lambda.ts';

export function lambdaWorkerDeps(runtime: LambdaRuntime): WorkerDeps {
  const { table, telemetry, env, routesFile } = runtime;
  // rollout.maxUnavailable bounds every invocation together: never an in-memory stand-in in Lambda.
  const bounded = table.maxUnavailable !== undefined || table.routes.some((r) => r.maxUnavailable !== undefined);
  if (bounded && !env.VAULT_ROLLOUT_SLOTS_TABLE)
    throw new ConfigError(
      'the routing table sets rollout.maxUnavailable but VAULT_ROLLOUT_SLOTS_TABLE is not set: it must name the DynamoDB slot table',
    );
  // One DynamoDB client (one connection pool) for both tables, made only when one is named.
  const dynamo =
    env.VAULT_ROLLOUT_SLOTS_TABLE || env.VAULT_ROLLOUT_STATE_TABLE
      ? new DynamoDBClient({ region: env.AWS_REGION })
      : undefined;
  const slots =
    dynamo && env.VAULT_ROLLOUT_SLOTS_TABLE
      ? new DynamoDbSlotStore({ client: dynamo, table: env.VAULT_ROLLOUT_SLOTS_TABLE })
      : undefined;
  // Released waves and halts: the DynamoDB table every invocation (and the scheduled reconcile) shares. A table with
  // waves never runs on an in-memory stand-in: a halt must outlive the invocation.
  const waves = table.routes.some((r) => r.policy.waves !== undefined);
  if (waves && !env.VAULT_ROLLOUT_STATE_TABLE)
    throw new ConfigError(
      'the routing table sets rollout.waves but VAULT_ROLLOUT_STATE_TABLE is not set: it must name the DynamoDB rotation state table',
    );
  const rotations =
    dynamo && env.VAULT_ROLLOUT_STATE_TABLE
      ? new DynamoDbRotationStore({ client: dynamo, table: env.VAULT_ROLLOUT_STATE_TABLE })
      : new MemoryRotationStore();
  const clients = new ClusterClients(
    createClusterAccessResolver(
      defaultClusterAccessDeps({ routingTableDir: dirname(routesFile), env, logger: telemetry, runtime: 'lambda' }),
    ),
  );
  return {
    table,
    rotations,
    // Notifications: rotation events go to the outbox in the state table; the notify function sends them.
    ...(rotations instanceof DynamoDbRotationStore && table.allSinks.size > 0
      ? { notifications: { outbox: rotations } }
      : {}),
    telemetry,
    executor: { access: (name, config) => clients.get(name, config), logger: telemetry, ...(slots ? { slots } : {}) },
    invalidate: (cluster) => clients.invalidate(cluster),
  };
}
