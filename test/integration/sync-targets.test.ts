/**
 * Consumers and sync targets on a real cluster (alpha), as the vault-rollout identity: consumer discovery for every
 * reference form a pod template can hold, and the nudge of an ExternalSecret / VaultStaticSecret through RBAC
 * (infra/rbac/sync-operators.yaml) and the admission policy, with the operators' CRDs installed but no operator
 * (the operators themselves, end to end with OpenBao, are in sync-operators.test.ts). Without an operator nothing
 * syncs, so nothing may restart: that is asserted here too.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { runDoctor } from '../../lib/deploy/doctor.ts';
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../../lib/pipeline/kube-executor.ts';
import { SYNC_ANNOTATIONS } from '../../lib/workloads/sync-kinds.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import {
  admin,
  cluster,
  createNamespace,
  deleteNamespace,
  fileAccess,
  repoRootDir,
  routingTable,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-sync');
const fast: Partial<ExecutorOptions> = {
  retry: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200, maxRetryAfterMs: 1000 },
};

let seq = 0;
function write(key: string, version: number, time = '2026-11-20T10:00:00Z'): string {
  seq++;
  return JSON.stringify({
    time,
    type: 'response',
    request: {
      id: `req-sync-${seq}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/${key}`,
    },
    response: { data: { version } },
  });
}

async function apply(
  table: RoutingTable,
  lines: string[],
  options: Partial<ExecutorOptions> = {},
): Promise<RolloutResult[]> {
  const parsed = parseInput(lines.join('\n'), { mounts: table.mounts });
  expect(parsed.rejected).toEqual([]);
  return executeRollouts(table, planRollouts(table, parsed.changes).targets, {
    access: fileAccess,
    ...fast,
    ...options,
  });
}
const brief = (r: RolloutResult) =>
  `${r.kind}/${r.name}: ${r.outcome}${r.reason ? ` (${r.reason})` : ''}${r.rollout ? ` ${r.rollout}` : ''}`;

/** Server-side apply as the cluster admin (what an install does). */
function kubectlApply(manifest: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'vr-sync-'));
  const file = join(dir, 'manifest.yaml');
  writeFileSync(file, manifest);
  execFileSync(
    join(repoRootDir, '.local', 'bin', 'kubectl'),
    [
      `--kubeconfig=${cluster('alpha').adminKubeconfig}`,
      'apply',
      '--server-side',
      '--force-conflicts',
      '--field-manager=vault-rollout-tests',
      `--filename=${file}`,
    ],
    { stdio: 'pipe' },
  );
}

