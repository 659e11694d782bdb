/**
 * End to end with the real operators (test/clusters: ESO v0.20.4 and VSO v0.10.0 on OPERATORS_CLUSTER) and a real
 * OpenBao: a new version written in OpenBao -> its http audit device -> `vault-rollout serve` -> the worker nudges the
 * ExternalSecret / VaultStaticSecret -> the operator writes the Kubernetes Secret -> only then vault-rollout restarts
 * the consumers. The order is read back from the cluster with the admin identity (the test may read the Secret;
 * vault-rollout never does): the Secret's update has a lower resourceVersion (etcd revision) than the ADDED event of
 * the consumer's new ReplicaSet, and its managedFields time is not after the ReplicaSet's creationTimestamp; the
 * Secret holds the new value when the new pods exist. A replay restarts nothing; a CreatedOnce ExternalSecret is
 * refused with its reason; with rolloutRestartTargets, VSO restarts its target once and vault-rollout only the others.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeRollouts, type RolloutResult } from '../../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import { waitFor, type KubeClient } from '../clusters/kube-http.ts';
import {
  ESO_API,
  OPERATORS_CLUSTER,
  VSO_API,
  applyObject,
  createSecretStore,
  createVaultAuth,
  externalSecretPath,
  bindSyncOperatorsRbac,
  startOperatorsVault,
  vaultStaticSecretPath,
  type OperatorsVault,
} from '../clusters/operators.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { startServe, watchSecretsAndReplicaSets, type Serve } from '../vault/e2e-stack.ts';
import { admin, cluster, createNamespace, deleteNamespace, fileAccess, uniqueName } from './support.ts';

const NS = uniqueName('vr-sync-e2e');
const SLOW = 180_000;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-sync-e2e-'));
const routesFile = join(dir, 'routes.yaml');
let kube: KubeClient;
let vault: OperatorsVault;
let serve: Serve;
let table: RoutingTable;

const routes = (mount: string) => `clusters:
  ${OPERATORS_CLUSTER}: { kubeconfig: { file: ${JSON.stringify(cluster(OPERATORS_CLUSTER).vaultRolloutKubeconfig)} } }
vault: { mounts: { ${mount}: 2 } }
routes:
  - name: eso
    match: { path: "${mount}/eso/{service}" }
    targets: [{ clusters: [${OPERATORS_CLUSTER}], namespace: ${NS}, names: ["*"], sync: { kind: ExternalSecret, name: "{service}" } }]
  - name: vso
    match: { path: "${mount}/vso/{service}" }
    targets: [{ clusters: [${OPERATORS_CLUSTER}], namespace: ${NS}, names: ["*"], sync: { kind: VaultStaticSecret, name: "{service}" } }]
`;

async function ok<T>(method: string, path: string, body?: unknown, contentType?: string): Promise<T> {
  const r = await kube.request<T>(method, path, {
    ...(body === undefined ? {} : { body }),
    ...(contentType ? { contentType } : {}),
  });
  if (r.status >= 300) throw new Error(`${method} ${path}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  return r.body;
}

interface Meta {
  name: string;
  resourceVersion: string;
  creationTimestamp: string;
  managedFields?: Array<{ manager: string; time?: string; operation: string }>;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

/** A Deployment of 1 replica whose container reads `secret` through envFrom (or nothing, for a bystander). */
async function deployment(name: string, secret: string | undefined): Promise<void> {
  await ok('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [
            {
              name: 'app',
              image: 'registry.invalid/app:1',
              ...(secret ? { envFrom: [{ secretRef: { name: secret } }] } : {}),
            },
          ],
        },
      },
    },
  });
}

async function secretValue(name: string): Promise<string | undefined> {
  const r = await kube.request<{ data?: Record<string, string> }>('GET', `/api/v1/namespaces/${NS}/secrets/${name}`);
  const b64 = r.status === 200 ? r.body.data?.password : undefined;
  return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
}
const replicaSets = async (app: string) =>
  (
    await ok<{ items: Array<{ metadata: Meta }> }>(
      'GET',
      `/apis/apps/v1/namespaces/${NS}/replicasets?labelSelector=app%3D${app}`,
    )
  ).items;
