// Local Kubernetes clusters for the integration tests: three real control
// planes (`alpha`, `beta`, `gamma`) on 127.0.0.1, sharing one etcd (separate
// --etcd-prefix per cluster), each with its own CA, RBAC,
// kube-controller-manager and kube-scheduler, and three simulated nodes played
// by kwok (no kubelet, no containers): pods are scheduled, get an IP and
// become Running and Ready following test/clusters/kwok-stages.yaml.
//
//   node test/clusters/clusters.ts up       # build/reuse binaries, start or reuse the clusters
//   node test/clusters/clusters.ts status   # what runs, /readyz, memory
//   node test/clusters/clusters.ts down     # stop everything, delete etcd data
//
// State lives in <repo>/.local/ (bin/, clusters/, etcd/); binaries are cached
// by build-binaries.sh under ~/.cache/vault-rollout. Runs on Node >= 24 with
// type stripping; only node: built-ins.
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  CLUSTERS_DIR,
  CLUSTERS_FILE,
  REPO_ROOT,
  kubeRequest,
  loadClusters,
  waitFor,
  type ClusterInfo,
  type ClustersFile,
} from './kube-http.ts';
import { ensureDebianPackages } from './debian-packages.ts';
import { issueCert, writeCa, writeKeyPair, writeKubeconfig, type CertFiles } from './pki.ts';
import {
  DiedError,
  httpGet,
  isAlive,
  isPid,
  procCmdline,
  rethrowWithLog,
  run,
  runningPid,
  sleep,
  startProcess,
  stopPids,
  type Managed,
  type RunResult,
} from './processes.ts';
import {
  REAL_NODE_NAME,
  cleanUpRealNode,
  issueRealNodeCerts,
  realNodeNetwork,
  realNodePaths,
  realNodeProcesses,
  startRealNode,
  type RealNodeCerts,
} from './real-node.ts';
import { REGISTRY_BINARY, pushTestImages, registryProcess, startRegistry, type TestImages } from './registry.ts';
import {
  COMPATIBILITY_KUBERNETES_VERSION,
  KUBERNETES_VERSION as MAIN_KUBERNETES_VERSION,
  LANE_KUBERNETES_BIN_SUBDIR,
  LANE_KUBERNETES_VERSION,
  LANE_LOCAL_DIR,
} from '../lanes.ts';

export const CLUSTER_NAMES = ['alpha', 'beta', 'gamma'] as const;
export type ClusterName = (typeof CLUSTER_NAMES)[number];
/** This lane's Kubernetes (test/lanes.ts): v1.37.2, or v1.32.13 in the compatibility lane. */
export const KUBERNETES_VERSION = LANE_KUBERNETES_VERSION;

const LOCAL_DIR = join(REPO_ROOT, '.local');
/** The binaries are every lane's; the clusters' state and lock are the lane's own (test/lanes.ts). */
const BIN_DIR = join(LOCAL_DIR, 'bin');
const ETCD_DIR = join(LANE_LOCAL_DIR, 'etcd');
const LOCK_FILE = join(LANE_LOCAL_DIR, 'clusters.lock');
const BUILD_SCRIPT = join(REPO_ROOT, 'test', 'clusters', 'build-binaries.sh');
const RBAC_MANIFEST = join(REPO_ROOT, 'infra', 'rbac', 'clusterrole.yaml');
const CRD_MANIFEST = join(REPO_ROOT, 'infra', 'crds', 'argo-rollouts-crd.yaml');
const KWOK_STAGES = join(REPO_ROOT, 'test', 'clusters', 'kwok-stages.yaml');
/** The full Argo Rollouts CRDs, copied by build-binaries.sh from the argo-rollouts module it builds. */
const ARGO_CRDS_DIR = join(BIN_DIR, 'argo-rollouts-crds');
/** Every CRD of each operator's module, copied by build-binaries.sh (infra/crds/ commits the ones the product reads). */
const ESO_CRDS_DIR = join(BIN_DIR, 'external-secrets-crds');
const VSO_CRDS_DIR = join(BIN_DIR, 'vault-secrets-operator-crds');
const OPERATORS_RBAC = join(REPO_ROOT, 'test', 'clusters', 'operators-rbac.yaml');

const bin = (name: string): string => join(BIN_DIR, name);

// Controllers needed for Deployments → ReplicaSets, namespace deletion,
// ownerReference cleanup and per-namespace `default` ServiceAccounts; pod GC
// (pods of deleted nodes, terminated pods) and finished-Job TTLs; and claims bound to PersistentVolumes (a
// StatefulSet's volumeClaimTemplates on the real node), with the protection that keeps a used claim until its pod goes.
const CONTROLLERS = [
  'deployment-controller',
  'replicaset-controller',
  'statefulset-controller',
  'daemonset-controller',
  'cronjob-controller',
  'job-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'root-ca-certificate-publisher-controller',
  'namespace-controller',
  'garbage-collector-controller',
  'pod-garbage-collector-controller',
  'ttl-after-finished-controller',
  'persistentvolume-binder-controller',
  'persistentvolume-protection-controller',
  'persistentvolumeclaim-protection-controller',
];

/** The simulated nodes of every cluster; kwok manages the nodes carrying KWOK_NODE_ANNOTATION. */
export const NODE_NAMES = ['kwok-node-0', 'kwok-node-1', 'kwok-node-2'] as const;
/**
 * The real node (test/clusters/real-node.ts) joins cluster alpha in the lanes of the main Kubernetes version: its
 * kubelet is that version's, and a kubelet newer than its API server is not supported (lane c runs an older one).
 */
export const REAL_NODE_CLUSTER: ClusterName = 'alpha';
export const REAL_NODE_ENABLED = LANE_KUBERNETES_VERSION === MAIN_KUBERNETES_VERSION;
const realNode = () => {
  const base = ports().etcdClient;
  return {
    paths: realNodePaths(join(CLUSTERS_DIR, REAL_NODE_CLUSTER, 'node')),
    net: realNodeNetwork(base),
    cgroupRoot: `/vault-rollout-${base}`,
  };
};
const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node=fake';
/** Pod IPs kwok hands out (the Service range is 10.0.0.0/24; nothing is routed to either). */
const KWOK_POD_CIDR = '10.244.0.0/16';

/**
 * The real Argo Rollouts controller runs on one cluster only, in namespaced mode: it reconciles the Rollouts of
 * ARGO_NAMESPACE and nothing else, so the other tests' Rollouts (elsewhere) stay untouched objects.
 */
export const ARGO_CLUSTER: ClusterName = 'alpha';
export const ARGO_NAMESPACE = 'argo-rollouts';

/**
 * The real External Secrets Operator (v0.20.4, Vault provider only) and Vault Secrets Operator (v0.10.0) controllers
 * run on this cluster only, cluster-wide, each as its own user (test/clusters/operators-rbac.yaml). The other clusters
 * have neither their CRDs nor their controllers. test/clusters/operators.ts connects them to an OpenBao.
 */
export const OPERATORS_CLUSTER: ClusterName = 'beta';
/** The namespace VSO calls its own (OPERATOR_NAMESPACE): it holds the OpenBao token reviewer's ServiceAccount. */
export const VSO_NAMESPACE = 'vault-secrets-operator';

