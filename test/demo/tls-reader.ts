/**
 * `npm start`'s consumer: one workload that really runs, so a newcomer sees a restarted process read the new secret,
 * not only a new ReplicaSet. The Deployment edge/tls-reader in alpha, labelled like edge/web (route shared-tls
 * restarts it), runs the test clusters' busybox image on alpha's real node (test/clusters/real-node.ts). At start-up
 * it reads secret/shared/tls from OpenBao, as an application or a Vault Agent init container would, with a token
 * that may read that path only, and prints the version it read (never the value). OpenBao listens on 127.0.0.1: a
 * socat on the host's end of the node's link carries the pod's connections to it, and only those.
 *
 * The view polls the pods and their logs: each new pod's line once, and each pod that is gone.
 */
import { spawn } from 'node:child_process';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { credentialsFor, kubeRequest, type ClustersFile } from '../clusters/kube-http.ts';
import { REAL_NODE_POD_PLACEMENT } from '../clusters/real-node.ts';
import type { DevServer } from '../vault/server.ts';

export const TLS_READER = { namespace: 'edge', name: 'tls-reader' } as const;
const POLICY = 'shared-tls-reader';
const READ_LINE = /^read secret\/shared\/tls version (\S+)$/m;

/** What the pod runs: read once, print the version, then wait to be replaced. */
const SCRIPT = [
  'out=$(wget -q -O- --header "X-Vault-Token: $BAO_TOKEN" "$BAO_ADDR/v1/secret/data/shared/tls" 2>/dev/null) || out=',
  `version=$(echo "$out" | sed -n 's/.*"version":\\([0-9]*\\).*/\\1/p')`,
  'echo "read secret/shared/tls version ${version:-none}"',
  "trap 'exit 0' TERM",
  'while :; do sleep 3600 & wait $!; done',
].join('\n');

/** The Secret with the reader's token and the Deployment, for `kubectl apply`. */
export function tlsReaderObjects(
  image: string,
  baoAddr: string,
  token: string,
  labels: Record<string, string>,
): object[] {
  const { namespace, name } = TLS_READER;
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace, name: `${name}-openbao` },
      stringData: { token },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { namespace, name, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name, ...labels } },
          spec: {
            ...REAL_NODE_POD_PLACEMENT,
            terminationGracePeriodSeconds: 2,
            automountServiceAccountToken: false,
            containers: [
              {
                name: 'reader',
                image,
                command: ['sh', '-c', SCRIPT],
                env: [
                  { name: 'BAO_ADDR', value: baoAddr },
                  { name: 'BAO_TOKEN', valueFrom: { secretKeyRef: { name: `${name}-openbao`, key: 'token' } } },
                ],
                securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 65532 },
              },
            ],
          },
        },
      },
    },
  ];
}

/**
 * The reader's token (read on secret/data/shared/tls only) and the forwarder to OpenBao on the node's link; returns
 * the address the pod uses and a stop. Undefined where the lane has no real node.
 */
export async function prepareTlsReader(
  file: ClustersFile,
  bao: DevServer,
): Promise<{ baoAddr: string; token: string; image: string; stop: () => Promise<void> } | undefined> {
  if (file.realNode === undefined || file.testImages === undefined) return undefined;
  await bao.client.writePolicy(POLICY, 'path "secret/data/shared/tls" { capabilities = ["read"] }');
  const { token } = await bao.client.createToken({ policies: [POLICY], ttl: '24h', displayName: 'tls-reader' });
  const port = new URL(bao.addr).port;
  const host = file.realNode.apiServersAt;
  const forwarder = spawn(
    '/usr/bin/socat',
    [`TCP-LISTEN:${port},bind=${host},reuseaddr,fork`, `TCP:127.0.0.1:${port}`],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => forwarder.once('exit', () => resolve()));
  return {
    baoAddr: `http://${host}:${port}`,
    token,
    image: file.testImages.busybox,
    stop: async () => {
      forwarder.kill();
      await exited;
    },
  };
}

interface PodView {
  metadata: { name: string; uid: string };
  spec: { nodeName?: string };
  status: { phase?: string };
}

/**
 * Polls the reader's pods in alpha: `show` gets one line per pod that printed what it read, and one per pod that is
 * gone after it was shown. Returns a stop.
 */
export function watchTlsReader(file: ClustersFile, show: (word: string, text: string) => void): () => void {
  const alpha = file.clusters.find((c) => c.name === REAL_NODE_CLUSTER);
  if (alpha === undefined) return () => undefined;
  const creds = credentialsFor(alpha, 'admin');
  const { namespace, name } = TLS_READER;
  const shown = new Map<string, string>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const poll = async (): Promise<void> => {
    const listed = await kubeRequest<{ items?: PodView[] }>(
      alpha.server,
      creds,
      'GET',
      `/api/v1/namespaces/${namespace}/pods?labelSelector=app%3D${name}`,
    ).catch(() => undefined);
    if (listed?.status !== 200) return;
    const pods = listed.body.items ?? [];
    for (const pod of pods) {
      if (shown.has(pod.metadata.uid) || pod.status.phase !== 'Running') continue;
      const log = await kubeRequest(
        alpha.server,
        creds,
        'GET',
        `/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}/log?limitBytes=4096`,
      ).catch(() => undefined);
      const version = log?.status === 200 ? READ_LINE.exec(log.text)?.[1] : undefined;
      if (version === undefined) continue;
      shown.set(pod.metadata.uid, pod.metadata.name);
      show(
        'read',
        `${namespace}/${name} pod ${pod.metadata.name} on ${pod.spec.nodeName ?? '?'} read secret/shared/tls version ${version}`,
      );
    }
    const present = new Set(pods.map((p) => p.metadata.uid));
    for (const [uid, podName] of shown) {
      if (present.has(uid)) continue;
      shown.delete(uid);
      show('gone', `${namespace}/${name} pod ${podName}`);
    }
  };
  const loop = async (): Promise<void> => {
    await poll();
    if (!stopped) timer = setTimeout(() => void loop(), 1_000);
  };
  void loop();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
