/**
 * `vault-rollout import` on the real clusters: ESO's and VSO's CRDs (infra/crds, the versions the test operators
 * run), VaultStaticSecrets, ExternalSecrets with Vault and non-Vault stores, and Reloader-annotated Deployments in
 * alpha and beta; import runs as an identity holding only infra/rbac/import-clusterrole.yaml; the table it writes
 * validates, and planning a Vault write targets exactly what the operators and Reloader would have restarted.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { main } from '../../lib/cli/main.ts';
import { reloaderRestarts, referencesSecret } from '../../lib/importer/import-sources.ts';
import type { KubeObject } from '../../lib/workloads/workload-kinds.ts';
import { waitFor, type KubeClient } from '../clusters/kube-http.ts';
import { memoryIo, repoRoot } from '../helpers.ts';
import { admin, createNamespace, deleteNamespace, importerKubeconfig, uniqueName } from './support.ts';

const IMPORTED = ['alpha', 'beta'] as const;
const ns = uniqueName('import');
const VAULT = 'http://127.0.0.1:8200';

async function ok(
  kube: KubeClient,
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
): Promise<unknown> {
  const res = await kube.request(method, path, { body, ...(contentType ? { contentType } : {}) });
  if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  return res.body;
}

/** Server-side apply as the test (idempotent across runs and beside whoever else installed the same object). */
const apply = (kube: KubeClient, path: string, obj: Record<string, unknown>) =>
  ok(kube, 'PATCH', `${path}?fieldManager=vault-rollout-import-test&force=true`, obj, 'application/apply-patch+yaml');

async function installCrds(name: string): Promise<void> {
  const kube = admin(name);
  for (const dir of ['external-secrets', 'vault-secrets-operator']) {
    for (const file of readdirSync(join(repoRoot, 'infra/crds', dir)).filter((f) => f.endsWith('.yaml'))) {
      const crd = parse(readFileSync(join(repoRoot, 'infra/crds', dir, file), 'utf8')) as {
        metadata: { name: string };
      };
      const res = await kube.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: crd });
      if (res.status >= 300 && res.status !== 409)
        throw new Error(`CRD ${crd.metadata.name}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
      await waitFor(
        async () => {
          const got = (await ok(
            kube,
            'GET',
            `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
          )) as { status?: { conditions?: Array<{ type: string; status: string }> } };
          return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
            ? true
            : undefined;
        },
        { timeoutMs: 30_000, what: `CRD ${crd.metadata.name} Established on ${name}` },
      );
    }
  }
}

const VSO = '/apis/secrets.hashicorp.com/v1beta1';
const ESO = '/apis/external-secrets.io/v1';
const envFrom = (secret: string) => ({
  containers: [{ name: 'app', image: 'registry.invalid/app:1', envFrom: [{ secretRef: { name: secret } }] }],
});
const deployment = (name: string, annotations: Record<string, string>, pod: Record<string, unknown>) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, namespace: ns, annotations },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: pod },
  },
});

