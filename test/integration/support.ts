/** Fixtures for integration tests on the local clusters: namespaces, workloads, identities, routing tables. */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterAccess } from '../../lib/kube/cluster-access.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import type { ClusterConfig } from '../../lib/routing/schema.ts';
import { clusterClient, loadClusters, waitFor, type ClusterInfo, type KubeClient } from '../clusters/kube-http.ts';
import { issueCert } from '../clusters/pki.ts';

export const { clusters } = loadClusters();
export const repoRootDir = fileURLToPath(new URL('../..', import.meta.url));
export const cluster = (name: string): ClusterInfo => {
  const c = clusters.find((x) => x.name === name);
  if (!c) throw new Error(`no test cluster ${name}`);
  return c;
};
export const admin = (name: string): KubeClient => clusterClient(cluster(name), 'admin');

export const uniqueName = (prefix: string): string =>
  `${prefix}-${Date.now().toString(36)}-${randomBytes(2).toString('hex')}`;

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

export async function createNamespace(clusterName: string, name: string): Promise<void> {
  await ok(admin(clusterName), 'POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name },
  });
}

export async function deleteNamespace(clusterName: string, name: string): Promise<void> {
  await admin(clusterName).request('DELETE', `/api/v1/namespaces/${name}`);
}

const podSpec = { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] };
const template = (app: string) => ({ metadata: { labels: { app } }, spec: podSpec });

