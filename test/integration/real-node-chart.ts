// What the tests that install the chart on alpha's real node share (helm-chart-in-cluster.test.ts,
// network-policy.test.ts): kubectl as alpha's admin, a remote cluster's kubeconfig as the node's pods reach it, a
// local PersistentVolume on the node with a StorageClass of its own for the StatefulSet's claim, and the wait for the
// restart the chart's serve makes in alpha and beta, and an audit entry posted to serve through `kubectl port-forward`.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { stringify } from 'yaml';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { loadClusters, waitFor } from '../clusters/kube-http.ts';
import { REAL_NODE_NAME } from '../clusters/real-node.ts';
import { admin, cluster, getWorkload, repoRootDir } from './support.ts';
import { kvWriteAudit } from './wave-fixtures.ts';

export const KUBECTL = join(repoRootDir, '.local/bin/kubectl');
export const HELM = join(repoRootDir, '.local/bin/helm');
const adminKubeconfig = () => cluster(REAL_NODE_CLUSTER).adminKubeconfig;

/** kubectl as alpha's admin; what it printed on stdout. */
export const kubectl = async (...args: string[]): Promise<string> =>
  (
    await promisify(execFile)(KUBECTL, [`--kubeconfig=${adminKubeconfig()}`, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    })
  ).stdout;

/** kubectl as alpha's admin with `input` on its stdin (`apply -f -`). */
export async function kubectlInput(input: string, ...args: string[]): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = execFile(KUBECTL, [`--kubeconfig=${adminKubeconfig()}`, ...args], (error, _stdout, stderr) =>
      error ? reject(new Error(`kubectl ${args[0]}: ${stderr}`)) : resolve(),
    );
    child.stdin?.end(input);
  });
}

/** A cluster's vault-rollout kubeconfig, certificates inline, its server where the real node's pods reach it. */
export function kubeconfigForPods(name: string): string {
  const { realNode } = loadClusters();
  if (realNode === undefined) throw new Error('this lane has no real node (clusters.json has no realNode)');
  const c = cluster(name);
  const flat = execFileSync(
    KUBECTL,
    ['config', 'view', '--raw', '--flatten', '--minify', `--kubeconfig=${c.vaultRolloutKubeconfig}`],
    { encoding: 'utf8' },
  );
  if (!flat.includes(`server: ${c.server}`)) throw new Error(`${name}'s kubeconfig does not name ${c.server}`);
  return flat.replace(`server: ${c.server}`, `server: https://${realNode.apiServersAt}:${new URL(c.server).port}`);
}

/**
 * A local PersistentVolume at `path` on the real node, of a StorageClass with no provisioner (Kubernetes' local
 * volumes): the StatefulSet's claim binds to it when the pod is scheduled; kubelet gives it to the pod's fsGroup.
 */
export async function createLocalVolume(storageClass: string, pv: string, path: string): Promise<void> {
  const objects = [
    {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'StorageClass',
      metadata: { name: storageClass },
      provisioner: 'kubernetes.io/no-provisioner',
      volumeBindingMode: 'WaitForFirstConsumer',
    },
    {
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: pv },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        storageClassName: storageClass,
        local: { path },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [REAL_NODE_NAME] }] },
            ],
          },
        },
      },
    },
  ];
  await kubectlInput(objects.map((o) => stringify(o)).join('---\n'), 'apply', '-f', '-');
}

/** Deletes what createLocalVolume made (the claim's namespace goes first). */
export async function deleteLocalVolume(storageClass: string, pv: string): Promise<void> {
  await kubectl(
    'delete',
    '--ignore-not-found',
    '--wait=false',
    `persistentvolume/${pv}`,
    `storageclass/${storageClass}`,
  );
}

/**
 * Waits until Deployment `apps`/app records `version` of `secret/<apps>/db` in alpha and in beta: the restart serve
 * (the pod `namespace`/`pod`) made; on a timeout the error carries the end of serve's log.
 */
export async function expectRestartedInAlphaAndBeta(
  apps: string,
  version: number,
  serve: { namespace: string; pod: string },
): Promise<void> {
  for (const c of ['alpha', 'beta']) {
    const versions = await waitFor(
      async () =>
        (await getWorkload(c, apps, 'Deployment', 'app')).spec.template?.metadata?.annotations?.[
          'vault-rollout.io/versions'
        ],
      { timeoutMs: 90_000, what: `app restarted in ${c}` },
    ).catch(async (error: unknown) => {
      const log = await kubectl('-n', serve.namespace, 'logs', serve.pod).catch((e: unknown) => String(e));
      throw new Error(`${String(error)}\nserve's log:\n${log.slice(-4000)}`);
    });
    expect(versions).toBe(`{"secret/${apps}/db":${version}}`);
  }
}

/**
 * Posts a KV v2 write of `path` (as `secret/a/b`) at `version` to the release's serve through `kubectl port-forward
 * svc/…`, with the bearer token of its webhook Secret (or `token` when given); the HTTP status. `readyz`: the
 * forwarded /readyz status, read first.
 */
export async function postThroughPortForward(
  namespace: string,
  release: string,
  port: number,
  audit: { path: string; version: number; token?: string },
): Promise<{ status: number; readyz: number }> {
  const secret = (
    await admin(REAL_NODE_CLUSTER).request('GET', `/api/v1/namespaces/${namespace}/secrets/vault-rollout-webhook`)
  ).body as { data: { token: string } };
  const forward = spawn(KUBECTL, [
    `--kubeconfig=${adminKubeconfig()}`,
    '-n',
    namespace,
    'port-forward',
    `svc/${release}`,
    `:${port}`,
  ]);
  try {
    let out = '';
    forward.stdout.on('data', (d: Buffer) => (out += d.toString()));
    forward.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const local = await waitFor(async () => /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out)?.[1], {
      timeoutMs: 30_000,
      what: `kubectl port-forward svc/${release}: ${out}`,
    });
    const base = `http://127.0.0.1:${local}`;
    const readyz = (await fetch(`${base}/readyz`)).status;
    const token = audit.token ?? Buffer.from(secret.data.token, 'base64').toString('utf8');
    const response = await fetch(`${base}/v1/vault/audit`, {
      method: 'POST',
      body: kvWriteAudit(`port-forward-${Date.now()}`, audit.path, audit.version),
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: response.status, readyz };
  } finally {
    forward.kill();
  }
}
