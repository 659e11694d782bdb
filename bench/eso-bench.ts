/**
 * External Secrets Operator users: time from a KV v2 write in a real OpenBao to the consumer's new pods
 * Ready, through the real ESO controller (v0.20.4, on the operators' test cluster) and vault-rollout: write -> the
 * http audit device -> `vault-rollout serve` -> the worker nudges the ExternalSecret -> ESO writes the Secret -> the
 * worker restarts the Deployment that reads it -> its new pod Ready (Available, as the Deployment controller reports).
 * Beside it, in the same run, ESO on its own: an ExternalSecret with `refreshPolicy: Periodic`, `refreshInterval:
 * 15s` — time from the write until ESO's Secret holds the new value, written at a random phase of that interval; the
 * Deployment that reads that Secret is not restarted (counted), so its pods still run on the old value. ESO's default
 * (1 h, or never with OnChange) is stated, not measured. The bench reads Secret data with the admin identity;
 * vault-rollout never does.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { deploymentHealth } from '../lib/workloads/rollout-health.ts';
import { down, up } from '../test/clusters/clusters.ts';
import { clusterClient, waitFor, type KubeClient } from '../test/clusters/kube-http.ts';
import {
  ESO_API,
  OPERATORS_CLUSTER,
  applyObject,
  createSecretStore,
  externalSecretPath,
  operatorsCluster,
  startOperatorsVault,
  type OperatorsVault,
} from '../test/clusters/operators.ts';
import { BEARER_TOKEN } from '../test/secrets.ts';
import { startServe, type Serve } from '../test/vault/e2e-stack.ts';
import { median, round, type Figure } from './figures.ts';
import { size } from './size.ts';
import { alternate } from './raw-baseline.ts';

const ROUNDS = Number(process.env.BENCH_ESO_ROUNDS ?? size(5, 1));
const WARMUP = size(1, 0);
const PERIODIC_INTERVAL_S = 15;
const POLL_MS = 100;
const ROUND_LIMIT_MS = 90_000;

async function ok<T>(kube: KubeClient, method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
  const r = await kube.request<T>(method, path, {
    ...(body === undefined ? {} : { body }),
    ...(contentType ? { contentType } : {}),
  });
  if (r.status >= 300) throw new Error(`${method} ${path}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

/** What an install does where routes sync (infra/rbac/sync-operators.yaml), bound to the test clusters' vault-rollout user. */
async function grantSyncRbac(kube: KubeClient): Promise<void> {
  const docs = parseAllDocuments(
    readFileSync(new URL('../infra/rbac/sync-operators.yaml', import.meta.url), 'utf8'),
  ).map((d) => d.toJS() as { kind: string; metadata: { name: string }; subjects?: unknown[] });
  for (const doc of docs) {
    if (doc.kind === 'ClusterRoleBinding')
      doc.subjects = [
        ...(doc.subjects ?? []),
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' },
      ];
    const plural = doc.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
    await ok(
      kube,
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/${plural}/${doc.metadata.name}?fieldManager=vault-rollout-bench&force=true`,
      stringify(doc),
      'application/apply-patch+yaml',
    );
  }
}

export async function esoBench(): Promise<Figure[]> {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
  const started = await up({ log: () => {} });
  const beta = operatorsCluster();
  const kube = clusterClient(beta, 'admin');
  const ns = `bench-eso-${Date.now().toString(36)}`;
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-bench-eso-'));
  let vault: OperatorsVault | undefined;
  let serve: Serve | undefined;
  try {
    await ok(kube, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    vault = await startOperatorsVault(beta);
    const v = vault;
    await createSecretStore(kube, ns, v);
    await grantSyncRbac(kube);
    const routesFile = join(dir, 'routes.yaml');
    writeFileSync(
      routesFile,
      `clusters:
  ${OPERATORS_CLUSTER}: { kubeconfig: { file: ${JSON.stringify(beta.vaultRolloutKubeconfig)} } }
vault: { mounts: { ${v.mount}: 2 } }
routes:
  - name: eso
    match: { path: "${v.mount}/eso/{service}" }
    targets: [{ clusters: [${OPERATORS_CLUSTER}], namespace: ${ns}, names: ["*"], sync: { kind: ExternalSecret, name: "{service}" } }]
`,
    );
    serve = await startServe(routesFile);

    const secretValue = async (name: string) => {
      const r = await kube.request<{ data?: Record<string, string> }>(
        'GET',
        `/api/v1/namespaces/${ns}/secrets/${name}`,
      );
      const b64 = r.status === 200 ? r.body.data?.password : undefined;
      return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
    };
    const deploymentPath = (name: string) => `/apis/apps/v1/namespaces/${ns}/deployments/${name}`;
    const replicaSets = async (app: string) =>
      (
        await ok<{ items: unknown[] }>(
          kube,
          'GET',
          `/apis/apps/v1/namespaces/${ns}/replicasets?labelSelector=app%3D${app}`,
        )
      ).items.length;
    /** `name` reads `key` through an ExternalSecret of its own name; a Deployment `app` of one replica reads that Secret. */
    const fixture = async (name: string, key: string, app: string, refresh: Record<string, unknown>) => {
      await v.server.client.kv2Write(v.mount, key, { password: 'v1' });
      await applyObject(kube, externalSecretPath(ns), name, {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name, namespace: ns },
        spec: {
          ...refresh,
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name, creationPolicy: 'Owner' },
          data: [{ secretKey: 'password', remoteRef: { key, property: 'password' } }],
        },
      });
      await waitFor(async () => (await secretValue(name)) === 'v1', {
        timeoutMs: 60_000,
        what: `ESO to write ${name} version 1`,
      });
      await ok(kube, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: app, namespace: ns },
        spec: {
          replicas: 1,
          revisionHistoryLimit: 2,
          selector: { matchLabels: { app } },
          template: {
            metadata: { labels: { app } },
            spec: {
              containers: [{ name: 'app', image: 'registry.invalid/app:1', envFrom: [{ secretRef: { name } }] }],
            },
          },
        },
      });
      await waitFor(async () => deploymentHealth(await ok(kube, 'GET', deploymentPath(app))).state === 'complete', {
        timeoutMs: 60_000,
        what: `${app} Available`,
      });
    };
    // vault-rollout's: OnChange (ESO syncs only when asked); ESO alone: Periodic every PERIODIC_INTERVAL_S, on a path no route matches.
    await fixture('orders-db', 'eso/orders-db', 'orders', { refreshPolicy: 'OnChange' });
    await fixture('periodic-db', 'plain/periodic-db', 'periodic', {
      refreshPolicy: 'Periodic',
      refreshInterval: `${PERIODIC_INTERVAL_S}s`,
    });
    const periodicReplicaSets = await replicaSets('periodic');
    await v.server.client.enableAudit('http', 'http', {
      uri: `${serve.url}/v1/vault/audit`,
      headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
    });

    const secretSyncedMs: number[] = [];
    const ours = async (r: number) => {
      const version = r + 1;
      const value = `v${version}`;
      const t0 = performance.now();
      await v.server.client.kv2Write(v.mount, 'eso/orders-db', { password: value });
      let synced: number | undefined;
      const ms = await waitFor(
        async () => {
          if (synced === undefined && (await secretValue('orders-db')) === value) synced = performance.now() - t0;
          const d = await ok<{ spec: { template: { metadata: { annotations?: Record<string, string> } } } }>(
            kube,
            'GET',
            deploymentPath('orders'),
          );
          const record = JSON.parse(
            d.spec.template.metadata.annotations?.['vault-rollout.io/versions'] ?? '{}',
          ) as Record<string, number>;
          return record[`${v.mount}/eso/orders-db`] === version && deploymentHealth(d).state === 'complete'
            ? performance.now() - t0
            : undefined;
        },
        {
          timeoutMs: ROUND_LIMIT_MS,
          intervalMs: POLL_MS,
          what: `orders restarted for version ${version} and Available`,
        },
      );
      // The restart came after the sync: the Secret already holds the new value (the integration test asserts the order from the watch).
      if ((await secretValue('orders-db')) !== value)
        throw new Error(`orders restarted but Secret orders-db does not hold version ${version}`);
      secretSyncedMs.push(synced ?? ms);
      return ms;
    };
    const esoAlone = async (r: number) => {
      // A random phase of ESO's refresh timer: otherwise each write would land just after the previous refresh.
      await new Promise((res) => setTimeout(res, Math.random() * PERIODIC_INTERVAL_S * 1000));
      const value = `v${r + 1}`;
      const t0 = performance.now();
      await v.server.client.kv2Write(v.mount, 'plain/periodic-db', { password: value });
      return waitFor(async () => ((await secretValue('periodic-db')) === value ? performance.now() - t0 : undefined), {
        timeoutMs: ROUND_LIMIT_MS,
        intervalMs: POLL_MS,
        what: 'ESO to refresh periodic-db',
      });
    };
    const { ours: oursMs, baseline: aloneMs } = await alternate(ours, esoAlone, ROUNDS, WARMUP);
    const periodicRestarts = (await replicaSets('periodic')) - periodicReplicaSets;
    const synced = secretSyncedMs.slice(-ROUNDS);
    const p50 = median(oursMs);
    const aloneP50 = median(aloneMs);
    const spread = (xs: number[]): [number, number] => [round(Math.min(...xs), 0), round(Math.max(...xs), 0)];
    const setting = `real ESO v0.20.4 and OpenBao (http audit device into serve) on the operators' test cluster; 1 consumer Deployment × 1 replica on kwok; ${ROUNDS} rounds after ${WARMUP} warm-up, alternating with ESO alone; polled every ${POLL_MS} ms`;
    return [
      {
        name: 'eso_write_to_pods_ready_p50_ms',
        value: round(p50, 0),
        unit: 'ms',
        baseline: {
          name: `ESO alone, Periodic ${PERIODIC_INTERVAL_S}s: write → Secret updated, pods NOT restarted`,
          value: round(aloneP50, 0),
        },
        spread: spread(oursMs),
        runs: oursMs.length,
        note: `Vault write → nudge → ESO syncs → consumer restarted → new pod Ready; ${setting}`,
      },
      {
        name: 'eso_write_to_secret_synced_p50_ms',
        value: round(median(synced), 0),
        unit: 'ms',
        spread: spread(synced),
        runs: synced.length,
        note: "with vault-rollout: Vault write → ESO's Secret holds the new value (the nudge, before the restart)",
      },
      {
        name: 'eso_alone_periodic_secret_p50_ms',
        value: round(aloneP50, 0),
        unit: 'ms',
        spread: spread(aloneMs),
        runs: aloneMs.length,
        note: `ESO alone, refreshPolicy Periodic, refreshInterval ${PERIODIC_INTERVAL_S}s, write at a random phase: Vault write → Secret updated; its consumer restarted ${periodicRestarts} times, so its pods still run on the old value. ESO's default: refreshInterval 1h (up to 3,600,000 ms, then still no restart); OnChange: never`,
      },
    ];
  } finally {
    await vault?.server.client.disableAudit('http').catch(() => {});
    await serve?.stop();
    await vault?.stop();
    await kube.request('DELETE', `/api/v1/namespaces/${ns}`);
    if (started.started) await down({ log: () => {} });
  }
}