async function request(
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
): Promise<{ status: number; body: unknown; text: string }> {
  return admin('alpha').request(method, path, { body, ...(contentType ? { contentType } : {}) });
}
async function create(path: string, body: Record<string, unknown>): Promise<void> {
  const res = await request('POST', path, body);
  if (res.status >= 300) throw new Error(`POST ${path}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
}
async function resourceVersion(path: string): Promise<string> {
  return ((await request('GET', path)).body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
}

/**
 * What a patch by vault-rollout would change: the spec's generation (a pod template's record) and vault-rollout's own
 * annotations on the object. Not the resourceVersion, nor every annotation: the Deployment controller catching up
 * under load writes the status and `deployment.kubernetes.io/revision`.
 */
async function writtenState(path: string): Promise<string> {
  const { metadata } = (await request('GET', path)).body as {
    metadata: { generation?: number; annotations?: Record<string, string> };
  };
  const ours = Object.entries(metadata.annotations ?? {}).filter(([k]) => k.startsWith('vault-rollout.io/'));
  return JSON.stringify({ generation: metadata.generation, annotations: ours });
}

const pod = (spec: Record<string, unknown>) => ({
  metadata: { labels: { app: 'x' } },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }], ...spec },
});
const withContainer = (extra: Record<string, unknown>) => ({
  containers: [{ name: 'app', image: 'registry.invalid/app:1', ...extra }],
});
const deployment = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: { replicas: 0, selector: { matchLabels: { app: 'x' } }, template: pod(spec) },
});

/** The reference forms of a pod template, each in its own workload, and two that do not reference `db`. */
const WORKLOADS: Array<{ path: string; body: Record<string, unknown>; consumes: 'db' | 'vault-web' | 'none' }> = [
  {
    path: `/apis/apps/v1/namespaces/${NS}/deployments`,
    body: deployment(
      'env-secret-key-ref',
      withContainer({ env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] }),
    ),
    consumes: 'db',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/deployments`,
    body: deployment('env-from', withContainer({ envFrom: [{ secretRef: { name: 'db' } }] })),
    consumes: 'db',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/deployments`,
    body: deployment('init-container', {
      initContainers: [{ name: 'migrate', image: 'registry.invalid/m:1', envFrom: [{ secretRef: { name: 'db' } }] }],
    }),
    consumes: 'db',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/statefulsets`,
    body: {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'secret-volume' },
      spec: {
        replicas: 0,
        serviceName: 'x',
        selector: { matchLabels: { app: 'x' } },
        template: pod({ volumes: [{ name: 'creds', secret: { secretName: 'db' } }] }),
      },
    },
    consumes: 'db',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/daemonsets`,
    body: {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'projected' },
      spec: {
        selector: { matchLabels: { app: 'x' } },
        template: pod({
          nodeSelector: { 'vault-rollout.io/none': 'x' },
          volumes: [{ name: 'all', projected: { sources: [{ secret: { name: 'db' } }] } }],
        }),
      },
    },
    consumes: 'db',
  },
  {
    path: `/apis/batch/v1/namespaces/${NS}/cronjobs`,
    body: {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { name: 'cron-env' },
      spec: {
        schedule: '0 0 1 1 *',
        jobTemplate: {
          spec: {
            template: {
              spec: {
                ...withContainer({ env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'p' } } }] }),
                restartPolicy: 'Never',
              },
            },
          },
        },
      },
    },
    consumes: 'db',
  },
  {
    path: `/apis/argoproj.io/v1alpha1/namespaces/${NS}/rollouts`,
    body: {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Rollout',
      metadata: { name: 'argo-volume' },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'x' } },
        template: pod({ volumes: [{ name: 'creds', secret: { secretName: 'db' } }] }),
      },
    },
    consumes: 'db',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/deployments`,
    body: deployment('csi', {
      volumes: [
        {
          name: 'secrets',
          csi: {
            driver: 'secrets-store.csi.k8s.io',
            readOnly: true,
            volumeAttributes: { secretProviderClass: 'vault-web' },
          },
        },
      ],
    }),
    consumes: 'vault-web',
  },
  {
    path: `/apis/apps/v1/namespaces/${NS}/deployments`,
    body: deployment(
      'other-secret',
      withContainer({
        envFrom: [{ secretRef: { name: 'db-old' } }],
        env: [{ name: 'C', valueFrom: { configMapKeyRef: { name: 'db', key: 'k' } } }],
      }),
    ),
    consumes: 'none',
  },
  { path: `/apis/apps/v1/namespaces/${NS}/deployments`, body: deployment('nothing', {}), consumes: 'none' },
];

beforeAll(async () => {
  // The operators' CRDs, and the sync RBAC bound to the test clusters' vault-rollout user too.
  for (const file of [
    'external-secrets/external-secrets.io_externalsecrets.yaml',
    'vault-secrets-operator/secrets.hashicorp.com_vaultstaticsecrets.yaml',
  ])
    kubectlApply(readFileSync(join(repoRootDir, 'infra', 'crds', file), 'utf8'));
  const rbac = parseAllDocuments(readFileSync(join(repoRootDir, 'infra', 'rbac', 'sync-operators.yaml'), 'utf8')).map(
    (d) => d.toJS() as { kind: string; subjects?: unknown[] },
  );
  for (const doc of rbac)
    if (doc.kind === 'ClusterRoleBinding')
      doc.subjects = [
        ...(doc.subjects ?? []),
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' },
      ];
  kubectlApply(rbac.map((d) => stringify(d)).join('---\n'));
  await createNamespace('alpha', NS);
  for (const w of WORKLOADS)
    await create(w.path, { ...w.body, metadata: { ...(w.body.metadata as object), namespace: NS } });
  // The CRDs are established asynchronously: wait until the resource is served.
  for (const path of [
    `/apis/external-secrets.io/v1/namespaces/${NS}/externalsecrets`,
    `/apis/secrets.hashicorp.com/v1beta1/namespaces/${NS}/vaultstaticsecrets`,
  ]) {
    for (let i = 0; i < 100 && (await request('GET', path)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 100));
  }
}, 120_000);
afterAll(async () => {
  await deleteNamespace('alpha', NS);
});