/** What the operators declare in one cluster (alpha also has what import must refuse). */
function objects(name: string): Array<[string, Record<string, unknown>]> {
  const list: Array<[string, Record<string, unknown>]> = [
    [
      `${VSO}/namespaces/${ns}/vaultconnections/conn`,
      {
        apiVersion: 'secrets.hashicorp.com/v1beta1',
        kind: 'VaultConnection',
        metadata: { name: 'conn', namespace: ns },
        spec: { address: VAULT },
      },
    ],
    [
      `${VSO}/namespaces/${ns}/vaultauths/auth`,
      {
        apiVersion: 'secrets.hashicorp.com/v1beta1',
        kind: 'VaultAuth',
        metadata: { name: 'auth', namespace: ns },
        spec: {
          method: 'kubernetes',
          mount: 'kubernetes',
          vaultConnectionRef: 'conn',
          kubernetes: { role: 'app', serviceAccount: 'default' },
        },
      },
    ],
    [
      `${VSO}/namespaces/${ns}/vaultstaticsecrets/api-db`,
      {
        apiVersion: 'secrets.hashicorp.com/v1beta1',
        kind: 'VaultStaticSecret',
        metadata: { name: 'api-db', namespace: ns },
        spec: {
          vaultAuthRef: 'auth',
          mount: 'secret',
          type: 'kv-v2',
          path: `${ns}/api/db`,
          refreshAfter: '1h',
          destination: { name: 'api-db', create: true },
          rolloutRestartTargets: [{ kind: 'Deployment', name: 'api' }],
        },
      },
    ],
    [
      `${ESO}/namespaces/${ns}/secretstores/vault`,
      {
        apiVersion: 'external-secrets.io/v1',
        kind: 'SecretStore',
        metadata: { name: 'vault', namespace: ns },
        spec: {
          provider: {
            vault: {
              server: VAULT,
              path: 'secret',
              version: 'v2',
              auth: { tokenSecretRef: { name: 'vault-token', key: 'token' } },
            },
          },
        },
      },
    ],
    [
      `${ESO}/namespaces/${ns}/externalsecrets/web-config`,
      {
        apiVersion: 'external-secrets.io/v1',
        kind: 'ExternalSecret',
        metadata: { name: 'web-config', namespace: ns },
        spec: {
          refreshInterval: '1h',
          secretStoreRef: { name: 'vault', kind: 'SecretStore' },
          target: { name: 'web-config' },
          dataFrom: [{ extract: { key: `${ns}/web/config` } }],
        },
      },
    ],
    [`/apis/apps/v1/namespaces/${ns}/deployments/api`, deployment('api', {}, envFrom('api-db'))],
    [
      `/apis/apps/v1/namespaces/${ns}/deployments/web`,
      deployment('web', { 'reloader.stakater.com/auto': 'true' }, envFrom('web-config')),
    ],
    [
      `/apis/apps/v1/namespaces/${ns}/deployments/worker`,
      deployment(
        'worker',
        { 'secret.reloader.stakater.com/reload': 'web-config' },
        {
          containers: [
            { name: 'w', image: 'registry.invalid/w:1', volumeMounts: [{ name: 'config', mountPath: '/config' }] },
          ],
          volumes: [{ name: 'config', secret: { secretName: 'web-config' } }],
        },
      ),
    ],
    // Reads no operator's Secret: nothing imports it.
    [
      `/apis/apps/v1/namespaces/${ns}/deployments/unrelated`,
      deployment('unrelated', { 'reloader.stakater.com/auto': 'true' }, envFrom('something-else')),
    ],
  ];
  if (name === 'alpha') {
    list.push(
      [
        `${ESO}/namespaces/${ns}/secretstores/aws`,
        {
          apiVersion: 'external-secrets.io/v1',
          kind: 'SecretStore',
          metadata: { name: 'aws', namespace: ns },
          spec: { provider: { aws: { service: 'SecretsManager', region: 'eu-west-1' } } },
        },
      ],
      [
        `${ESO}/namespaces/${ns}/externalsecrets/from-aws`,
        {
          apiVersion: 'external-secrets.io/v1',
          kind: 'ExternalSecret',
          metadata: { name: 'from-aws', namespace: ns },
          spec: {
            secretStoreRef: { name: 'aws', kind: 'SecretStore' },
            data: [{ secretKey: 'k', remoteRef: { key: 'app' } }],
          },
        },
      ],
      [
        `${ESO}/namespaces/${ns}/externalsecrets/once`,
        {
          apiVersion: 'external-secrets.io/v1',
          kind: 'ExternalSecret',
          metadata: { name: 'once', namespace: ns },
          spec: {
            refreshPolicy: 'CreatedOnce',
            secretStoreRef: { name: 'vault', kind: 'SecretStore' },
            data: [{ secretKey: 'k', remoteRef: { key: `${ns}/once` } }],
          },
        },
      ],
    );
  }
  return list;
}

const auditWrite = (path: string, version: number) =>
  `${JSON.stringify({ time: '2026-11-23T23:00:00Z', type: 'response', request: { id: `import-${version}`, operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: `secret/data/${path}` }, response: { mount_type: 'kv', data: { version } } })}\n`;