/** The collection path of a kind, and a minimal valid object of it. */
export const KINDS = {
  Deployment: {
    path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/deployments`,
    body: (name: string, extra: Record<string, unknown> = {}) => ({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: template(name), ...extra },
    }),
  },
  StatefulSet: {
    path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/statefulsets`,
    body: (name: string) => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      spec: { replicas: 1, serviceName: name, selector: { matchLabels: { app: name } }, template: template(name) },
    }),
  },
  DaemonSet: {
    path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/daemonsets`,
    body: (name: string) => ({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      spec: { selector: { matchLabels: { app: name } }, template: template(name) },
    }),
  },
  CronJob: {
    path: (ns: string) => `/apis/batch/v1/namespaces/${ns}/cronjobs`,
    body: (_name: string) => ({
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      spec: {
        schedule: '0 0 1 1 *',
        jobTemplate: { spec: { template: { spec: { ...podSpec, restartPolicy: 'Never' } } } },
      },
    }),
  },
  Rollout: {
    path: (ns: string) => `/apis/argoproj.io/v1alpha1/namespaces/${ns}/rollouts`,
    body: (name: string) => ({
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Rollout',
      spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: template(name) },
    }),
  },
} as const;
export type TestKind = keyof typeof KINDS;

export async function createWorkload(
  clusterName: string,
  ns: string,
  kind: TestKind,
  name: string,
  meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
  extra?: Record<string, unknown>,
): Promise<void> {
  const body = (KINDS[kind].body as (n: string, e?: Record<string, unknown>) => Record<string, unknown>)(name, extra);
  await ok(admin(clusterName), 'POST', KINDS[kind].path(ns), { ...body, metadata: { name, namespace: ns, ...meta } });
}

export interface ObjectView {
  metadata: { resourceVersion: string; annotations?: Record<string, string>; generation?: number };
  spec: Record<string, unknown> & {
    template?: { metadata?: { annotations?: Record<string, string> } };
    restartAt?: string;
  };
}

export async function getWorkload(clusterName: string, ns: string, kind: TestKind, name: string): Promise<ObjectView> {
  return (await ok(admin(clusterName), 'GET', `${KINDS[kind].path(ns)}/${name}`)) as ObjectView;
}

/** Reads the workload once the controller has stopped writing its status (two reads 1 s apart agree). */
export async function settledWorkload(
  clusterName: string,
  ns: string,
  kind: TestKind,
  name: string,
): Promise<ObjectView> {
  let last = await getWorkload(clusterName, ns, kind, name);
  return waitFor(
    async () => {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await getWorkload(clusterName, ns, kind, name);
      const same = now.metadata.resourceVersion === last.metadata.resourceVersion;
      last = now;
      return same ? now : undefined;
    },
    { timeoutMs: 30_000, what: `${kind} ${name} to settle` },
  );
}

export async function replicaSetCount(clusterName: string, ns: string, app: string): Promise<number> {
  const list = (await ok(
    admin(clusterName),
    'GET',
    `/apis/apps/v1/namespaces/${ns}/replicasets?labelSelector=app%3D${app}`,
  )) as { items: unknown[] };
  return list.items.length;
}

/** Waits until the controller has made `count` ReplicaSets, and fails if it makes more. */
export async function expectReplicaSets(clusterName: string, ns: string, app: string, count: number): Promise<void> {
  await waitFor(async () => (await replicaSetCount(clusterName, ns, app)) >= count, {
    timeoutMs: 30_000,
    what: `${count} ReplicaSets for ${app}`,
  });
  // Give the controller the time it would take to make one more, then count again.
  await new Promise((r) => setTimeout(r, 1500));
  const final = await replicaSetCount(clusterName, ns, app);
  if (final !== count) throw new Error(`expected ${count} ReplicaSets for ${app}, found ${final}`);
}

export async function events(
  clusterName: string,
  ns: string,
  objectName: string,
): Promise<Array<{ reason: string; message: string }>> {
  const list = (await ok(
    admin(clusterName),
    'GET',
    `/api/v1/namespaces/${ns}/events?fieldSelector=involvedObject.name%3D${objectName}`,
  )) as { items: Array<{ reason: string; message: string }> };
  return list.items;
}

/** A client-certificate identity for `user`, bound by a Role in `namespace` only (the namespaced RBAC variant). */
export async function scopedKubeconfig(clusterName: string, user: string, namespace: string): Promise<string> {
  const c = cluster(clusterName);
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-it-'));
  const pkiDir = join(c.caFile, '..');
  const cert = issueCert(
    dir,
    { certFile: c.caFile, keyFile: join(pkiDir, 'ca.key') },
    { name: user, commonName: user, usage: 'client' },
  );
  const roleYaml = readFileSync(new URL('../../infra/rbac/role-namespaced.yaml', import.meta.url), 'utf8');
  const kube = admin(clusterName);
  const { parseAllDocuments } = await import('yaml');
  for (const doc of parseAllDocuments(roleYaml)) {
    const obj = doc.toJS() as { kind: string; metadata: Record<string, unknown>; subjects?: unknown[] };
    if (obj.kind === 'RoleBinding')
      obj.subjects = [{ kind: 'User', name: user, apiGroup: 'rbac.authorization.k8s.io' }];
    const plural = obj.kind === 'Role' ? 'roles' : 'rolebindings';
    await ok(kube, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/${plural}`, {
      ...obj,
      metadata: { ...obj.metadata, namespace },
    });
  }
  return writeClientKubeconfig(clusterName, user, cert, join(dir, 'kubeconfig'));
}

/** A kubeconfig file (mode 0600) for a client-certificate user of a test cluster. */
function writeClientKubeconfig(
  clusterName: string,
  user: string,
  cert: { certFile: string; keyFile: string },
  file: string,
): string {
  const c = cluster(clusterName);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: clusterName, server: c.server, caFile: c.caFile }],
    users: [{ name: user, certFile: cert.certFile, keyFile: cert.keyFile }],
    contexts: [{ name: clusterName, cluster: clusterName, user }],
    currentContext: clusterName,
  });
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/**
 * A client-certificate identity `vault-rollout-import` bound only to infra/rbac/import-clusterrole.yaml (what
 * `vault-rollout import` needs: list), as the kubeconfig file `<dir>/<cluster>.kubeconfig`.
 */