const template = async (name: string) =>
  (
    await ok<{ spec: { template: { metadata: { annotations?: Record<string, string> } } } }>(
      'GET',
      `/apis/apps/v1/namespaces/${NS}/deployments/${name}`,
    )
  ).spec.template.metadata.annotations ?? {};

const watchOrder = () => watchSecretsAndReplicaSets(cluster(OPERATORS_CLUSTER), NS);

beforeAll(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  kube = admin(OPERATORS_CLUSTER);
  await createNamespace(OPERATORS_CLUSTER, NS);
  vault = await startOperatorsVault();
  await createSecretStore(kube, NS, vault);
  await createVaultAuth(kube, NS, vault);
  await bindSyncOperatorsRbac(kube);
  writeFileSync(routesFile, routes(vault.mount));
  table = loadRoutingTable(routes(vault.mount), routesFile);
  serve = await startServe(routesFile);
}, SLOW);
afterAll(async () => {
  await serve?.stop();
  await vault?.stop();
  await deleteNamespace(OPERATORS_CLUSTER, NS);
});

/** The audit device that feeds vault-rollout: on only once the objects exist and have synced version 1. */
async function feedOn(): Promise<void> {
  const devices = await vault.server.client.listAudit();
  if (!Object.keys(devices).some((k) => k.startsWith('http'))) {
    await vault.server.client.enableAudit('http', 'http', {
      uri: `${serve.url}/v1/vault/audit`,
      headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
    });
  }
}

/** Off between tests, so one test's first writes (version 1) never reach vault-rollout. */
async function feedOff(): Promise<void> {
  const devices = await vault.server.client.listAudit();
  if (Object.keys(devices).some((k) => k.startsWith('http'))) await vault.server.client.disableAudit('http');
}

