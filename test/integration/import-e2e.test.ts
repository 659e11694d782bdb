/**
 * `vault-rollout import` end to end on OPERATORS_CLUSTER, where the real ESO v0.20.4 and VSO v0.10.0 controllers
 * read a real OpenBao: an ExternalSecret (refreshPolicy OnChange) whose Secret a Reloader-annotated Deployment reads,
 * a VaultStaticSecret whose rolloutRestartTargets names one Deployment while a Reloader-annotated one also reads its
 * Secret, and a Reloader-annotated bystander reading neither. Import (list-only identity) writes the table, it
 * validates, its cluster is pointed at vault-rollout's own identity, and `vault-rollout serve` is fed by OpenBao's
 * http audit device. New versions written in OpenBao then restart, read back from the cluster, exactly what the
 * operators and Reloader would have: each consumer one new ReplicaSet, VSO's target once (by VSO), the bystander
 * none, and each Secret updated (lower etcd revision) before the consumers' new ReplicaSets were created.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseDocument } from 'yaml';
import { main } from '../../lib/cli/main.ts';
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
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { startServe, watchSecretsAndReplicaSets, type Serve } from '../vault/e2e-stack.ts';
import { admin, cluster, createNamespace, deleteNamespace, importerKubeconfig, uniqueName } from './support.ts';

const NS = uniqueName('vr-import-e2e');
const SLOW = 240_000;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-import-e2e-'));
const routesFile = join(dir, 'routes.yaml');
let kube: KubeClient;
let vault: OperatorsVault;
let serve: Serve | undefined;

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
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

/** A Deployment of 1 replica whose container reads `secret` through envFrom, with these annotations. */
async function deployment(name: string, secret: string, annotations: Record<string, string> = {}): Promise<void> {
  await ok('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, annotations },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [{ name: 'app', image: 'registry.invalid/app:1', envFrom: [{ secretRef: { name: secret } }] }],
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

beforeAll(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  kube = admin(OPERATORS_CLUSTER);
  await createNamespace(OPERATORS_CLUSTER, NS);
  vault = await startOperatorsVault();
  await createSecretStore(kube, NS, vault);
  await createVaultAuth(kube, NS, vault);
  await bindSyncOperatorsRbac(kube);
}, SLOW);
afterAll(async () => {
  await serve?.stop();
  const devices = await vault?.server.client.listAudit().catch(() => ({}));
  if (devices && Object.keys(devices).some((k) => k.startsWith('http'))) await vault.server.client.disableAudit('http');
  await vault?.stop();
  await deleteNamespace(OPERATORS_CLUSTER, NS);
});

describe('vault-rollout import, end to end with the real operators', () => {
  it(
    'imports, validates, and a Vault write restarts exactly what VSO, ESO and Reloader would have restarted',
    async () => {
      // Version 1, synced by the operators before vault-rollout hears of anything.
      await vault.server.client.kv2Write(vault.mount, 'eso/orders-db', { password: 'one' });
      await vault.server.client.kv2Write(vault.mount, 'vso/web-db', { password: 'one' });
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
      await deployment('orders', 'orders-db', { 'reloader.stakater.com/auto': 'true' });
      await deployment('web', 'web-db');
      await deployment('worker', 'web-db', { 'secret.reloader.stakater.com/reload': 'web-db' });
      await deployment('bystander', 'something-else', { 'reloader.stakater.com/auto': 'true' });
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
      await waitFor(async () => (await secretValue('orders-db')) === 'one' && (await secretValue('web-db')) === 'one', {
        timeoutMs: 60_000,
        what: 'ESO and VSO to write version 1',
      });
      const apps = ['orders', 'web', 'worker', 'bystander'] as const;
      await waitFor(async () => (await Promise.all(apps.map(replicaSets))).every((l) => l.length >= 1), {
        timeoutMs: 30_000,
        what: 'the first ReplicaSets',
      });
      await new Promise((r) => setTimeout(r, 1500));

      // Import with the list-only identity; the table validates.
      const io = memoryIo();
      const code = await main(
        [
          'import',
          '--cluster',
          `${OPERATORS_CLUSTER}=${await importerKubeconfig(OPERATORS_CLUSTER, dir)}`,
          '--namespace',
          NS,
          '--file',
          routesFile,
        ],
        io,
      );
      expect(code, io.err).toBe(0);
      expect(io.err).not.toContain('forbidden');
      const imported = parse(readFileSync(routesFile, 'utf8')) as {
        vault: unknown;
        routes: Array<{ match: { path: string }; targets: Array<Record<string, unknown>> }>;
      };
      expect(imported.vault).toEqual({ mounts: { [vault.mount]: 2 } });
      expect(
        imported.routes.map((r) => [
          r.match.path,
          r.targets.map((t) => ({ namespace: t.namespace, sync: t.sync, restart: t.restart })),
        ]),
      ).toEqual([
        [
          `${vault.mount}/eso/orders-db`,
          [{ namespace: NS, sync: { kind: 'ExternalSecret', name: 'orders-db' }, restart: 'consumers' }],
        ],
        [
          `${vault.mount}/vso/web-db`,
          [{ namespace: NS, sync: { kind: 'VaultStaticSecret', name: 'web-db' }, restart: 'consumers' }],
        ],
      ]);
      const validateIo = memoryIo({ [routesFile]: readFileSync(routesFile, 'utf8') });
      expect(await main(['validate', routesFile], validateIo), validateIo.err).toBe(0);

      // As docs/how-to/import.md says: vault-rollout runs with its own identity, not the importer's list-only one.
      const doc = parseDocument(readFileSync(routesFile, 'utf8'));
      doc.setIn(
        ['clusters', OPERATORS_CLUSTER, 'kubeconfig', 'file'],
        cluster(OPERATORS_CLUSTER).vaultRolloutKubeconfig,
      );
      writeFileSync(routesFile, doc.toString());
      serve = await startServe(routesFile);
      await vault.server.client.enableAudit('http', 'http', {
        uri: `${serve.url}/v1/vault/audit`,
        headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
      });

      const before = Object.fromEntries(
        await Promise.all(apps.map(async (a) => [a, (await replicaSets(a)).length] as const)),
      ) as Record<(typeof apps)[number], number>;
      const existing = new Set((await Promise.all(apps.map(replicaSets))).flat().map((rs) => rs.metadata.name));
      const order = watchSecretsAndReplicaSets(cluster(OPERATORS_CLUSTER), NS);
      try {
        // The watches are open: they have listed what exists.
        await waitFor(
          async () =>
            order.events.some((e) => e.kind === 'Secret') && order.events.some((e) => e.kind === 'ReplicaSet'),
          { timeoutMs: 10_000, what: 'the watches to open' },
        );
        await vault.server.client.kv2Write(vault.mount, 'eso/orders-db', { password: 'two' });
        await vault.server.client.kv2Write(vault.mount, 'vso/web-db', { password: 'two' });
        await waitFor(
          async () =>
            (await replicaSets('orders')).length === before.orders + 1 &&
            (await replicaSets('web')).length === before.web + 1 &&
            (await replicaSets('worker')).length === before.worker + 1,
          { timeoutMs: 120_000, intervalMs: 200, what: 'one new ReplicaSet of orders, web and worker' },
        );
        expect(await secretValue('orders-db')).toBe('two');
        expect(await secretValue('web-db')).toBe('two');
        // Exactly one each, not two; the bystander none.
        await new Promise((r) => setTimeout(r, 4000));
        expect(
          Object.fromEntries(
            await Promise.all(apps.map(async (a) => [a, (await replicaSets(a)).length - before[a]] as const)),
          ),
        ).toEqual({ orders: 1, web: 1, worker: 1, bystander: 0 });
        // web restarted by VSO (its rolloutRestartTargets), not by vault-rollout; the Reloader readers by vault-rollout.
        expect(await template('web')).toHaveProperty(['vso.secrets.hashicorp.com/restartedAt']);
        expect(await template('web')).not.toHaveProperty(['vault-rollout.io/versions']);
        expect(JSON.parse((await template('worker'))['vault-rollout.io/versions'] ?? '{}')).toEqual({
          [`${vault.mount}/vso/web-db`]: 2,
        });
        expect(JSON.parse((await template('orders'))['vault-rollout.io/versions'] ?? '{}')).toEqual({
          [`${vault.mount}/eso/orders-db`]: 2,
        });
        expect(await template('bystander')).not.toHaveProperty(['vault-rollout.io/versions']);
        // Order, from the cluster: each Secret held the new value before its consumers' new ReplicaSets were created.
        const secretUpdated = (name: string) =>
          order.events.find((e) => e.kind === 'Secret' && e.name === name && e.type === 'MODIFIED' && e.data === 'two');
        for (const [secret, consumers] of [
          ['orders-db', ['orders']],
          ['web-db', ['web', 'worker']],
        ] as const) {
          const updated = secretUpdated(secret);
          expect(updated, `a watch event of Secret ${secret} with the new value`).toBeDefined();
          for (const app of consumers) {
            const added = order.events.filter(
              (e) => e.kind === 'ReplicaSet' && e.type === 'ADDED' && e.app === app && !existing.has(e.name),
            );
            expect(added, `one new ReplicaSet of ${app}`).toHaveLength(1);
            expect(updated?.rv, `Secret ${secret} before ${app}'s new ReplicaSet`).toBeLessThan(added[0]?.rv ?? 0);
          }
        }
      } finally {
        order.stop();
      }
    },
    SLOW,
  );
});
