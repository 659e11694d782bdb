/**
 * The set-up that the wave, halt, metrics, notification and status-page tests share, so each file keeps only what
 * it checks: the `clusters:` of a routing table for the test clusters, Deployments created and waited Ready (one of
 * them, where a test asks, with pods that never become Ready for a version), the environment `serve` runs with, a
 * Vault KV write as the audit device logs it, posted to the intake, and the worker's clients and ReplicaSets.
 */
import { expect } from 'vitest';
import { buildApp } from '../../lib/http/app.ts';
import { memoryTelemetry, type Telemetry } from '../../lib/kernel/telemetry.ts';
import { ClusterClients } from '../../lib/kube/cluster-clients.ts';
import { createClusterAccessResolver, defaultClusterAccessDeps } from '../../lib/kube/credentials/resolve.ts';
import type { RolloutQueue } from '../../lib/queue/rollout-message.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { admin, cluster, createWorkload, getWorkload } from './support.ts';

/** A routing table's `clusters:` entries for these test clusters, each reached as vault-rollout's own identity. */
export function clustersYaml(names: readonly string[]): string {
  return names
    .map((c) => `  ${c}: { kubeconfig: { file: ${JSON.stringify(cluster(c).vaultRolloutKubeconfig)} } }`)
    .join('\n');
}

/** The test clusters' annotation whose pods, for these versions of these paths, never become Ready (kwok reads it). */
export const unreadyVersions = (versions: Record<string, number>): Record<string, string> => ({
  'vault-rollout.test/unready-versions': JSON.stringify(versions),
});

/** A Deployment's pod template: labelled with its app, annotated as the test asks. */
export const podTemplate = (app: string, annotations: Record<string, string> = {}) => ({
  metadata: { labels: { app }, annotations },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

/**
 * One Deployment per name in each of its clusters (the namespace exists already), then waits until each has all its
 * replicas Ready: a test starts from a fleet at rest.
 */
export async function deployReady(
  ns: string,
  workloads: Record<string, readonly string[]>,
  options: {
    annotations?(name: string, cluster: string): Record<string, string>;
    replicas?(name: string): number;
  } = {},
): Promise<void> {
  const replicas = (name: string) => options.replicas?.(name) ?? 1;
  const each = Object.entries(workloads).flatMap(([name, where]) => where.map((c) => ({ name, c })));
  await Promise.all(
    each.map(({ name, c }) =>
      createWorkload(
        c,
        ns,
        'Deployment',
        name,
        {},
        {
          replicas: replicas(name),
          template: podTemplate(name, options.annotations?.(name, c) ?? {}),
        },
      ),
    ),
  );
  await Promise.all(
    each.map(({ name, c }) =>
      waitFor(
        async () =>
          ((await getWorkload(c, ns, 'Deployment', name)) as { status?: { readyReplicas?: number } }).status
            ?.readyReplicas === replicas(name) || undefined,
        { timeoutMs: 90_000, what: `${name} Ready in ${c}` },
      ),
    ),
  );
}

/**
 * The halt fixture: Deployments `good` and `held` in every cluster, where `held`'s pods of version 2 of `heldPath`
 * never become Ready in `firstWave` (so its gate halts there) and `good` goes through.
 */
export function deployGoodAndHeld(
  ns: string,
  clusters: readonly string[],
  firstWave: string,
  heldPath: string,
): Promise<void> {
  return deployReady(
    ns,
    { good: clusters, held: clusters },
    { annotations: (name, c) => (name === 'held' && c === firstWave ? unreadyVersions({ [heldPath]: 2 }) : {}) },
  );
}

/** What `serve` runs with in these tests: its own home and state file, the intake's token, no Powertools output. */
export function serveEnv(dir: string, stateDb: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HOME: dir,
    VAULT_ROLLOUT_STATE_DB: stateDb,
    VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    POWERTOOLS_METRICS_DISABLED: 'true',
    ...extra,
  };
}

/** A KV v2 write of `path` (as `secret/a/b`) at `version`, as Vault's audit device logs its response. */
export function kvWriteAudit(id: string, path: string, version: number): string {
  return JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: path.replace(/^secret\//, 'secret/data/'),
    },
    response: { data: { version } },
  });
}

/** Posts an audit body to an in-process intake on `queue` with the intake's token; it must be accepted. */
export async function postToIntake(table: RoutingTable, queue: RolloutQueue, body: string): Promise<void> {
  const app = buildApp({
    table,
    queue,
    telemetry: memoryTelemetry(),
    secrets: async () => ({ bearerToken: BEARER_TOKEN }),
  });
  const res = await app.request('/v1/vault/audit', {
    method: 'POST',
    body,
    headers: { authorization: `Bearer ${BEARER_TOKEN}` },
  });
  expect(res.status).toBe(202);
}

/** The worker's cluster clients, resolving the table's kubeconfig files relative to `dir`. */
export function workerClients(dir: string, telemetry: Telemetry): ClusterClients {
  return new ClusterClients(
    createClusterAccessResolver(defaultClusterAccessDeps({ routingTableDir: dir, env: {}, logger: telemetry })),
  );
}

export interface ReplicaSetView {
  metadata: { creationTimestamp: string };
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
}

/**
 * The ReplicaSets of a Deployment (by its `app` label); with a path, only those vault-rollout made for it at
 * `version` (by the restart record in their template).
 */
export async function replicaSetsFor(
  ns: string,
  c: string,
  app: string,
  path?: string,
  version?: number,
): Promise<ReplicaSetView[]> {
  const res = await admin(c).request('GET', `/apis/apps/v1/namespaces/${ns}/replicasets?labelSelector=app%3D${app}`);
  const items = (res.body as { items: ReplicaSetView[] }).items;
  if (path === undefined) return items;
  return items.filter(
    (rs) => JSON.parse(rs.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '{}')[path] === version,
  );
}

/** Whether the Deployment's rollout is complete: its controller saw the last spec and its one replica is new and Ready. */
export async function deploymentComplete(ns: string, c: string, app: string): Promise<boolean> {
  const d = (await getWorkload(c, ns, 'Deployment', app)) as {
    metadata: { generation?: number };
    status?: { observedGeneration?: number; updatedReplicas?: number; readyReplicas?: number; replicas?: number };
  };
  return (
    d.status?.observedGeneration === d.metadata.generation &&
    d.status?.updatedReplicas === 1 &&
    d.status?.readyReplicas === 1 &&
    d.status?.replicas === 1
  );
}
