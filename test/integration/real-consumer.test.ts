/**
 * The product's promise, shown by a process that read the value: a consumer on alpha's real node
 * (test/clusters/real-node.ts), the static busybox image from the lane's registry, prints the secret it was given as
 * an environment variable and as a mounted file — a Secret written by the real External Secrets Operator from
 * OpenBao. After `bao kv put` (OpenBao's CLI), OpenBao's http audit device tells `vault-rollout serve`, which nudges
 * the ExternalSecret, waits for ESO's write and restarts the consumer: the new pod prints the new value both ways and
 * the old pod is gone.
 *
 * ESO runs here for this test's namespace only (`--namespace`), as its own user bound to the ClusterRole the
 * operators' cluster uses (test/clusters/operators-rbac.yaml): the real node is alpha's, the shared operators beta's.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { loadClusters, waitFor, type KubeClient } from '../clusters/kube-http.ts';
import {
  ESO_API,
  applyObject,
  bindSyncOperatorsRbac,
  createSecretStore,
  externalSecretPath,
  type OperatorsVault,
} from '../clusters/operators.ts';
import { issueCert, writeKubeconfig } from '../clusters/pki.ts';
import { REAL_NODE_NAME, REAL_NODE_POD_PLACEMENT } from '../clusters/real-node.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { startServe, type Serve } from '../vault/e2e-stack.ts';
import { serverBinary, startDevServer } from '../vault/server.ts';
import { admin, closedPort, cluster, createNamespace, deleteNamespace, repoRootDir, uniqueName } from './support.ts';

const NS = uniqueName('vr-real-consumer');
const SLOW = 240_000;
const MOUNT = 'kv';
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-real-consumer-'));
const { testImages } = loadClusters();
const alpha = cluster(REAL_NODE_CLUSTER);
let kube: KubeClient;
let vault: OperatorsVault;
let eso: ChildProcess | undefined;
let serve: Serve | undefined;

const routes = `clusters:
  ${REAL_NODE_CLUSTER}: { kubeconfig: { file: ${JSON.stringify(alpha.vaultRolloutKubeconfig)} } }
vault: { mounts: { ${MOUNT}: 2 } }
routes:
  - name: consumer
    match: { path: "${MOUNT}/consumer/{service}" }
    targets: [{ clusters: [${REAL_NODE_CLUSTER}], namespace: ${NS}, names: ["*"], sync: { kind: ExternalSecret, name: "{service}" } }]
`;

/** OpenBao in dev mode: KV v2 at MOUNT and a read-only token for ESO. */
async function startVault(): Promise<OperatorsVault> {
  const server = await startDevServer({ kind: 'openbao' });
  await server.client.enableKv(MOUNT, 2, 'read by ESO');
  await server.client.writePolicy('consumer-read', `path "${MOUNT}/data/*" { capabilities = ["read"] }`);
  const { token: esoToken } = await server.client.createToken({
    policies: ['consumer-read'],
    ttl: '1h',
    displayName: 'external-secrets',
  });
  return { server, addr: server.addr, mount: MOUNT, esoToken, stop: () => server.stop() };
}

/** ESO's CRDs and ClusterRole on alpha, a client certificate for its user, and the controller for NS only. */
async function startEso(): Promise<ChildProcess> {
  const kubectl = join(repoRootDir, '.local/bin/kubectl');
  const crdDir = join(repoRootDir, '.local/bin/external-secrets-crds');
  const crds = readdirSync(crdDir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => `--filename=${join(crdDir, f)}`);
  await promisify(execFile)(
    kubectl,
    [
      `--kubeconfig=${alpha.adminKubeconfig}`,
      'apply',
      '--server-side',
      '--force-conflicts',
      '--field-manager=vault-rollout-tests',
      ...crds,
    ],
    { maxBuffer: 1 << 24 },
  );
  await promisify(execFile)(
    kubectl,
    [`--kubeconfig=${alpha.adminKubeconfig}`, 'wait', '--for=condition=Established', '--timeout=60s', ...crds],
    { maxBuffer: 1 << 24 },
  );
  const rbac = parseAllDocuments(readFileSync(join(repoRootDir, 'test/clusters/operators-rbac.yaml'), 'utf8'))
    .map((d) => d.toJS() as { kind: string; metadata: { name: string } })
    .filter((d) => d.kind.startsWith('ClusterRole') && d.metadata.name === 'vault-rollout-test:external-secrets');
  for (const doc of rbac) {
    const plural = doc.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
    const r = await kube.request(
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/${plural}/${doc.metadata.name}?fieldManager=vault-rollout-tests&force=true`,
      { body: stringify(doc), contentType: 'application/apply-patch+yaml' },
    );
    if (r.status >= 300) throw new Error(`apply ${doc.kind}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  }
  const pki = join(repoRootDir, '.local', alpha.caFile.split('/.local/')[1]!, '..');
  const user = 'vault-rollout-test:external-secrets';
  const cert = issueCert(
    dir,
    { certFile: join(pki, 'ca.crt'), keyFile: join(pki, 'ca.key') },
    { name: 'eso', commonName: user, usage: 'client' },
  );
  writeKubeconfig(join(dir, 'eso.kubeconfig'), REAL_NODE_CLUSTER, alpha.server, alpha.caFile, user, cert);
  const live = await closedPort();
  const child = spawn(
    join(repoRootDir, '.local/bin/external-secrets'),
    [
      `--namespace=${NS}`,
      '--metrics-addr=0',
      `--live-addr=127.0.0.1:${live}`,
      '--enable-leader-election=false',
      '--enable-cluster-store-reconciler=false',
      '--enable-cluster-external-secret-reconciler=false',
      '--enable-push-secret-reconciler=false',
      '--enable-cluster-push-secret-reconciler=false',
      '--enable-generator-state=false',
    ],
    { env: { ...process.env, KUBECONFIG: join(dir, 'eso.kubeconfig') }, stdio: 'ignore' },
  );
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`external-secrets exited with ${child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${live}/healthz`).catch(() => undefined))?.status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: 'external-secrets /healthz' },
  );
  return child;
}