async function applyDirect(lines: string[]): Promise<RolloutResult[]> {
  const parsed = parseInput(lines.join('\n'), { mounts: table.mounts });
  return executeRollouts(table, planRollouts(table, parsed.changes).targets, {
    access: fileAccess,
    follow: { budgetMs: 30_000 },
  });
}
const auditLine = (key: string, version: number) =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `replay-${key}-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: `${vault.mount}/`,
      path: `${vault.mount}/data/${key}`,
    },
    response: { data: { version } },
  });
const brief = (r: RolloutResult) => `${r.kind}/${r.name}: ${r.outcome}${r.reason ? ` (${r.reason})` : ''}`;

describe('External Secrets Operator', () => {
  it(
    'write -> audit -> nudge -> ESO writes the Secret -> only then the consumer restarts; the new pods see the new value; a replay restarts nothing',
    async () => {
      await vault.server.client.kv2Write(vault.mount, 'eso/orders-db', { password: 'one' });
      await applyObject(kube, externalSecretPath(NS), 'orders-db', {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name: 'orders-db', namespace: NS },
        spec: {
          refreshPolicy: 'OnChange',
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name: 'orders-db', creationPolicy: 'Owner' },
          data: [{ secretKey: 'password', remoteRef: { key: 'eso/orders-db', property: 'password' } }],
        },
      });
      await waitFor(async () => (await secretValue('orders-db')) === 'one', {
        timeoutMs: 60_000,
        what: 'ESO to write version 1',
      });
      await deployment('orders', 'orders-db');
      await deployment('bystander', undefined);
      await waitFor(
        async () => (await replicaSets('orders')).length === 1 && (await replicaSets('bystander')).length === 1,
        { timeoutMs: 30_000, what: 'the first ReplicaSets' },
      );
      const order = watchOrder();
      try {
        await feedOn();
        const written = Date.now();
        await vault.server.client.kv2Write(vault.mount, 'eso/orders-db', { password: 'two' });
        const newRs = await waitFor(
          async () =>
            (await replicaSets('orders')).find(
              (rs) => rs.metadata.annotations?.['deployment.kubernetes.io/revision'] === '2',
            ),
          { timeoutMs: 90_000, intervalMs: 100, what: "the consumer's new ReplicaSet" },
        );
        const restartedAfterMs = Date.now() - written;
        // The new pods exist: the Secret they read holds the new value.
        const hash = newRs.metadata.labels?.['pod-template-hash'] ?? '';
        await waitFor(
          async () =>
            (
              await ok<{ items: unknown[] }>(
                'GET',
                `/api/v1/namespaces/${NS}/pods?labelSelector=pod-template-hash%3D${hash}`,
              )
            ).items.length >= 1,
          { timeoutMs: 30_000, what: 'pods of the new ReplicaSet' },
        );
        expect(await secretValue('orders-db')).toBe('two');
        await waitFor(
          async () =>
            ((
              await ok<{ status?: { readyReplicas?: number } }>(
                'GET',
                `/apis/apps/v1/namespaces/${NS}/replicasets/${newRs.metadata.name}`,
              )
            ).status?.readyReplicas ?? 0) >= 1,
          { timeoutMs: 60_000, intervalMs: 100, what: 'the new pods Ready' },
        );
        const readyAfterMs = Date.now() - written;
        // Order, from the cluster: the Secret's update (ESO) before the new ReplicaSet's creation.
        const secretUpdate = order.events.find(
          (e) => e.kind === 'Secret' && e.name === 'orders-db' && e.type === 'MODIFIED' && e.data === 'two',
        );
        const rsAdded = await waitFor(
          async () =>
            order.events.find((e) => e.kind === 'ReplicaSet' && e.type === 'ADDED' && e.name === newRs.metadata.name),
          { timeoutMs: 10_000, what: 'the ADDED event of the new ReplicaSet' },
        );
        expect(secretUpdate, 'a watch event of the Secret with the new value').toBeDefined();
        expect(secretUpdate?.rv).toBeLessThan(rsAdded.rv);
        const secretMeta = (await ok<{ metadata: Meta }>('GET', `/api/v1/namespaces/${NS}/secrets/orders-db`)).metadata;
        const esoWrite =
          (secretMeta.managedFields ?? [])
            .filter((f) => f.time !== undefined)
            .map((f) => Date.parse(f.time as string))
            .sort()
            .at(-1) ?? NaN;
        expect(esoWrite).toBeLessThanOrEqual(Date.parse(newRs.metadata.creationTimestamp));
        // Only the consumer: the bystander still has its one ReplicaSet, and so has orders no third.
        expect((await replicaSets('bystander')).length).toBe(1);
        console.log(
          `ESO figure: Vault write -> consumer's new ReplicaSet ${restartedAfterMs} ms, its new pods Ready ${readyAfterMs} ms (without vault-rollout: ESO's next refresh — never with refreshPolicy OnChange, refreshInterval otherwise, default 1 h)`,
        );

        // A replay of the same change restarts nothing.
        const replay = await applyDirect([auditLine('eso/orders-db', 2)]);
        expect(replay.map(brief)).toEqual([
          'ExternalSecret/orders-db: unchanged (already requested for this version)',
          'Deployment/orders: unchanged (already restarted for this version)',
        ]);
        await new Promise((r) => setTimeout(r, 1500));
        expect((await replicaSets('orders')).length).toBe(2);
      } finally {
        order.stop();
        await feedOff();
      }
    },
    SLOW,
  );

  it(
    'refuses a CreatedOnce ExternalSecret with its reason, and restarts nothing',
    async () => {
      await applyObject(kube, externalSecretPath(NS), 'once-db', {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name: 'once-db', namespace: NS },
        spec: {
          refreshPolicy: 'CreatedOnce',
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name: 'once-db' },
          data: [{ secretKey: 'password', remoteRef: { key: 'eso/orders-db', property: 'password' } }],
        },
      });
      await deployment('once', 'once-db');
      const [result, ...rest] = await applyDirect([auditLine('eso/once-db', 3)]);
      expect(rest).toEqual([]);
      expect(result).toMatchObject({
        kind: 'ExternalSecret',
        name: 'once-db',
        outcome: 'skipped',
        reason: 'sync refused',
      });
      expect(result?.detail).toMatch(
        /refreshPolicy CreatedOnce: ESO syncs this ExternalSecret only when it is created/,
      );
      expect(await template('once')).not.toHaveProperty(['vault-rollout.io/versions']);
    },
    SLOW,
  );
});

describe('key-level restarts of ExternalSecret consumers, no keys: line', () => {
  it(
    'maps secretKeyRef and volume items back through remoteRef.property: rotating password restarts only its readers',
    async () => {
      await feedOff();
      await vault.server.client.kv2Write(vault.mount, 'eso/keys-db', { password: 'one', api_key: 'k1' });
      await applyObject(kube, externalSecretPath(NS), 'keys-db', {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name: 'keys-db', namespace: NS },
        spec: {
          refreshPolicy: 'OnChange',
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name: 'keys-db', creationPolicy: 'Owner' },
          data: [
            { secretKey: 'DB_PASSWORD', remoteRef: { key: 'eso/keys-db', property: 'password' } },
            { secretKey: 'API', remoteRef: { key: 'eso/keys-db', property: 'api_key' } },
          ],
        },
      });
      const secretKey = async (key: string) => {
        const r = await kube.request<{ data?: Record<string, string> }>(
          'GET',
          `/api/v1/namespaces/${NS}/secrets/keys-db`,
        );
        const b64 = r.status === 200 ? r.body.data?.[key] : undefined;
        return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
      };
      await waitFor(async () => (await secretKey('DB_PASSWORD')) === 'one', {
        timeoutMs: 60_000,
        what: 'ESO to write version 1',
      });
      const pod = (name: string, spec: Record<string, unknown>) =>
        ok('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name, namespace: NS },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: name } },
            template: {
              metadata: { labels: { app: name } },
              spec: {
                containers: [{ name: 'app', image: 'registry.invalid/app:1', ...spec }],
                ...(spec.volumes ? { volumes: spec.volumes } : {}),
              },
            },
          },
        });
      await pod('k-pw', { env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'keys-db', key: 'DB_PASSWORD' } } }] });
      await ok('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'k-api', namespace: NS },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'k-api' } },
          template: {
            metadata: { labels: { app: 'k-api' } },
            spec: {
              containers: [
                { name: 'app', image: 'registry.invalid/app:1', volumeMounts: [{ name: 'v', mountPath: '/s' }] },
              ],
              volumes: [{ name: 'v', secret: { secretName: 'keys-db', items: [{ key: 'API', path: 'api' }] } }],
            },
          },
        },
      });
      await pod('k-all', { envFrom: [{ secretRef: { name: 'keys-db' } }] });
      const apps = ['k-pw', 'k-api', 'k-all'] as const;
      await waitFor(
        async () => ((await Promise.all(apps.map(replicaSets))).every((r) => r.length === 1) ? true : undefined),
        { timeoutMs: 30_000, what: 'the first ReplicaSets' },
      );
      const count = async () =>
        Object.fromEntries(await Promise.all(apps.map(async (a) => [a, (await replicaSets(a)).length] as const)));
      // A restart records the version; a key-level skip records `{ v, skipped: [keys] }` (never a bare version, so a
      // later change of that version naming a used key still restarts): either way the consumer is at v.
      const versionOf = (entry: unknown): number =>
        typeof entry === 'number'
          ? entry
          : typeof entry === 'object' && entry !== null && 'v' in entry
            ? Number(entry.v)
            : 0;
      const recorded = async (name: string) => {
        const d = await ok<{
          metadata: { annotations?: Record<string, string> };
          spec: { template: { metadata: { annotations?: Record<string, string> } } };
        }>('GET', `/apis/apps/v1/namespaces/${NS}/deployments/${name}`);
        return [
          d.spec.template.metadata.annotations?.['vault-rollout.io/versions'],
          d.metadata.annotations?.['vault-rollout.io/versions'],
        ]
          .map((r) => (r ? versionOf((JSON.parse(r) as Record<string, unknown>)[`${vault.mount}/eso/keys-db`]) : 0))
          .reduce((a, b) => Math.max(a, b), 0);
      };
      const atVersion = (v: number) =>
        waitFor(async () => ((await Promise.all(apps.map(recorded))).every((r) => r === v) ? true : undefined), {
          timeoutMs: 90_000,
          intervalMs: 200,
          what: `every consumer recorded at v${v}`,
        });
      try {
        await feedOn();
        // The first write vault-rollout sees has no baseline: every consumer restarts.
        await vault.server.client.kv2Write(vault.mount, 'eso/keys-db', { password: 'two', api_key: 'k1' });
        await atVersion(2);
        // The record is on the template at once; the Deployment controller makes the new ReplicaSet after it, late under load.
        const counted = (want: Record<string, number>) =>
          waitFor(async () => (JSON.stringify(await count()) === JSON.stringify(want) ? true : undefined), {
            timeoutMs: 30_000,
            intervalMs: 200,
            what: `ReplicaSets ${JSON.stringify(want)}`,
          }).catch(() => undefined);
        await counted({ 'k-pw': 2, 'k-api': 2, 'k-all': 2 });
        expect(await count()).toEqual({ 'k-pw': 2, 'k-api': 2, 'k-all': 2 });
        // password rotated: its reader and the envFrom consumer restart; the reader of API (api_key) does not.
        await vault.server.client.kv2Write(vault.mount, 'eso/keys-db', { password: 'three', api_key: 'k1' });
        await atVersion(3);
        await counted({ 'k-pw': 3, 'k-api': 2, 'k-all': 3 });
        // Long enough for a wrongful restart of k-api to show as a third ReplicaSet.
        await new Promise((r) => setTimeout(r, 1500));
        expect(await count()).toEqual({ 'k-pw': 3, 'k-api': 2, 'k-all': 3 });
        expect(await secretKey('DB_PASSWORD')).toBe('three');
      } finally {
        await feedOff();
      }
    },
    SLOW,
  );
});

describe('Vault Secrets Operator', () => {
  it(
    'with rolloutRestartTargets: VSO restarts its target once, vault-rollout restarts only the other consumer, and says so',
    async () => {
      await vault.server.client.kv2Write(vault.mount, 'vso/web-db', { password: 'one' });
      await deployment('web', 'web-db');
      await deployment('worker', 'web-db');
      await applyObject(kube, vaultStaticSecretPath(NS), 'web-db', {
        apiVersion: VSO_API,
        kind: 'VaultStaticSecret',
        metadata: { name: 'web-db', namespace: NS },
        spec: {
          vaultAuthRef: 'openbao',
          mount: vault.mount,
          type: 'kv-v2',
          path: 'vso/web-db',
          refreshAfter: '1h',
          hmacSecretData: true,
          destination: { name: 'web-db', create: true },
          rolloutRestartTargets: [{ kind: 'Deployment', name: 'web' }],
        },
      });
      await waitFor(async () => (await secretValue('web-db')) === 'one', {
        timeoutMs: 60_000,
        what: 'VSO to write version 1',
      });
      await waitFor(async () => (await replicaSets('web')).length >= 1 && (await replicaSets('worker')).length >= 1, {
        timeoutMs: 30_000,
        what: 'the first ReplicaSets',
      });
      await new Promise((r) => setTimeout(r, 1500));
      const before = { web: (await replicaSets('web')).length, worker: (await replicaSets('worker')).length };
      await feedOn();
      await vault.server.client.kv2Write(vault.mount, 'vso/web-db', { password: 'two' });
      await waitFor(
        async () =>
          (await replicaSets('worker')).length === before.worker + 1 &&
          (await replicaSets('web')).length === before.web + 1,
        { timeoutMs: 90_000, intervalMs: 200, what: 'one restart of web (VSO) and one of worker (vault-rollout)' },
      );
      expect(await secretValue('web-db')).toBe('two');
      // Once, not twice: no further ReplicaSet of web, and vault-rollout left web's template alone.
      await new Promise((r) => setTimeout(r, 3000));
      expect((await replicaSets('web')).length).toBe(before.web + 1);
      expect((await replicaSets('worker')).length).toBe(before.worker + 1);
      expect(await template('web')).toHaveProperty(['vso.secrets.hashicorp.com/restartedAt']);
      expect(await template('web')).not.toHaveProperty(['vault-rollout.io/versions']);
      expect(JSON.parse((await template('worker'))['vault-rollout.io/versions'] ?? '{}')).toEqual({
        [`${vault.mount}/vso/web-db`]: 2,
      });
      const replay = await applyDirect([auditLine('vso/web-db', 2)]);
      expect(replay.map(brief)).toEqual([
        'VaultStaticSecret/web-db: unchanged (already requested for this version)',
        'Deployment/worker: unchanged (already restarted for this version)',
      ]);
      expect(replay[0]?.detail).toMatch(
        /Vault Secrets Operator restarts Deployment\/web itself \(rolloutRestartTargets\): not restarted again/,
      );
    },
    SLOW,
  );
});