export async function importerKubeconfig(clusterName: string, dir: string): Promise<string> {
  const c = cluster(clusterName);
  const user = 'vault-rollout-import';
  const kube = admin(clusterName);
  const { parseAllDocuments } = await import('yaml');
  for (const doc of parseAllDocuments(
    readFileSync(new URL('../../infra/rbac/import-clusterrole.yaml', import.meta.url), 'utf8'),
  )) {
    const obj = doc.toJS() as { kind: string; metadata: { name: string } };
    const plural = obj.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
    await ok(
      kube,
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/${plural}/${obj.metadata.name}?fieldManager=vault-rollout-import-test&force=true`,
      obj,
      'application/apply-patch+yaml',
    );
  }
  const cert = issueCert(
    mkdtempSync(join(dir, `${clusterName}-`)),
    { certFile: c.caFile, keyFile: join(c.caFile, '..', 'ca.key') },
    { name: user, commonName: user, usage: 'client' },
  );
  return writeClientKubeconfig(clusterName, user, cert, join(dir, `${clusterName}.kubeconfig`));
}

/** A loopback port that nothing listens on any more: a stopped cluster's address. */
export async function closedPort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A kubeconfig like `base` with another server or CA: for unreachable and wrong-CA clusters. */
export function alteredKubeconfig(base: string, change: { server?: string; caFile?: string }): string {
  const kc = new KubeConfig();
  kc.loadFromFile(base);
  const current = kc.getCurrentCluster();
  if (!current) throw new Error(`${base} has no current cluster`);
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-it-'));
  const file = join(dir, 'kubeconfig');
  kc.loadFromOptions({
    clusters: [
      {
        ...current,
        ...(change.server ? { server: change.server } : {}),
        ...(change.caFile ? { caFile: change.caFile, caData: undefined } : {}),
      },
    ],
    users: kc.getUsers(),
    contexts: kc.getContexts(),
    currentContext: kc.getCurrentContext(),
  });
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** Access straight from a kubeconfig file (the routing table's `kubeconfig: { file }`). */
export async function fileAccess(_name: string, config: ClusterConfig): Promise<ClusterAccess> {
  if (!config.kubeconfig || !('file' in config.kubeconfig))
    throw new Error('test access handles kubeconfig files only');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(config.kubeconfig.file);
  return { kubeConfig, server: kubeConfig.getCurrentCluster()?.server ?? '', insecureSkipTLSVerify: false };
}

/** A routing table over the test clusters (vault-rollout identity), plus extra clusters and routes. */
export function routingTable(routes: string, extraClusters: Record<string, string> = {}): RoutingTable {
  const lines = ['clusters:'];
  for (const c of clusters)
    lines.push(
      `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} }, labels: { test: "yes" } }`,
    );
  for (const [name, file] of Object.entries(extraClusters))
    lines.push(`  ${name}: { kubeconfig: { file: ${JSON.stringify(file)} } }`);
  lines.push('vault:', '  mounts: { secret: 2, legacy: 1 }', 'routes:', routes);
  return loadRoutingTable(lines.join('\n'), 'integration.yaml');
}

/** A `vault-rollout serve` child process, once it listens. */
export interface ServeChild {
  child: ChildProcess;
  port: number;
}

/**
 * `serve` as its own process on any free port, with only the environment given (plus PATH unless given); resolves
 * once it listens, rejects if it exits first or does not listen within `listenTimeoutMs`.
 */
export function spawnServe(options: {
  routesFile: string;
  queueFile: string;
  env: Record<string, string | undefined>;
  listenTimeoutMs?: number;
  args?: readonly string[];
}): Promise<ServeChild> {
  const child = spawn(
    process.execPath,
    [
      join(repoRootDir, 'lib/cli/main.ts'),
      'serve',
      '--routes',
      options.routesFile,
      '--port',
      '0',
      '--queue-file',
      options.queueFile,
      ...(options.args ?? []),
    ],
    {
      cwd: repoRootDir,
      env: { PATH: process.env.PATH, ...options.env },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  const timeoutMs = options.listenTimeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    let err = '';
    const timer = setTimeout(
      () => (child.kill('SIGKILL'), reject(new Error(`serve did not listen in ${timeoutMs / 1000} s:\n${err}`))),
      timeoutMs,
    );
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err)?.[1];
      if (port) {
        clearTimeout(timer);
        resolve({ child, port: Number(port) });
      }
    });
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`serve exited ${code}:\n${err}`))));
  });
}