// ---------------------------------------------------------------------------
// Ports: VAULT_ROLLOUT_CLUSTERS_PORT_BASE (default 16440), below Linux's
// ephemeral range. etcd base+0 (client) and base+1 (peer); cluster i (alpha=0):
// kube-apiserver base+3+10i (16443, 16453, 16463), kube-controller-manager
// base+7+10i, kube-scheduler base+8+10i; the Argo Rollouts controller (alpha
// only) metrics base+5, healthz base+6; on OPERATORS_CLUSTER External Secrets
// metrics base+14, /healthz base+15, Vault Secrets Operator metrics base+16,
// /healthz base+19; the OCI registry base+2 (registry.ts). kwok listens on nothing.
// ---------------------------------------------------------------------------
interface Ports {
  etcdClient: number;
  etcdPeer: number;
  apiserver: (i: number) => number;
  controllerManager: (i: number) => number;
  scheduler: (i: number) => number;
  argoMetrics: number;
  argoHealthz: number;
  esoMetrics: number;
  esoHealthz: number;
  vsoMetrics: number;
  vsoHealthz: number;
  registry: number;
}

function ports(): Ports {
  const raw = process.env.VAULT_ROLLOUT_CLUSTERS_PORT_BASE ?? '16440';
  const base = Number(raw);
  if (!Number.isInteger(base) || base < 1024 || base > 65000) {
    throw new Error(`VAULT_ROLLOUT_CLUSTERS_PORT_BASE=${raw} is not a port between 1024 and 65000`);
  }
  return {
    etcdClient: base,
    etcdPeer: base + 1,
    apiserver: (i) => base + 3 + 10 * i,
    controllerManager: (i) => base + 7 + 10 * i,
    scheduler: (i) => base + 8 + 10 * i,
    argoMetrics: base + 5,
    argoHealthz: base + 6,
    esoMetrics: base + 14,
    esoHealthz: base + 15,
    vsoMetrics: base + 16,
    vsoHealthz: base + 19,
    registry: base + 2,
  };
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen({ host: '127.0.0.1', port, exclusive: true }, () => srv.close(() => res(true)));
  });
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

function etcdProcess(): Managed {
  return {
    label: 'etcd',
    binary: bin('etcd'),
    pidFile: join(ETCD_DIR, 'etcd.pid'),
    logFile: join(ETCD_DIR, 'etcd.log'),
  };
}

function clusterDir(name: string): string {
  return join(CLUSTERS_DIR, name);
}

type Component =
  | 'kube-apiserver'
  | 'kube-controller-manager'
  | 'kube-scheduler'
  | 'kwok'
  | 'rollouts-controller'
  | 'external-secrets'
  | 'vault-secrets-operator';

/** The control plane's binaries are the lane's Kubernetes version; kwok, the controllers and operators are the same in every lane. */
const CONTROL_PLANE: ReadonlySet<Component> = new Set(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']);

function componentProcess(name: string, component: Component): Managed {
  const dir = clusterDir(name);
  return {
    label: `${name}/${component}`,
    binary: CONTROL_PLANE.has(component) ? join(BIN_DIR, LANE_KUBERNETES_BIN_SUBDIR, component) : bin(component),
    pidFile: join(dir, `${component}.pid`),
    logFile: join(dir, 'logs', `${component}.log`),
  };
}

function allProcesses(): Managed[] {
  const node = realNode();
  return [
    ...(REAL_NODE_ENABLED ? realNodeProcesses(node.paths.dir, node.net, BIN_DIR, CLUSTER_NAMES) : []),
    registryProcess(),
    componentProcess(ARGO_CLUSTER, 'rollouts-controller'),
    componentProcess(OPERATORS_CLUSTER, 'external-secrets'),
    componentProcess(OPERATORS_CLUSTER, 'vault-secrets-operator'),
    ...CLUSTER_NAMES.map((n) => componentProcess(n, 'kwok')),
    ...CLUSTER_NAMES.map((n) => componentProcess(n, 'kube-scheduler')),
    ...CLUSTER_NAMES.map((n) => componentProcess(n, 'kube-controller-manager')),
    ...CLUSTER_NAMES.map((n) => componentProcess(n, 'kube-apiserver')),
    etcdProcess(),
  ];
}

const SERVER_BINARIES = [
  'etcd',
  'kube-apiserver',
  'kube-controller-manager',
  'kube-scheduler',
  'kwok',
  'rollouts-controller',
  'external-secrets',
  'vault-secrets-operator',
  'kubelet',
  'kube-proxy',
  'kube-router',
  REGISTRY_BINARY,
  '/usr/bin/containerd',
].flatMap((b) => [
  b.startsWith('/') ? b : bin(b),
  ...(CONTROL_PLANE.has(b as Component) ? [join(BIN_DIR, `kubernetes-${COMPATIBILITY_KUBERNETES_VERSION}`, b)] : []),
]);

/**
 * Whether a process's arguments or environment name this lane's state (its clusters' or etcd's directory): another
 * lane's are not ours. The operators take their kubeconfig from KUBECONFIG, not from an argument.
 */
const namesThisLane = (a: string): boolean =>
  a.includes(`${CLUSTERS_DIR}/`) || a.includes(`${ETCD_DIR}/`) || a.endsWith(ETCD_DIR);
function isThisLanes(pid: number, argv: string[]): boolean {
  if (argv.some(namesThisLane)) return true;
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').some(namesThisLane);
  } catch {
    return false;
  }
}

/** Every live etcd/kube-apiserver/kube-controller-manager/kube-scheduler/kwok of this lane started from this checkout's .local/bin (pid files or not). */
function strayPids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const argv = procCmdline(pid);
    if (argv?.[0] !== undefined && SERVER_BINARIES.includes(argv[0]) && isThisLanes(pid, argv) && isAlive(pid))
      pids.push(pid);
  }
  return pids;
}