describe('consumer discovery on a real cluster', () => {
  const table = () =>
    routingTable(`  - name: db
    match: { path: "secret/sync/db" }
    targets: [{ clusters: [alpha], namespace: ${NS}, consumers: { secret: db } }]
  - name: csi
    match: { path: "secret/sync/web" }
    targets: [{ clusters: [alpha], namespace: ${NS}, consumers: { secretProviderClass: vault-web } }]`);

  it('restarts every workload whose pod template references the Secret or mounts the class, and no other', async () => {
    const before = new Map<string, string>();
    for (const w of WORKLOADS)
      before.set(
        `${w.path}/${(w.body.metadata as { name: string }).name}`,
        await writtenState(`${w.path}/${(w.body.metadata as { name: string }).name}`),
      );
    const results = await apply(table(), [write('sync/db', 2), write('sync/web', 5)]);
    expect(results.map(brief).sort()).toEqual([
      'CronJob/cron-env: restarted',
      'DaemonSet/projected: restarted',
      'Deployment/csi: restarted',
      'Deployment/env-from: restarted',
      'Deployment/env-secret-key-ref: restarted',
      'Deployment/init-container: restarted',
      'Rollout/argo-volume: restarted',
      'StatefulSet/secret-volume: restarted',
    ]);
    expect(results.find((r) => r.name === 'projected')?.detail).toBe('consumes Secret db: projected volume all');
    expect(results.find((r) => r.name === 'csi')?.detail).toBe(
      'consumes SecretProviderClass vault-web: CSI volume secrets',
    );
    for (const w of WORKLOADS.filter((x) => x.consumes === 'none')) {
      const key = `${w.path}/${(w.body.metadata as { name: string }).name}`;
      expect(await writtenState(key), key).toBe(before.get(key));
    }
    // A replay restarts nothing.
    const replay = await apply(table(), [write('sync/db', 2), write('sync/web', 5)]);
    expect(new Set(replay.map((r) => r.outcome))).toEqual(new Set(['unchanged']));
  });
});

