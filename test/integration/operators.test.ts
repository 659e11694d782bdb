/**
 * The real External Secrets Operator and Vault Secrets Operator controllers (test/clusters: built from their Go
 * modules, running on OPERATORS_CLUSTER) against a real OpenBao: each syncs a KV v2 secret into a Kubernetes Secret,
 * and an annotation change on its object makes it read Vault again at once and write the new version, which is what
 * vault-rollout's nudge relies on. The Secrets are read with the admin identity, in this test only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor, type KubeClient } from '../clusters/kube-http.ts';
import {
  ESO_API,
  OPERATORS_CLUSTER,
  VSO_API,
  applyObject,
  conditionOf,
  createSecretStore,
  createVaultAuth,
  externalSecretPath,
  getObject,
  startOperatorsVault,
  vaultStaticSecretPath,
  type OperatorObject,
  type OperatorsVault,
} from '../clusters/operators.ts';
import {
  admin,
  createNamespace,
  createWorkload,
  deleteNamespace,
  events,
  expectReplicaSets,
  getWorkload,
  replicaSetCount,
  settledWorkload,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-operators');
const SLOW = { timeout: 120_000 };
const NUDGE = 'vault-rollout.test/nudge';
let kube: KubeClient;
let vault: OperatorsVault;

beforeAll(async () => {
  kube = admin(OPERATORS_CLUSTER);
  await createNamespace(OPERATORS_CLUSTER, NS);
  vault = await startOperatorsVault();
  await createSecretStore(kube, NS, vault);
  await createVaultAuth(kube, NS, vault);
}, SLOW.timeout);
afterAll(async () => {
  await deleteNamespace(OPERATORS_CLUSTER, NS);
  await vault?.stop();
});

/** One key of a Secret's data, decoded (admin identity: the test checks what the operator wrote). */
async function secretValue(name: string, key: string): Promise<string | undefined> {
  const r = await kube.request<{ data?: Record<string, string> }>('GET', `/api/v1/namespaces/${NS}/secrets/${name}`);
  if (r.status === 404) return undefined;
  const b64 = r.body.data?.[key];
  return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
}

async function annotate(path: string, value: string): Promise<void> {
  const r = await kube.request('PATCH', path, {
    body: { metadata: { annotations: { [NUDGE]: value } } },
    contentType: 'application/merge-patch+json',
  });
  expect(r.status).toBe(200);
}

/** Waits past the whole second of `time` (status.refreshTime and VSO's restartedAt have a resolution of 1 s). */
async function nextSecond(time: string): Promise<void> {
  const wait = Date.parse(time) + 1_000 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait + 50));
}

describe('External Secrets Operator (external-secrets.io/v1, provider vault, KV v2, token auth)', () => {
  const policies = [
    { name: 'periodic-db', refresh: { refreshPolicy: 'Periodic', refreshInterval: '1h' } },
    { name: 'onchange-db', refresh: { refreshPolicy: 'OnChange' } },
  ];

  it.each(policies)(
    '$name: syncs, then an annotation makes it read the new version at once',
    async ({ name, refresh }) => {
      const key = `eso/${name}`;
      await vault.server.client.kv2Write(vault.mount, key, { password: 'one' });
      await applyObject(kube, externalSecretPath(NS), name, {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name, namespace: NS },
        spec: {
          ...refresh,
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name, creationPolicy: 'Owner' },
          data: [{ secretKey: 'password', remoteRef: { key, property: 'password' } }],
        },
      });
      const synced = (min: string | undefined) =>
        waitFor(
          async () => {
            const es = await getObject(kube, `${externalSecretPath(NS)}/${name}`);
            const ready = conditionOf(es, 'Ready');
            const at = es.status?.refreshTime;
            return ready?.status === 'True' &&
              ready.reason === 'SecretSynced' &&
              at !== undefined &&
              (min === undefined || at > min)
              ? es
              : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 200, what: `ExternalSecret ${name} synced` },
        );
      const first = await synced(undefined);
      expect(await secretValue(name, 'password')).toBe('one');

      const t1 = first.status?.refreshTime ?? '';
      await vault.server.client.kv2Write(vault.mount, key, { password: 'two' });
      // No refresh of its own: the interval is an hour (Periodic) or there is none (OnChange).
      expect(await secretValue(name, 'password')).toBe('one');

      await nextSecond(t1);
      await annotate(`${externalSecretPath(NS)}/${name}`, 'version-2');
      const second = await synced(t1);
      expect(await secretValue(name, 'password')).toBe('two');
      expect(second.status?.syncedResourceVersion).not.toBe(first.status?.syncedResourceVersion);
    },
    SLOW.timeout,
  );
});