function rssKiB(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m?.[1] ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Stops every process this checkout started: kwok, schedulers, controllers and API servers first, etcd last. */
async function stopAll(log: Logger): Promise<void> {
  const procs = allProcesses();
  const etcd = etcdProcess();
  const upper = procs
    .filter((p) => p.label !== etcd.label)
    .map(runningPid)
    .filter(isPid);
  const etcdPid = runningPid(etcd);
  const stray = strayPids().filter((pid) => !upper.includes(pid) && pid !== etcdPid);
  if (upper.length + stray.length + (etcdPid ? 1 : 0) > 0) {
    log(`stopping ${upper.length + stray.length + (etcdPid ? 1 : 0)} processes`);
  }
  await stopPids([...upper, ...stray]);
  if (etcdPid !== undefined) await stopPids([etcdPid]);
  const left = strayPids();
  if (left.length > 0) {
    await stopPids(left);
    const again = strayPids();
    if (again.length > 0) throw new Error(`processes still running from ${BIN_DIR}: ${again.join(', ')}`);
  }
  for (const p of procs) rmSync(p.pidFile, { force: true });
  if (REAL_NODE_ENABLED) {
    const node = realNode();
    cleanUpRealNode(node.paths, node.net, node.cgroupRoot);
  }
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------
export type Logger = (msg: string) => void;
const defaultLog: Logger = (msg) => process.stderr.write(`[clusters] ${msg}\n`);

async function readyz(server: string, caFile: string, timeoutMs = 3_000): Promise<boolean> {
  try {
    const r = await kubeRequest(server, { ca: readFileSync(caFile) }, 'GET', '/readyz', { timeoutMs });
    return r.status === 200;
  } catch {
    return false;
  }
}

async function etcdHealthy(endpoint: string): Promise<boolean> {
  try {
    const r = await httpGet(`${endpoint}/health`);
    return r.status === 200 && r.text.includes('"health":"true"');
  } catch {
    return false;
  }
}

const seconds = (t0: number): string => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

// ---------------------------------------------------------------------------
// Lock (one `up`/`down` at a time per checkout)
// ---------------------------------------------------------------------------
/** The live pid holding the lock, 'stale' if its holder is gone, or 0 while it is being written. */
function lockHolder(): number | 'stale' {
  let text: string;
  let ageMs: number;
  try {
    text = readFileSync(LOCK_FILE, 'utf8').trim();
    ageMs = Date.now() - statSync(LOCK_FILE).mtimeMs;
  } catch {
    return 0; // removed meanwhile: try again
  }
  if (text === '') return ageMs > 10_000 ? 'stale' : 0;
  const pid = Number(text);
  return Number.isInteger(pid) && pid > 0 && isAlive(pid) ? pid : 'stale';
}

async function withLock<T>(log: Logger, fn: () => Promise<T>): Promise<T> {
  mkdirSync(LANE_LOCAL_DIR, { recursive: true });
  let announced = false;
  const deadline = Date.now() + 120 * 60_000; // a cold binary build can take most of an hour
  for (;;) {
    try {
      const fd = openSync(LOCK_FILE, 'wx');
      writeFileSync(fd, `${process.pid}\n`);
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = lockHolder();
      if (holder === 'stale') {
        rmSync(LOCK_FILE, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${LOCK_FILE} is held by pid ${holder}`, { cause: err });
      if (!announced && holder > 0) {
        log(`waiting for pid ${holder} (holds ${LOCK_FILE})`);
        announced = true;
      }
      await sleep(500);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(LOCK_FILE, { force: true });
  }
}

// ---------------------------------------------------------------------------
// Certificates and kubeconfigs
// ---------------------------------------------------------------------------
interface ClusterPki {
  ca: CertFiles;
  serving: CertFiles;
  /** Request-header (front proxy) CA and the API server's aggregator client certificate. */
  frontProxyCa: CertFiles;
  frontProxyClient: CertFiles;
  saKey: string;
  saPub: string;
  admin: CertFiles;
  vaultRollout: CertFiles;
  controllerManager: CertFiles;
  scheduler: CertFiles;
  kwok: CertFiles;
  argoRollouts?: CertFiles;
  externalSecrets?: CertFiles;
  vaultSecretsOperator?: CertFiles;
}

function makePki(name: string, extraSans: string[] = []): ClusterPki {
  const dir = join(clusterDir(name), 'pki');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = writeCa(dir, `vault-rollout-${name}-ca`);
  const serving = issueCert(dir, ca, {
    name: 'kube-apiserver',
    commonName: 'kube-apiserver',
    usage: 'server',
    sans: [
      'IP:127.0.0.1',
      'DNS:localhost',
      'DNS:kubernetes',
      'DNS:kubernetes.default',
      'DNS:kubernetes.default.svc',
      'DNS:kubernetes.default.svc.cluster.local',
      'IP:10.0.0.1',
      ...extraSans,
    ],
  });
  const frontProxyCa = writeCa(dir, `vault-rollout-${name}-front-proxy-ca`, 'front-proxy-ca');
  const frontProxyClient = issueCert(dir, frontProxyCa, {
    name: 'front-proxy-client',
    commonName: 'front-proxy-client',
    usage: 'client',
  });
  const sa = writeKeyPair(dir, 'service-account');
  const admin = issueCert(dir, ca, {
    name: 'admin',
    commonName: 'admin',
    organizations: ['system:masters'],
    usage: 'client',
  });
  const vaultRollout = issueCert(dir, ca, { name: 'vault-rollout', commonName: 'vault-rollout', usage: 'client' });
  const controllerManager = issueCert(dir, ca, {
    name: 'kube-controller-manager',
    commonName: 'system:kube-controller-manager',
    usage: 'client',
  });
  const scheduler = issueCert(dir, ca, {
    name: 'kube-scheduler',
    commonName: 'system:kube-scheduler',
    usage: 'client',
  });
  // kwok plays the kubelets of the simulated nodes: bound to the `kwok` ClusterRole of KWOK_RBAC only.
  const kwok = issueCert(dir, ca, { name: 'kwok', commonName: 'vault-rollout-test:kwok', usage: 'client' });
  const argoRollouts =
    name === ARGO_CLUSTER
      ? issueCert(dir, ca, { name: 'argo-rollouts', commonName: 'vault-rollout-test:argo-rollouts', usage: 'client' })
      : undefined;
  const operators =
    name === OPERATORS_CLUSTER
      ? {
          externalSecrets: issueCert(dir, ca, {
            name: 'external-secrets',
            commonName: 'vault-rollout-test:external-secrets',
            usage: 'client',
          }),
          vaultSecretsOperator: issueCert(dir, ca, {
            name: 'vault-secrets-operator',
            commonName: 'vault-rollout-test:vault-secrets-operator',
            usage: 'client',
          }),
        }
      : {};
  return {
    ca,
    serving,
    frontProxyCa,
    frontProxyClient,
    saKey: sa.keyFile,
    saPub: sa.pubFile,
    admin,
    vaultRollout,
    controllerManager,
    scheduler,
    kwok,
    ...(argoRollouts ? { argoRollouts } : {}),
    ...operators,
  };
}

// The project's ClusterRole is bound (by infra/rbac/clusterrole.yaml) to the
// ServiceAccount vault-rollout/vault-rollout; the test clusters also bind it to
// the client-certificate user `vault-rollout` used by vault-rollout.kubeconfig.
const TEST_BINDINGS = `
apiVersion: v1
kind: Namespace
metadata:
  name: vault-rollout
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: vault-rollout
  namespace: vault-rollout
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vault-rollout-test-user
  labels:
    app.kubernetes.io/name: vault-rollout
    app.kubernetes.io/component: test-clusters
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vault-rollout
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: vault-rollout
`;

// kwok's rights, from sigs.k8s.io/kwok v0.8.0 kustomize/rbac/role.yaml (the
// core and coordination rules; no kwok.x-k8s.io CRDs are used here), bound to
// the client-certificate user of kwok.kubeconfig. And the simulated nodes:
// created here, initialised (conditions, capacity, addresses) by kwok's
// node-initialize Stage. No taints: every pod may land on them.
const KWOK_RBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vault-rollout-test:kwok
  labels:
    app.kubernetes.io/component: test-clusters
rules:
  - apiGroups: ['']
    resources: [events]
    verbs: [create, patch, update]
  - apiGroups: ['']
    resources: [nodes]
    verbs: [get, list, watch]
  - apiGroups: ['']
    resources: [nodes/status, pods/status]
    verbs: [patch, update]
  - apiGroups: ['']
    resources: [pods]
    verbs: [delete, get, list, patch, update, watch]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create, get, list, patch, update, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vault-rollout-test:kwok
  labels:
    app.kubernetes.io/component: test-clusters
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vault-rollout-test:kwok
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: vault-rollout-test:kwok
`;

function nodeManifests(): string {
  const [key, value] = KWOK_NODE_ANNOTATION.split('=');
  return NODE_NAMES.map(
    (node, i) => `---
apiVersion: v1
kind: Node
metadata:
  name: ${node}
  annotations:
    ${key}: ${value}
    vault-rollout.test/node-ip: 10.255.0.${i + 1}
  labels:
    kubernetes.io/hostname: ${node}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
`,
  ).join('');
}

// ---------------------------------------------------------------------------
// up / down / status
// ---------------------------------------------------------------------------
export interface UpOptions {
  log?: Logger;
  /** Skip build-binaries.sh (the binaries must already be in .local/bin). */
  skipBuild?: boolean;
}

export interface UpResult {
  /** True when this call started the clusters; false when running ones were reused. */
  started: boolean;
  clusters: ClustersFile;
  /** Wall time of this call, in seconds. */
  seconds: number;
}

export async function buildBinaries(log: Logger = defaultLog): Promise<void> {
  const t0 = Date.now();
  // Both Kubernetes versions, whichever lane this is: the lanes share .local/bin (test/lanes.ts).
  const env = {
    ...process.env,
    K8S_VERSION: MAIN_KUBERNETES_VERSION,
    K8S_COMPAT_VERSION: COMPATIBILITY_KUBERNETES_VERSION,
  };
  await run('bash', [BUILD_SCRIPT], { inheritOutput: true, env }).catch((err: unknown) => {
    throw new Error(`building the Kubernetes binaries failed (test/clusters/build-binaries.sh): ${String(err)}`, {
      cause: err,
    });
  });
  for (const b of [
    'etcd',
    'kube-apiserver',
    'kube-controller-manager',
    'kube-scheduler',
    'kubectl',
    'kubelet',
    'kube-proxy',
    'kube-router',
    'kwok',
    'rollouts-controller',
    'external-secrets',
    'vault-secrets-operator',
  ]) {
    if (!existsSync(bin(b))) throw new Error(`${bin(b)} is missing after build-binaries.sh`);
  }
  for (const b of CONTROL_PLANE) {
    const compat = join(BIN_DIR, `kubernetes-${COMPATIBILITY_KUBERNETES_VERSION}`, b);
    if (!existsSync(compat)) throw new Error(`${compat} is missing after build-binaries.sh`);
  }
  // Here, not in each lane's start: test/run-suite.ts builds once before its lanes start side by side, and two
  // apt-get runs at once would fight over dpkg's lock.
  const installed = ensureDebianPackages();
  if (installed.length > 0) log(`installed Debian's ${installed.join(', ')}`);
  log(`binaries ready in ${seconds(t0)}`);
}

/** Whether the clusters described by clusters.json are all running and ready. */
export async function isHealthy(): Promise<boolean> {
  let file: ClustersFile;
  try {
    file = loadClusters();
  } catch {
    return false;
  }
  if (!allProcesses().every((p) => runningPid(p) !== undefined)) return false;
  if (!(await etcdHealthy(file.etcd.endpoint))) return false;
  if (file.clusters.length !== CLUSTER_NAMES.length) return false;
  const ready = await Promise.all(file.clusters.map((c) => readyz(c.server, c.caFile)));
  return ready.every(Boolean);
}

/** What kube-controller-manager and kube-scheduler share: their kubeconfig for everything, 127.0.0.1 only, no leader election. */
function controlPlaneFlags(
  dir: string,
  component: 'kube-controller-manager' | 'kube-scheduler',
  port: number,
): string[] {
  const kubeconfig = join(dir, `${component}.kubeconfig`);
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${join(dir, `${component}-serving`)}`,
    '--leader-elect=false',
    '--profiling=false',
  ];
}

export async function up(opts: UpOptions = {}): Promise<UpResult> {
  const log = opts.log ?? defaultLog;
  const t0 = Date.now();
  return withLock(log, async () => {
    if (!opts.skipBuild) await buildBinaries(log);
    if (await isHealthy()) {
      const clusters = loadClusters();
      log(`reusing running clusters (${clusters.clusters.map((c) => c.name).join(', ')}); checked in ${seconds(t0)}`);
      printSummary(log, clusters);
      return { started: false, clusters, seconds: (Date.now() - t0) / 1000 };
    }
    await stopAll(log); // half-running leftovers
    const tStart = Date.now();
    try {
      const clusters = await startAll(log);
      log(`clusters started in ${seconds(tStart)} (total ${seconds(t0)})`);
      printSummary(log, clusters);
      return { started: true, clusters, seconds: (Date.now() - t0) / 1000 };
    } catch (err) {
      log(`start-up failed; stopping what was started`);
      await stopAll(log).catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
      throw err;
    }
  });
}

async function startAll(log: Logger): Promise<ClustersFile> {
  const p = ports();
  const needed = [
    p.etcdClient,
    p.etcdPeer,
    p.registry,
    p.argoMetrics,
    p.argoHealthz,
    p.esoMetrics,
    p.esoHealthz,
    p.vsoMetrics,
    p.vsoHealthz,
    ...CLUSTER_NAMES.flatMap((_, i) => [p.apiserver(i), p.controllerManager(i), p.scheduler(i)]),
  ];
  const busy: number[] = [];
  for (const port of needed) if (!(await isPortFree(port))) busy.push(port);
  if (busy.length > 0) {
    throw new Error(
      `127.0.0.1 port(s) ${busy.join(', ')} are in use (another checkout's clusters?). ` +
        `Stop them, or set VAULT_ROLLOUT_CLUSTERS_PORT_BASE to another base (now ${p.etcdClient}).`,
    );
  }

  rmSync(CLUSTERS_FILE, { force: true });
  rmSync(ETCD_DIR, { recursive: true, force: true });
  mkdirSync(ETCD_DIR, { recursive: true, mode: 0o700 });

  const tRegistry = Date.now();
  const registryReady = startRegistry(p.registry).then(async (registry) => {
    const testImages = await pushTestImages(registry);
    log(`registry ready at ${registry} with ${testImages.pause} and ${testImages.busybox} after ${seconds(tRegistry)}`);
    return { registry, testImages };
  });
  registryReady.catch(() => {
    /* awaited below */
  });

  // etcd, shared: each cluster keeps its data under its own prefix.
  const tEtcd = Date.now();
  const etcdEndpoint = `http://127.0.0.1:${p.etcdClient}`;
  const etcd = etcdProcess();
  const peer = `http://127.0.0.1:${p.etcdPeer}`;
  const etcdPid = startProcess(etcd, [
    '--name=vault-rollout',
    `--data-dir=${join(ETCD_DIR, 'data')}`,
    `--listen-client-urls=${etcdEndpoint}`,
    `--advertise-client-urls=${etcdEndpoint}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=vault-rollout=${peer}`,
    '--initial-cluster-state=new',
    '--unsafe-no-fsync=true', // throw-away test data
    '--log-level=warn',
  ]);
  await waitFor(
    async () => {
      if (!isAlive(etcdPid)) throw new DiedError(etcd);
      return etcdHealthy(etcdEndpoint);
    },
    { timeoutMs: 60_000, intervalMs: 100, what: 'etcd /health' },
  ).catch(rethrowWithLog(etcd));
  log(`etcd ready at ${etcdEndpoint} in ${seconds(tEtcd)}`);

  // PKI and API servers.
  const tApi = Date.now();
  const infos: ClusterInfo[] = [];
  const pkis = new Map<string, ClusterPki>();
  const waits: Promise<void>[] = [];
  let nodeCerts: RealNodeCerts | undefined;
  CLUSTER_NAMES.forEach((name, i) => {
    const dir = clusterDir(name);
    mkdirSync(join(dir, 'logs'), { recursive: true });
    const withNode = REAL_NODE_ENABLED && name === REAL_NODE_CLUSTER;
    // The real node's pods reach every API server of the lane at the host's end of the node's link.
    const pki = makePki(name, REAL_NODE_ENABLED ? [`IP:${realNode().net.hostIp}`] : []);
    pkis.set(name, pki);
    if (withNode) nodeCerts = issueRealNodeCerts(join(clusterDir(name), 'pki'), pki.ca, realNode().net);
    const port = p.apiserver(i);
    const server = `https://127.0.0.1:${port}`;
    const apiserver = componentProcess(name, 'kube-apiserver');
    const pid = startProcess(apiserver, [
      `--etcd-servers=${etcdEndpoint}`,
      `--etcd-prefix=/vault-rollout/${name}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${port}`,
      ...advertiseFlags(name, nodeCerts, pki.ca.certFile),
      '--service-cluster-ip-range=10.0.0.0/24', // allocation only: nothing is ever routed there
      `--tls-cert-file=${pki.serving.certFile}`,
      `--tls-private-key-file=${pki.serving.keyFile}`,
      `--client-ca-file=${pki.ca.certFile}`,
      // Request-header authentication as kubeadm sets it up; the controller
      // manager's delegated authentication expects it in kube-system/extension-apiserver-authentication.
      `--requestheader-client-ca-file=${pki.frontProxyCa.certFile}`,
      '--requestheader-allowed-names=front-proxy-client',
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${pki.frontProxyClient.certFile}`,
      `--proxy-client-key-file=${pki.frontProxyClient.keyFile}`,
      '--authorization-mode=Node,RBAC',
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${pki.saPub}`,
      `--service-account-signing-key-file=${pki.saKey}`,
      '--allow-privileged=false',
      '--profiling=false',
    ]);
    const adminKubeconfig = join(dir, 'admin.kubeconfig');
    const vaultRolloutKubeconfig = join(dir, 'vault-rollout.kubeconfig');
    writeKubeconfig(adminKubeconfig, name, server, pki.ca.certFile, 'admin', pki.admin);
    writeKubeconfig(vaultRolloutKubeconfig, name, server, pki.ca.certFile, 'vault-rollout', pki.vaultRollout);
    writeKubeconfig(
      join(dir, 'kube-controller-manager.kubeconfig'),
      name,
      server,
      pki.ca.certFile,
      'system:kube-controller-manager',
      pki.controllerManager,
    );
    writeKubeconfig(
      join(dir, 'kube-scheduler.kubeconfig'),
      name,
      server,
      pki.ca.certFile,
      'system:kube-scheduler',
      pki.scheduler,
    );
    writeKubeconfig(join(dir, 'kwok.kubeconfig'), name, server, pki.ca.certFile, 'vault-rollout-test:kwok', pki.kwok);
    if (pki.argoRollouts) {
      writeKubeconfig(
        join(dir, 'argo-rollouts.kubeconfig'),
        name,
        server,
        pki.ca.certFile,
        'vault-rollout-test:argo-rollouts',
        pki.argoRollouts,
      );
    }
    if (pki.externalSecrets && pki.vaultSecretsOperator) {
      writeKubeconfig(
        join(dir, 'external-secrets.kubeconfig'),
        name,
        server,
        pki.ca.certFile,
        'vault-rollout-test:external-secrets',
        pki.externalSecrets,
      );
      writeKubeconfig(
        join(dir, 'vault-secrets-operator.kubeconfig'),
        name,
        server,
        pki.ca.certFile,
        'vault-rollout-test:vault-secrets-operator',
        pki.vaultSecretsOperator,
      );
    }
    infos.push({
      name,
      server,
      caFile: pki.ca.certFile,
      adminKubeconfig,
      vaultRolloutKubeconfig,
      admin: pki.admin,
      vaultRollout: pki.vaultRollout,
    });
    waits.push(
      waitFor(
        async () => {
          if (!isAlive(pid)) throw new DiedError(apiserver);
          return readyz(server, pki.ca.certFile);
        },
        { timeoutMs: 240_000, intervalMs: 250, what: `${name} kube-apiserver /readyz` },
      ).then(() => {
        log(`${name}: kube-apiserver ready at ${server} after ${seconds(tApi)}`);
      }, rethrowWithLog(apiserver)),
    );
  });
  await Promise.all(waits);

  // Controller managers.
  CLUSTER_NAMES.forEach((name, i) => {
    const dir = clusterDir(name);
    const pki = pkis.get(name);
    if (!pki) throw new Error(`no PKI for ${name}`);
    startProcess(componentProcess(name, 'kube-controller-manager'), [
      ...controlPlaneFlags(dir, 'kube-controller-manager', p.controllerManager(i)),
      `--controllers=${CONTROLLERS.join(',')}`,
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.saKey}`,
      `--root-ca-file=${pki.ca.certFile}`,
    ]);
  });

  // Schedulers (their RBAC, system:kube-scheduler, is bootstrapped by the API server).
  CLUSTER_NAMES.forEach((name, i) => {
    startProcess(
      componentProcess(name, 'kube-scheduler'),
      controlPlaneFlags(clusterDir(name), 'kube-scheduler', p.scheduler(i)),
    );
  });

  // Manifests: the project's RBAC and CRD, plus the test user's binding.
  const tApply = Date.now();
  await Promise.all(
    infos.map(async (c) => {
      await run(
        bin('kubectl'),
        [
          `--kubeconfig=${c.adminKubeconfig}`,
          'apply',
          '--server-side',
          '--field-manager=vault-rollout-clusters',
          `--filename=${RBAC_MANIFEST}`,
          `--filename=${CRD_MANIFEST}`,
          '--filename=-',
        ],
        { input: TEST_BINDINGS },
      );
    }),
  );
  await Promise.all(infos.map(applyAdmissionPolicy));
  log(`manifests applied in ${seconds(tApply)}`);

  // Ready for tests: CRD established, and the controller manager at work
  // (the serviceaccount controller made `default` in `default`).
  const tCtl = Date.now();
  await Promise.all(
    infos.map(async (c) => {
      const admin = {
        ca: readFileSync(c.caFile),
        cert: readFileSync(c.admin.certFile),
        key: readFileSync(c.admin.keyFile),
      };
      const kcm = componentProcess(c.name, 'kube-controller-manager');
      await waitFor(
        async () => {
          const r = await kubeRequest<{ status?: { conditions?: { type: string; status: string }[] } }>(
            c.server,
            admin,
            'GET',
            '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rollouts.argoproj.io',
          );
          return (
            r.status === 200 &&
            (r.body.status?.conditions ?? []).some((x) => x.type === 'Established' && x.status === 'True')
          );
        },
        { timeoutMs: 60_000, what: `${c.name}: CRD rollouts.argoproj.io Established` },
      );
      await waitFor(
        async () => {
          if (runningPid(kcm) === undefined) throw new DiedError(kcm);
          const r = await kubeRequest(c.server, admin, 'GET', '/api/v1/namespaces/default/serviceaccounts/default');
          return r.status === 200;
        },
        { timeoutMs: 180_000, what: `${c.name}: kube-controller-manager to create ServiceAccount default/default` },
      ).catch(rethrowWithLog(kcm));
    }),
  );
  log(`controller managers working after ${seconds(tCtl)}`);

  await startNodes(log, infos);
  const images = await registryReady;
  await Promise.all([
    startArgoRollouts(log, infos, p),
    startOperators(log, infos, p),
    ...(nodeCerts ? [startTheRealNode(log, infos, p, nodeCerts, images)] : []),
  ]);

  const file: ClustersFile = {
    kubernetesVersion: KUBERNETES_VERSION,
    etcd: { endpoint: etcdEndpoint },
    clusters: infos,
    ...images,
    ...(nodeCerts
      ? { realNode: { name: REAL_NODE_NAME, cluster: REAL_NODE_CLUSTER, apiServersAt: realNode().net.hostIp } }
      : {}),
  };
  writeFileSync(CLUSTERS_FILE, `${JSON.stringify(file, null, 2)}\n`);
  return file;
}

/**
 * The admission policy that bounds what the vault-rollout identity may change, applied like a real install: the one
 * generated from test/clusters/admission-routes.yaml, which restarts every kind the tests use in every namespace
 * (each test makes its own); test/integration/admission-policy.test.ts checks a namespace-bounded one. (No wait on its status: the controller that type-checks policies and writes
 * status.observedGeneration is not among CONTROLLERS; the API server enforces the policy regardless.)
 */
async function applyAdmissionPolicy(c: ClusterInfo): Promise<void> {
  const manifest = join(REPO_ROOT, 'test', 'clusters', 'admission-policy.yaml');
  await run(bin('kubectl'), [
    `--kubeconfig=${c.adminKubeconfig}`,
    'apply',
    '--server-side',
    '--field-manager=vault-rollout-clusters',
    `--filename=${manifest}`,
  ]);
}

/**
 * Where the API server says it is. Alpha's, with the real node, advertises the host's end of the node's link, where
 * socat carries connections to 127.0.0.1 (the `kubernetes` Service's endpoint for pods), and reaches kubelet with a
 * client certificate, checking kubelet's serving certificate against the cluster CA. Elsewhere 127.0.0.1, with no
 * `kubernetes` Endpoints (they may not hold a loopback address).
 */
function advertiseFlags(name: string, certs: RealNodeCerts | undefined, caFile: string): string[] {
  if (certs === undefined || name !== REAL_NODE_CLUSTER)
    return ['--advertise-address=127.0.0.1', '--endpoint-reconciler-type=none'];
  return [
    `--advertise-address=${realNode().net.hostIp}`,
    `--kubelet-client-certificate=${certs.apiserverKubeletClient.certFile}`,
    `--kubelet-client-key=${certs.apiserverKubeletClient.keyFile}`,
    `--kubelet-certificate-authority=${caFile}`,
    '--kubelet-preferred-address-types=InternalIP',
  ];
}

async function startTheRealNode(
  log: Logger,
  infos: ClusterInfo[],
  p: Ports,
  certs: RealNodeCerts,
  images: { registry: string; testImages: TestImages },
): Promise<void> {
  const t0 = Date.now();
  const i = CLUSTER_NAMES.indexOf(REAL_NODE_CLUSTER);
  const cluster = infos[i]!;
  await startRealNode({
    ...realNode(),
    cluster,
    certs,
    binDir: BIN_DIR,
    apiPorts: Object.fromEntries(CLUSTER_NAMES.map((name, j) => [name, p.apiserver(j)])),
    registry: images.registry,
    pauseImage: images.testImages.pause,
  });
  log(`${cluster.name}: real node ${REAL_NODE_NAME} Ready after ${seconds(t0)}`);
}

/** kwok per cluster (after its RBAC), its three Nodes, and a wait until they are Ready. */
async function startNodes(log: Logger, infos: ClusterInfo[]): Promise<void> {
  const tNodes = Date.now();
  await Promise.all(
    infos.map(async (c) => {
      await run(
        bin('kubectl'),
        [
          `--kubeconfig=${c.adminKubeconfig}`,
          'apply',
          '--server-side',
          '--field-manager=vault-rollout-clusters',
          '--filename=-',
        ],
        { input: `${KWOK_RBAC}${nodeManifests()}` },
      );
      const kwok = componentProcess(c.name, 'kwok');
      const pid = startProcess(kwok, [
        `--kubeconfig=${join(clusterDir(c.name), 'kwok.kubeconfig')}`,
        `--config=${KWOK_STAGES}`,
        `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}`,
        `--cidr=${KWOK_POD_CIDR}`,
      ]);
      const admin = {
        ca: readFileSync(c.caFile),
        cert: readFileSync(c.admin.certFile),
        key: readFileSync(c.admin.keyFile),
      };
      await waitFor(
        async () => {
          if (!isAlive(pid)) throw new DiedError(kwok);
          const r = await kubeRequest<{ items?: NodeStatusView[] }>(c.server, admin, 'GET', '/api/v1/nodes');
          return (
            r.status === 200 &&
            NODE_NAMES.every((n) => (r.body.items ?? []).some((x) => x.metadata?.name === n && isNodeReady(x)))
          );
        },
        { timeoutMs: 60_000, intervalMs: 200, what: `${c.name}: ${NODE_NAMES.length} nodes Ready (kwok)` },
      ).catch(rethrowWithLog(kwok));
      // The API server taints a new Node node.kubernetes.io/not-ready (TaintNodesByCondition); the node-lifecycle
      // controller, not run here (it would evict pods whenever kwok's heartbeats lag on a busy machine), lifts it.
      for (const node of NODE_NAMES) {
        const r = await kubeRequest(c.server, admin, 'PATCH', `/api/v1/nodes/${node}`, {
          body: { spec: { taints: null } },
          contentType: 'application/merge-patch+json',
        });
        if (r.status !== 200) throw new Error(`${c.name}: untainting node ${node}: HTTP ${r.status}`);
      }
    }),
  );
  log(`kwok nodes Ready after ${seconds(tNodes)}`);
}

// The Argo Rollouts controller's rights in ARGO_NAMESPACE: the rules of its own
// manifests/role/argo-rollouts-clusterrole.yaml (v1.10.1) that concern
// Kubernetes' own kinds and its CRDs, as a namespaced Role (no traffic-router
// or service-mesh kinds exist here); plus reading ClusterAnalysisTemplates.
const ARGO_RBAC = `
apiVersion: v1
kind: Namespace
metadata:
  name: ${ARGO_NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: vault-rollout-test:argo-rollouts
  namespace: ${ARGO_NAMESPACE}
rules:
  - apiGroups: [argoproj.io]
    resources: [rollouts, rollouts/status, rollouts/finalizers]
    verbs: [get, list, watch, update, patch]
  - apiGroups: [argoproj.io]
    resources: [analysisruns, analysisruns/finalizers, experiments, experiments/finalizers]
    verbs: [create, get, list, watch, update, patch, delete]
  - apiGroups: [argoproj.io]
    resources: [analysistemplates]
    verbs: [get, list, watch]
  - apiGroups: [apps]
    resources: [replicasets]
    verbs: [create, get, list, watch, update, patch, delete]
  - apiGroups: ['', apps]
    resources: [deployments, podtemplates]
    verbs: [get, list, watch, update]
  - apiGroups: ['']
    resources: [services]
    verbs: [get, list, watch, patch, create, delete]
  - apiGroups: ['']
    resources: [secrets, configmaps]
    verbs: [get, list, watch]
  - apiGroups: ['']
    resources: [pods]
    verbs: [list, update, watch]
  - apiGroups: ['']
    resources: [pods/eviction]
    verbs: [create]
  - apiGroups: ['']
    resources: [events]
    verbs: [create, update, patch]
  - apiGroups: [networking.k8s.io]
    resources: [ingresses]
    verbs: [get, list, watch]
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [create, get, list, watch, update, patch, delete]
  - apiGroups: ['']
    resources: [endpoints]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: vault-rollout-test:argo-rollouts
  namespace: ${ARGO_NAMESPACE}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: vault-rollout-test:argo-rollouts
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: vault-rollout-test:argo-rollouts
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vault-rollout-test:argo-rollouts
rules:
  - apiGroups: [argoproj.io]
    resources: [clusteranalysistemplates]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vault-rollout-test:argo-rollouts
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vault-rollout-test:argo-rollouts
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: vault-rollout-test:argo-rollouts
`;

/**
 * On ARGO_CLUSTER: the full Argo Rollouts CRDs (replacing the trimmed rollouts.argoproj.io there), the
 * controller's namespace and RBAC, then the controller itself, namespaced; waits for its /healthz.
 */
async function startArgoRollouts(log: Logger, infos: ClusterInfo[], p: Ports): Promise<void> {
  const c = infos.find((x) => x.name === ARGO_CLUSTER);
  if (c === undefined) throw new Error(`no cluster ${ARGO_CLUSTER}`);
  const tArgo = Date.now();
  const crds = readdirSync(ARGO_CRDS_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => join(ARGO_CRDS_DIR, f));
  if (crds.length === 0) throw new Error(`no CRDs in ${ARGO_CRDS_DIR}`);
  await run(
    bin('kubectl'),
    [
      `--kubeconfig=${c.adminKubeconfig}`,
      'apply',
      '--server-side',
      '--force-conflicts',
      '--field-manager=vault-rollout-clusters',
      ...crds.map((f) => `--filename=${f}`),
      '--filename=-',
    ],
    { input: ARGO_RBAC },
  );
  await run(bin('kubectl'), [
    `--kubeconfig=${c.adminKubeconfig}`,
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    ...crds.map((f) => `--filename=${f}`),
  ]);
  const argo = componentProcess(c.name, 'rollouts-controller');
  const pid = startProcess(argo, [
    `--kubeconfig=${join(clusterDir(c.name), 'argo-rollouts.kubeconfig')}`,
    '--namespaced',
    `--namespace=${ARGO_NAMESPACE}`,
    '--leader-elect=false',
    `--metricsPort=${p.argoMetrics}`,
    `--healthzPort=${p.argoHealthz}`,
    '--loglevel=info',
  ]);
  await waitFor(
    async () => {
      if (!isAlive(pid)) throw new DiedError(argo);
      return (await httpGet(`http://127.0.0.1:${p.argoHealthz}/healthz`)).status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200, what: `${c.name}: rollouts-controller /healthz` },
  ).catch(rethrowWithLog(argo));
  log(`${c.name}: Argo Rollouts controller (namespace ${ARGO_NAMESPACE}) ready after ${seconds(tArgo)}`);
}

/**
 * On OPERATORS_CLUSTER: every CRD of both operators' modules, their namespaces and RBAC, then both controllers,
 * cluster-wide, leader election off, metrics and health on 127.0.0.1; waits for their /healthz.
 */
async function startOperators(log: Logger, infos: ClusterInfo[], p: Ports): Promise<void> {
  const c = infos.find((x) => x.name === OPERATORS_CLUSTER);
  if (c === undefined) throw new Error(`no cluster ${OPERATORS_CLUSTER}`);
  const t0 = Date.now();
  const crds = [ESO_CRDS_DIR, VSO_CRDS_DIR].flatMap((dir) => {
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => join(dir, f));
    if (files.length === 0) throw new Error(`no CRDs in ${dir}`);
    return files;
  });
  const kubectl = (args: string[]): Promise<RunResult> =>
    run(bin('kubectl'), [`--kubeconfig=${c.adminKubeconfig}`, ...args]);
  await kubectl([
    'apply',
    '--server-side',
    '--field-manager=vault-rollout-clusters',
    ...crds.map((f) => `--filename=${f}`),
    `--filename=${OPERATORS_RBAC}`,
  ]);
  await kubectl(['wait', '--for=condition=Established', '--timeout=60s', ...crds.map((f) => `--filename=${f}`)]);
  const dir = clusterDir(c.name);
  const eso = componentProcess(c.name, 'external-secrets');
  const vso = componentProcess(c.name, 'vault-secrets-operator');
  const started: [Managed, number, number][] = [
    // Neither takes a --kubeconfig flag on its command line: controller-runtime reads KUBECONFIG.
    [
      eso,
      p.esoHealthz,
      startProcess(
        eso,
        [
          `--metrics-addr=127.0.0.1:${p.esoMetrics}`,
          `--live-addr=127.0.0.1:${p.esoHealthz}`,
          '--enable-leader-election=false',
          // Only ExternalSecrets and (Cluster)SecretStores: no PushSecrets, ClusterExternalSecrets or generator state.
          '--enable-cluster-external-secret-reconciler=false',
          '--enable-push-secret-reconciler=false',
          '--enable-cluster-push-secret-reconciler=false',
          '--enable-generator-state=false',
          '--loglevel=info',
          '--zap-time-encoding=iso8601',
        ],
        { KUBECONFIG: join(dir, 'external-secrets.kubeconfig') },
      ),
    ],
    [
      vso,
      p.vsoHealthz,
      startProcess(
        vso,
        [
          `--metrics-bind-address=127.0.0.1:${p.vsoMetrics}`,
          `--health-probe-bind-address=127.0.0.1:${p.vsoHealthz}`,
          '--leader-elect=false',
          // No Vault client state persisted in a Secret (it would need a transit mount).
          '--client-cache-persistence-model=none',
        ],
        { KUBECONFIG: join(dir, 'vault-secrets-operator.kubeconfig'), OPERATOR_NAMESPACE: VSO_NAMESPACE },
      ),
    ],
  ];
  await Promise.all(
    started.map(([proc, port, pid]) =>
      waitFor(
        async () => {
          if (!isAlive(pid)) throw new DiedError(proc);
          return (await httpGet(`http://127.0.0.1:${port}/healthz`)).status === 200;
        },
        { timeoutMs: 60_000, intervalMs: 200, what: `${proc.label} /healthz` },
      ).catch(rethrowWithLog(proc)),
    ),
  );
  log(`${c.name}: External Secrets and Vault Secrets Operator controllers ready after ${seconds(t0)}`);
}

interface NodeStatusView {
  metadata?: { name?: string };
  status?: { conditions?: { type: string; status: string }[] };
}

const isNodeReady = (n: NodeStatusView): boolean =>
  (n.status?.conditions ?? []).some((x) => x.type === 'Ready' && x.status === 'True');

function memorySummary(): { kib: number; count: number } {
  let kib = 0;
  let count = 0;
  for (const p of allProcesses()) {
    const pid = runningPid(p);
    if (pid === undefined) continue;
    kib += rssKiB(pid);
    count += 1;
  }
  return { kib, count };
}

function printSummary(log: Logger, file: ClustersFile): void {
  for (const c of file.clusters) {
    log(`${c.name}: ${c.server}`);
    log(`  admin:         ${c.adminKubeconfig}`);
    log(`  vault-rollout: ${c.vaultRolloutKubeconfig}`);
  }
  if (file.registry) log(`registry: ${file.registry}`);
  const mem = memorySummary();
  log(`${mem.count} processes, RSS ${(mem.kib / 1024).toFixed(0)} MiB; machine-readable: ${CLUSTERS_FILE}`);
}

export interface DownOptions {
  log?: Logger;
}

/** Stops every process started from this checkout's .local/bin and deletes the etcd data. */
export async function down(opts: DownOptions = {}): Promise<void> {
  const log = opts.log ?? defaultLog;
  const t0 = Date.now();
  await withLock(log, async () => {
    await stopAll(log);
    rmSync(ETCD_DIR, { recursive: true, force: true });
    rmSync(CLUSTERS_FILE, { force: true });
  });
  log(`clusters down in ${seconds(t0)}`);
}

export async function status(log: Logger = defaultLog): Promise<boolean> {
  let file: ClustersFile | undefined;
  try {
    file = loadClusters();
  } catch {
    file = undefined;
  }
  const etcdPid = runningPid(etcdProcess());
  log(`etcd: ${etcdPid !== undefined ? `pid ${etcdPid}` : 'not running'}${file ? ` ${file.etcd.endpoint}` : ''}`);
  let ok = etcdPid !== undefined && file !== undefined;
  const registryPid = runningPid(registryProcess());
  log(`registry: ${file?.registry ?? 'none'} (${registryPid !== undefined ? `pid ${registryPid}` : 'not running'})`);
  ok &&= registryPid !== undefined;
  for (const name of CLUSTER_NAMES) {
    const api = runningPid(componentProcess(name, 'kube-apiserver'));
    const kcm = runningPid(componentProcess(name, 'kube-controller-manager'));
    const sched = runningPid(componentProcess(name, 'kube-scheduler'));
    const kwok = runningPid(componentProcess(name, 'kwok'));
    const argo = name === ARGO_CLUSTER ? runningPid(componentProcess(name, 'rollouts-controller')) : undefined;
    const eso = name === OPERATORS_CLUSTER ? runningPid(componentProcess(name, 'external-secrets')) : undefined;
    const vso = name === OPERATORS_CLUSTER ? runningPid(componentProcess(name, 'vault-secrets-operator')) : undefined;
    const info = file?.clusters.find((c) => c.name === name);
    const ready = info && api !== undefined ? await readyz(info.server, info.caFile) : false;
    const nodes = info && ready ? await readyNodeCount(info) : 0;
    ok &&=
      ready &&
      kcm !== undefined &&
      sched !== undefined &&
      kwok !== undefined &&
      (name !== ARGO_CLUSTER || argo !== undefined) &&
      (name !== OPERATORS_CLUSTER || (eso !== undefined && vso !== undefined));
    const pidOf = (pid: number | undefined): string => (pid !== undefined ? `pid ${pid}` : 'not running');
    log(
      `${name}: kube-apiserver ${pidOf(api)}, /readyz ${ready ? 'ok' : 'not ready'}, ` +
        `kube-controller-manager ${pidOf(kcm)}, kube-scheduler ${pidOf(sched)}, kwok ${pidOf(kwok)}, ` +
        `nodes Ready ${nodes}/${NODE_NAMES.length + (REAL_NODE_ENABLED && name === REAL_NODE_CLUSTER ? 1 : 0)}` +
        (name === ARGO_CLUSTER ? `, rollouts-controller ${pidOf(argo)}` : '') +
        (name === OPERATORS_CLUSTER ? `, external-secrets ${pidOf(eso)}, vault-secrets-operator ${pidOf(vso)}` : '') +
        (info ? `, ${info.server}` : ''),
    );
  }
  if (REAL_NODE_ENABLED) {
    const node = realNode();
    const procs = realNodeProcesses(node.paths.dir, node.net, BIN_DIR, CLUSTER_NAMES).map((x) => ({
      x,
      pid: runningPid(x),
    }));
    ok &&= procs.every(({ pid }) => pid !== undefined);
    log(
      `${REAL_NODE_CLUSTER}: real node ${REAL_NODE_NAME} (netns ${node.net.netns}, ${node.net.nodeIp}): ` +
        procs
          .map(({ x, pid }) => `${x.label.split('/')[1]} ${pid !== undefined ? `pid ${pid}` : 'not running'}`)
          .join(', '),
    );
  }
  const mem = memorySummary();
  log(`${mem.count} processes, RSS ${(mem.kib / 1024).toFixed(0)} MiB`);
  const stray = strayPids().filter((pid) => !allProcesses().some((p) => runningPid(p) === pid));
  if (stray.length > 0) log(`untracked processes from ${BIN_DIR}: ${stray.join(', ')} (\`down\` stops them)`);
  return ok;
}

async function readyNodeCount(c: ClusterInfo): Promise<number> {
  try {
    const admin = {
      ca: readFileSync(c.caFile),
      cert: readFileSync(c.admin.certFile),
      key: readFileSync(c.admin.keyFile),
    };
    const r = await kubeRequest<{ items?: NodeStatusView[] }>(c.server, admin, 'GET', '/api/v1/nodes', {
      timeoutMs: 3_000,
    });
    return r.status === 200 ? (r.body.items ?? []).filter(isNodeReady).length : 0;
  } catch {
    return 0;
  }
}

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? '';
  switch (cmd) {
    case 'up':
      await up();
      return 0;
    case 'down':
      await down();
      return 0;
    case 'status':
      return (await status()) ? 0 : 1;
    default:
      process.stderr.write('usage: node test/clusters/clusters.ts up|down|status\n');
      return 2;
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`[clusters] ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