describe('sync targets with the CRDs and no operator', () => {
  const ES = `/apis/external-secrets.io/v1/namespaces/${NS}/externalsecrets`;
  const VSS = `/apis/secrets.hashicorp.com/v1beta1/namespaces/${NS}/vaultstaticsecrets`;
  const table = () =>
    routingTable(`  - name: es
    match: { path: "secret/sync/{service}/db" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], sync: { kind: ExternalSecret, name: "{service}-db" } }]
  - name: vss
    match: { path: "secret/sync/{service}/vss" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], sync: { kind: VaultStaticSecret, name: "{service}" } }]`);

  beforeAll(async () => {
    const es = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'external-secrets.io/v1',
      kind: 'ExternalSecret',
      metadata: { name, namespace: NS },
      spec: {
        secretStoreRef: { kind: 'SecretStore', name: 'openbao' },
        target: { name: 'db' },
        data: [{ secretKey: 'password', remoteRef: { key: 'x', property: 'password' } }],
        ...spec,
      },
    });
    await create(ES, es('orders-db', { refreshPolicy: 'OnChange' }));
    await create(ES, es('once-db', { refreshPolicy: 'CreatedOnce' }));
    await create(ES, es('zero-db', { refreshPolicy: 'Periodic', refreshInterval: '0s' }));
    await create(VSS, {
      apiVersion: 'secrets.hashicorp.com/v1beta1',
      kind: 'VaultStaticSecret',
      metadata: { name: 'web', namespace: NS },
      spec: { type: 'kv-v2', mount: 'secret', path: 'web', destination: { name: 'db' } },
    });
  });

  it('nudges through RBAC and the admission policy, waits, and restarts nothing while the Secret is not synced', async () => {
    const rv = await writtenState(`/apis/apps/v1/namespaces/${NS}/deployments/env-from`);
    const results = await apply(table(), [write('sync/orders/db', 7), write('sync/web/vss', 3)]);
    expect(results.map(brief).sort()).toEqual([
      'ExternalSecret/orders-db: restarted (sync requested) progressing',
      'VaultStaticSecret/web: restarted (sync requested) progressing',
    ]);
    const annotations = (
      (await request('GET', `${ES}/orders-db`)).body as { metadata: { annotations: Record<string, string> } }
    ).metadata.annotations;
    expect(
      Object.keys(annotations)
        .filter((k) => k.startsWith('vault-rollout.io/'))
        .sort(),
    ).toEqual([
      'vault-rollout.io/restart-token',
      SYNC_ANNOTATIONS.observed,
      SYNC_ANNOTATIONS.requestedAt,
      'vault-rollout.io/versions',
    ]);
    expect(await writtenState(`/apis/apps/v1/namespaces/${NS}/deployments/env-from`)).toBe(rv);
    // A replay: the same token, no second nudge.
    const esVersion = await resourceVersion(`${ES}/orders-db`);
    const replay = await apply(table(), [write('sync/orders/db', 7)]);
    expect(replay.map(brief)).toEqual([
      'ExternalSecret/orders-db: unchanged (already requested for this version) progressing',
    ]);
    expect(await resourceVersion(`${ES}/orders-db`)).toBe(esVersion);
  });

  it.each([
    ['once-db', /refreshPolicy CreatedOnce/],
    ['zero-db', /refreshInterval 0s: ESO ignores annotation changes.*use refreshPolicy: OnChange/],
  ])('refuses %s with its reason and patches nothing', async (name, why) => {
    const rv = await resourceVersion(`${ES}/${name}`);
    const [result, ...rest] = await apply(table(), [write(`sync/${name.replace(/-db$/, '')}/db`, 1)]);
    expect(rest).toEqual([]);
    expect(result).toMatchObject({ kind: 'ExternalSecret', name, outcome: 'skipped', reason: 'sync refused' });
    expect(result?.detail).toMatch(why);
    expect(await resourceVersion(`${ES}/${name}`)).toBe(rv);
  });

  it("doctor: the operators' CRDs are installed and the sync RBAC grants exactly what the routes need", async () => {
    const checks = (await runDoctor(table(), { access: fileAccess })).filter((c) => c.cluster === 'alpha');
    const byName = new Map(checks.map((c) => [c.check, c]));
    expect(byName.get('ExternalSecret CRD')).toMatchObject({
      ok: true,
      detail: 'installed (external-secrets.io/v1 externalsecrets): the External Secrets Operator can be nudged',
    });
    expect(byName.get('VaultStaticSecret CRD')).toMatchObject({ ok: true });
    for (const verb of ['get', 'list', 'watch', 'patch']) {
      expect(byName.get(`${verb} externalsecrets in namespace ${NS}`)).toMatchObject({ ok: true });
      expect(byName.get(`${verb} vaultstaticsecrets in namespace ${NS}`)).toMatchObject({ ok: true });
      expect(byName.get(`${verb} deployments in namespace ${NS}`)).toMatchObject({ ok: true });
    }
    expect(checks.filter((c) => !c.ok).map((c) => c.check)).toEqual([]);
  });

  it('the admission policy lets the vault-rollout identity change only the nudge annotations of an ExternalSecret', async () => {
    const { KubeConfig } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    kc.loadFromFile(cluster('alpha').vaultRolloutKubeconfig);
    const { kubeApiFor } = await import('../../lib/kube/kube-api.ts');
    const { PatchStrategy } = await import('@kubernetes/client-node');
    const api = kubeApiFor({
      kubeConfig: kc,
      server: kc.getCurrentCluster()?.server ?? '',
      insecureSkipTLSVerify: false,
    });
    const kind = { apiVersion: 'external-secrets.io/v1', kind: 'ExternalSecret' };
    await expect(
      api.patch(kind, NS, 'orders-db', { spec: { target: { name: 'elsewhere' } } }, PatchStrategy.MergePatch, false),
    ).rejects.toMatchObject({ code: 403 });
    await expect(
      api.patch(
        kind,
        NS,
        'orders-db',
        { metadata: { annotations: { 'force-sync': '1' } } },
        PatchStrategy.MergePatch,
        false,
      ),
    ).rejects.toMatchObject({ code: 403 });
  });
});