describe('Vault Secrets Operator (secrets.hashicorp.com/v1beta1, kubernetes auth against the API server)', () => {
  it(
    'syncs, then an annotation makes it read the new version and restart its rolloutRestartTargets itself',
    async () => {
      const name = 'web-db';
      const key = 'vso/web-db';
      await createWorkload(OPERATORS_CLUSTER, NS, 'Deployment', 'web');
      await expectReplicaSets(OPERATORS_CLUSTER, NS, 'web', 1);
      await vault.server.client.kv2Write(vault.mount, key, { password: 'one' });
      await applyObject(kube, vaultStaticSecretPath(NS), name, {
        apiVersion: VSO_API,
        kind: 'VaultStaticSecret',
        metadata: { name, namespace: NS },
        spec: {
          vaultAuthRef: 'openbao',
          mount: vault.mount,
          type: 'kv-v2',
          path: key,
          // Without refreshAfter, hmacSecretData makes VSO poll every 60 s; an hour keeps the annotation the only trigger.
          refreshAfter: '1h',
          hmacSecretData: true,
          destination: { name, create: true },
          rolloutRestartTargets: [{ kind: 'Deployment', name: 'web' }],
        },
      });
      const macAfter = (previous: string | undefined) =>
        waitFor(
          async () => {
            const vss = await getObject(kube, `${vaultStaticSecretPath(NS)}/${name}`);
            const mac = vss.status?.secretMAC;
            return mac !== undefined && mac !== '' && mac !== previous ? vss : undefined;
          },
          { timeoutMs: 60_000, intervalMs: 200, what: `VaultStaticSecret ${name} synced` },
        );
      await macAfter(undefined);
      await waitFor(async () => (await secretValue(name, 'password')) === 'one', {
        timeoutMs: 30_000,
        what: 'Secret web-db = one',
      });
      // VSO v0.10.0 may already restart the targets once right after creating the Secret (a second reconcile of the
      // new object, same second, reason SecretRotated): count the ReplicaSets once it has settled.
      await settledWorkload(OPERATORS_CLUSTER, NS, 'Deployment', 'web');
      const first: OperatorObject = await getObject(kube, `${vaultStaticSecretPath(NS)}/${name}`);
      const before = await replicaSetCount(OPERATORS_CLUSTER, NS, 'web');
      const restartedAt = async () =>
        (await getWorkload(OPERATORS_CLUSTER, NS, 'Deployment', 'web')).spec.template?.metadata?.annotations?.[
          'vso.secrets.hashicorp.com/restartedAt'
        ];
      const restartedBefore = await restartedAt();

      await vault.server.client.kv2Write(vault.mount, key, { password: 'two' });
      expect(await secretValue(name, 'password')).toBe('one');
      await annotate(`${vaultStaticSecretPath(NS)}/${name}`, 'version-2');
      await macAfter(first.status?.secretMAC);
      expect(await secretValue(name, 'password')).toBe('two');
      const restarted = await waitFor(
        async () => {
          const at = await restartedAt();
          return at !== undefined && at !== restartedBefore ? at : undefined;
        },
        { timeoutMs: 30_000, what: 'VSO restart of web' },
      );
      expect(Date.parse(restarted)).not.toBeNaN();
      await expectReplicaSets(OPERATORS_CLUSTER, NS, 'web', before + 1);
      expect((await events(OPERATORS_CLUSTER, NS, name)).map((e) => e.reason)).toEqual(
        expect.arrayContaining(['SecretSynced', 'SecretRotated']),
      );
    },
    SLOW.timeout,
  );
});