beforeAll(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  kube = admin(REAL_NODE_CLUSTER);
  await createNamespace(REAL_NODE_CLUSTER, NS);
  vault = await startVault();
  eso = await startEso();
  await createSecretStore(kube, NS, vault);
  await bindSyncOperatorsRbac(kube);
  writeFileSync(join(dir, 'routes.yaml'), routes);
  serve = await startServe(join(dir, 'routes.yaml'));
}, SLOW);
afterAll(async () => {
  await serve?.stop();
  eso?.kill('SIGTERM');
  await vault?.stop();
  await deleteNamespace(REAL_NODE_CLUSTER, NS);
});

interface PodView {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
  status: { phase?: string };
}

const pods = async (): Promise<PodView[]> =>
  (await kube.request<{ items: PodView[] }>('GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dconsumer`)).body
    .items;
const podLog = async (name: string): Promise<string> => {
  const r = await kube.request('GET', `/api/v1/namespaces/${NS}/pods/${name}/log`);
  return r.status === 200 ? r.text : '';
};

/** The one running consumer pod whose log says `line`. */
async function podPrinting(line: string): Promise<PodView> {
  return waitFor(
    async () => {
      for (const p of await pods()) {
        if (
          p.status.phase === 'Running' &&
          !p.metadata.deletionTimestamp &&
          (await podLog(p.metadata.name)).includes(line)
        )
          return p;
      }
      return undefined;
    },
    { timeoutMs: 150_000, intervalMs: 500, what: `a consumer pod printing "${line}"` },
  );
}

/** `bao kv put` as a platform engineer types it, against the dev server (its root token in the environment only). */
async function baoKvPut(path: string, value: string): Promise<void> {
  await promisify(execFile)(serverBinary('openbao'), ['kv', 'put', `-mount=${MOUNT}`, path, `password=${value}`], {
    env: { ...process.env, BAO_ADDR: vault.addr, BAO_TOKEN: vault.server.token },
  });
}

describe('a consumer on the real node', () => {
  it(
    'prints the new secret from its environment and its file after bao kv put; the old pod is gone',
    async () => {
      await baoKvPut('consumer/db', 'one');
      await applyObject(kube, externalSecretPath(NS), 'db', {
        apiVersion: ESO_API,
        kind: 'ExternalSecret',
        metadata: { name: 'db', namespace: NS },
        spec: {
          refreshPolicy: 'OnChange',
          secretStoreRef: { name: 'openbao', kind: 'SecretStore' },
          target: { name: 'db', creationPolicy: 'Owner' },
          data: [{ secretKey: 'password', remoteRef: { key: 'consumer/db', property: 'password' } }],
        },
      });
      await waitFor(async () => (await kube.request('GET', `/api/v1/namespaces/${NS}/secrets/db`)).status === 200, {
        timeoutMs: 60_000,
        what: 'ESO to write the Secret',
      });
      const script = 'echo "env=$PASSWORD file=$(cat /etc/db/password)"; exec sleep 2147483647';
      const created = await kube.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
        body: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'consumer' },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: 'consumer' } },
            template: {
              metadata: { labels: { app: 'consumer' } },
              spec: {
                ...REAL_NODE_POD_PLACEMENT,
                terminationGracePeriodSeconds: 1,
                volumes: [{ name: 'db', secret: { secretName: 'db' } }],
                containers: [
                  {
                    name: 'app',
                    image: testImages!.busybox,
                    command: ['/bin/sh', '-c', script],
                    env: [{ name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }],
                    volumeMounts: [{ name: 'db', mountPath: '/etc/db', readOnly: true }],
                  },
                ],
              },
            },
          },
        },
      });
      expect(created.status, created.text.slice(0, 300)).toBe(201);
      const first = await podPrinting('env=one file=one');
      expect(first.spec.nodeName).toBe(REAL_NODE_NAME);

      const devices = await vault.server.client.listAudit();
      if (!Object.keys(devices).some((k) => k.startsWith('http'))) {
        await vault.server.client.enableAudit('http', 'http', {
          uri: `${serve!.url}/v1/vault/audit`,
          headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
        });
      }
      await baoKvPut('consumer/db', 'two');
      const second = await podPrinting('env=two file=two');
      expect(second.metadata.name).not.toBe(first.metadata.name);
      expect(second.spec.nodeName).toBe(REAL_NODE_NAME);
      await waitFor(
        async () => (await kube.request('GET', `/api/v1/namespaces/${NS}/pods/${first.metadata.name}`)).status === 404,
        { timeoutMs: 60_000, intervalMs: 500, what: `the old pod ${first.metadata.name} gone` },
      );
      expect((await pods()).map((p) => p.metadata.name)).toEqual([second.metadata.name]);
    },
    SLOW,
  );
});
