/**
 * The real node of cluster alpha (test/clusters/real-node.ts) and the lane's OCI registry (test/clusters/registry.ts):
 * `npm run image -- --push` puts the vault-rollout image in the registry under the digest the build wrote; the node
 * is Ready on containerd beside the kwok nodes, tainted so that only pods asking for it land there; a pod there runs
 * the busybox image pulled from the registry, reads its own ServiceAccount, and reaches the API server through the
 * `kubernetes` Service (kube-proxy's rules in the node's namespace); and the API server reads its log from kubelet
 * (TLS both ways, kubelet's serving certificate checked against the cluster CA).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { loadClusters, waitFor, type KubeClient } from '../clusters/kube-http.ts';
import { REAL_NODE_LABEL, REAL_NODE_NAME, REAL_NODE_POD_PLACEMENT } from '../clusters/real-node.ts';
import { admin, createNamespace, deleteNamespace, repoRootDir, uniqueName } from './support.ts';

const run = promisify(execFile);
const NS = uniqueName('vr-real-node');
const SLOW = 180_000;
const { registry, testImages } = loadClusters();
let kube: KubeClient;

interface Condition {
  type: string;
  status: string;
}
interface NodeView {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { taints?: { key: string; value?: string; effect: string }[] };
  status: { conditions?: Condition[]; nodeInfo?: { containerRuntimeVersion?: string; kubeletVersion?: string } };
}
interface PodView {
  metadata: { name: string };
  spec: { nodeName?: string };
  status: { phase?: string; podIP?: string };
}

beforeAll(async () => {
  kube = admin(REAL_NODE_CLUSTER);
  await createNamespace(REAL_NODE_CLUSTER, NS);
});
afterAll(async () => {
  await deleteNamespace(REAL_NODE_CLUSTER, NS);
});

async function podLog(name: string): Promise<string> {
  const r = await kube.request('GET', `/api/v1/namespaces/${NS}/pods/${name}/log`);
  return r.status === 200 ? r.text : '';
}

/** A pod on the real node running `script` in the busybox image; resolves when it Succeeded, with its log. */
async function runOnRealNode(name: string, script: string): Promise<{ pod: PodView; log: string }> {
  const created = await kube.request('POST', `/api/v1/namespaces/${NS}/pods`, {
    body: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name },
      spec: {
        ...REAL_NODE_POD_PLACEMENT,
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'main', image: testImages!.busybox, command: ['/bin/sh', '-c', script] }],
      },
    },
  });
  expect(created.status, created.text.slice(0, 300)).toBe(201);
  const pod = await waitFor(
    async () => {
      const r = await kube.request<PodView>('GET', `/api/v1/namespaces/${NS}/pods/${name}`);
      if (r.body.status.phase === 'Failed') throw new Error(`pod ${name} failed: ${await podLog(name)}`);
      return r.body.status.phase === 'Succeeded' ? r.body : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250, what: `pod ${name} to succeed on ${REAL_NODE_NAME}` },
  );
  return { pod, log: await podLog(name) };
}

describe('the registry', () => {
  it(
    'npm run image -- --push stores the image under the digest the build wrote',
    async () => {
      expect(registry).toMatch(/^127\.0\.0\.1:\d+$/);
      const tag = `it-${Date.now().toString(36)}`;
      const { stdout } = await run(
        process.execPath,
        ['tools/image/build.ts', '--push', `${registry}/vault-rollout:${tag}`],
        { cwd: repoRootDir, maxBuffer: 1 << 20 },
      );
      const out = JSON.parse(stdout) as { manifestDigest: string; pushed: { reference: string; digest: string } };
      expect(out.pushed).toEqual({ reference: `${registry}/vault-rollout:${tag}`, digest: out.manifestDigest });
      const res = await fetch(`http://${registry}/v2/vault-rollout/manifests/${tag}`, {
        method: 'HEAD',
        headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('docker-content-digest')).toBe(out.manifestDigest);
    },
    SLOW,
  );
});

describe('the real node', () => {
  it('is Ready on containerd, labelled and tainted, beside the kwok nodes', async () => {
    const r = await kube.request<{ items: NodeView[] }>(
      'GET',
      `/api/v1/nodes?labelSelector=${encodeURIComponent(`${REAL_NODE_LABEL}=true`)}`,
    );
    expect(r.body.items.map((n) => n.metadata.name)).toEqual([REAL_NODE_NAME]);
    const node = r.body.items[0]!;
    expect(node.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(node.status.nodeInfo?.containerRuntimeVersion).toMatch(/^containerd:\/\/1\./);
    expect(node.spec.taints).toContainEqual({ key: REAL_NODE_LABEL, value: 'true', effect: 'NoSchedule' });
    const all = await kube.request<{ items: NodeView[] }>('GET', '/api/v1/nodes');
    expect(all.body.items.length).toBeGreaterThan(1);
  });

  it(
    'runs a pod from the registry that reaches the API server through the kubernetes Service',
    async () => {
      const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
      // busybox's TLS client checks no certificate and cannot talk to the API server (its handshake fails), so no HTTPS
      // request is made from the pod: nc connecting shows the Service's address routes to the API server (kube-proxy's
      // DNAT, the node's link, the host's forwarder).
      const { pod, log } = await runOnRealNode(
        'reach-api',
        [
          `echo "namespace=$(cat ${sa}/namespace)"`,
          'echo "service=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"',
          'if nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" </dev/null; then echo reached; else echo unreachable; fi',
        ].join('; '),
      );
      expect(pod.spec.nodeName).toBe(REAL_NODE_NAME);
      expect(pod.status.podIP).toMatch(/^10\.88\.0\.\d+$/);
      expect(log).toContain(`namespace=${NS}`);
      expect(log).toContain('service=10.0.0.1:443');
      expect(log).toMatch(/^reached$/m);
    },
    SLOW,
  );

  it(
    'leaves pods that do not ask for it to the kwok nodes',
    async () => {
      const created = await kube.request('POST', `/api/v1/namespaces/${NS}/pods`, {
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'elsewhere' },
          spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] },
        },
      });
      expect(created.status).toBe(201);
      const pod = await waitFor(
        async () => (await kube.request<PodView>('GET', `/api/v1/namespaces/${NS}/pods/elsewhere`)).body.spec.nodeName,
        { timeoutMs: 30_000, what: 'the pod to be scheduled' },
      );
      expect(pod).toMatch(/^kwok-node-/);
    },
    SLOW,
  );
});