describe('vault-rollout import on the test clusters', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-import-'));
  const out = join(dir, 'routes.yaml');
  const kubeconfigs: Record<string, string> = {};
  let imported: { code: number; out: string; err: string };

  beforeAll(async () => {
    for (const name of IMPORTED) {
      await installCrds(name);
      await createNamespace(name, ns);
      for (const [path, obj] of objects(name)) await apply(admin(name), path, obj);
      kubeconfigs[name] = await importerKubeconfig(name, dir);
    }
    const io = memoryIo();
    const code = await main(
      [
        'import',
        ...IMPORTED.flatMap((n) => ['--cluster', `${n}=${kubeconfigs[n]}`, '--label', `${n}:env=it`]),
        '--namespace',
        ns,
        '--file',
        out,
      ],
      io,
    );
    imported = { code, out: io.out, err: io.err };
  }, 120_000);

  afterAll(async () => {
    for (const name of IMPORTED) await deleteNamespace(name, ns);
  });

  it('reads with list permission only and writes one route per Vault path, for both clusters by their label', () => {
    expect(imported.err).not.toContain('forbidden');
    expect(imported.code, imported.err).toBe(0);
    const table = parse(readFileSync(out, 'utf8')) as {
      clusters: Record<string, unknown>;
      vault: unknown;
      routes: unknown[];
    };
    expect(table.clusters).toEqual({
      alpha: { kubeconfig: { file: 'alpha.kubeconfig' }, labels: { env: 'it' } },
      beta: { kubeconfig: { file: 'beta.kubeconfig' }, labels: { env: 'it' } },
    });
    expect(table.vault).toEqual({ mounts: { secret: 2 } });
    expect(table.routes).toEqual([
      {
        name: `secret-${ns}-api-db`,
        match: { path: `secret/${ns}/api/db` },
        targets: [
          {
            clusters: { env: 'it' },
            namespace: ns,
            sync: { kind: 'VaultStaticSecret', name: 'api-db' },
            restart: 'consumers',
          },
        ],
      },
      {
        name: `secret-${ns}-web-config`,
        match: { path: `secret/${ns}/web/config` },
        targets: [
          {
            clusters: { env: 'it' },
            namespace: ns,
            sync: { kind: 'ExternalSecret', name: 'web-config' },
            restart: 'consumers',
          },
        ],
      },
    ]);
  });

  it('lists what it cannot map, with why, on stderr and in the file', () => {
    const text = readFileSync(out, 'utf8');
    for (const line of [
      `alpha: ExternalSecret ${ns}/from-aws: data[0]: SecretStore aws is not a Vault store (provider: aws)`,
      `alpha: ExternalSecret ${ns}/once: refreshPolicy: CreatedOnce`,
    ]) {
      expect(imported.err).toContain(`not imported: ${line}`);
      expect(text).toContain(`#   ${line}`);
    }
    expect(imported.err).toContain('2 routes, 2 targets, 2 objects not imported');
  });

  it('the table validates', async () => {
    const io = memoryIo({ [out]: readFileSync(out, 'utf8') });
    expect(await main(['validate', out], io), io.err).toBe(0);
  });

  it('a Vault write plans exactly the objects whose sync restarts what the operators and Reloader restarted', async () => {
    const io = memoryIo({
      [out]: readFileSync(out, 'utf8'),
      '-': auditWrite(`${ns}/web/config`, 4) + auditWrite(`${ns}/api/db`, 9),
    });
    expect(await main(['plan', '--routes', out, '--json'], io), io.err).toBe(0);
    const planned = (JSON.parse(io.out) as { targets: Array<Record<string, unknown>> }).targets
      .map((t) => `${String(t.cluster)}/${String(t.namespace)}/${String(t.kind)}/${String(t.name)}`)
      .sort();
    expect(planned).toEqual([
      `alpha/${ns}/ExternalSecret/web-config`,
      `alpha/${ns}/VaultStaticSecret/api-db`,
      `beta/${ns}/ExternalSecret/web-config`,
      `beta/${ns}/VaultStaticSecret/api-db`,
    ]);
    // restart: consumers restarts the workloads whose pod template reads the synced Secret (VSO restarts its own
    // rolloutRestartTargets): read back from each cluster, that is exactly Reloader's set plus VSO's, nothing more.
    for (const name of IMPORTED) {
      const deployments = (
        (await ok(admin(name), 'GET', `/apis/apps/v1/namespaces/${ns}/deployments`)) as { items: KubeObject[] }
      ).items.map((d) => ({ ...d, kind: 'Deployment' }));
      const consumers = (secret: string) =>
        deployments
          .filter((d) => referencesSecret(d, secret))
          .map((d) => d.metadata?.name)
          .sort();
      const reloader = (secret: string) =>
        deployments
          .filter((d) => reloaderRestarts(d, secret, {}))
          .map((d) => d.metadata?.name)
          .sort();
      expect(consumers('web-config')).toEqual(reloader('web-config'));
      expect(reloader('web-config')).toEqual(['web', 'worker']);
      expect(consumers('api-db')).toEqual(['api']);
    }
  });
});
