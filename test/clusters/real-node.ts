// The real node of a lane's cluster alpha: kubelet and kube-proxy (built with the control plane by
// build-binaries.sh), Debian's containerd 1.6 and runc, and the CNI bridge, host-local and loopback plugins — beside
// the kwok nodes, labelled and tainted `vault-rollout.test/real=true` so that only pods that ask for it land there.
//
// Network: everything of the node runs in a network namespace of its own (`vr-node-<port base>`), so two lanes'
// nodes (their kube-proxy iptables rules, their pod bridge `vr0` and pod range 10.88.0.0/24) never meet. A veth pair
// links it to the host: HOST_IP on the host, NODE_IP in the node's namespace, a /30 of 10.250.0.0/16 chosen by the
// port base. The API servers (127.0.0.1 only) are reached at HOST_IP: socat, bound there, carries the node's and its
// pods' connections to each cluster's API server of the lane (alpha's advertises HOST_IP; a pod reaches beta and gamma
// there as a management cluster reaches remote clusters) and to the lane's registry on 127.0.0.1. The node's namespace has no default route and the pods
// resolve no name: pod traffic reaches the host's two forwarders and nothing else. kubelet and containerd share the
// host's mount namespace (`nsenter --net` only), so the volumes kubelet mounts are the ones runc sees.
//
// NetworkPolicy: kube-router's firewall alone (`--run-firewall`, router and service proxy off) enforces the
// NetworkPolicies of the node's pods with iptables and ipset in the node's namespace, as its own user with read-only
// rights (REAL_NODE_RBAC). It is a test-only component (build-binaries.sh says why this version and not the reference
// implementation).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { kubeRequest, waitFor, type ClusterInfo } from './kube-http.ts';
import { issueCert, writeKubeconfig, type CertFiles } from './pki.ts';
import { DiedError, isAlive, rethrowWithLog, run, startProcess, type Managed } from './processes.ts';

export const REAL_NODE_NAME = 'real-node-0';
/** The label and the NoSchedule taint of the real node: a pod lands there only with the selector and toleration. */
export const REAL_NODE_LABEL = 'vault-rollout.test/real';
export const REAL_NODE_POD_CIDR = '10.88.0.0/24';
const REAL_NODE_TAINT = { key: REAL_NODE_LABEL, value: 'true', effect: 'NoSchedule' } as const;
const CGROUP_ROOT = '/sys/fs/cgroup';

export interface NodeNetwork {
  netns: string;
  hostVeth: string;
  nodeVeth: string;
  hostIp: string;
  nodeIp: string;
}

/** The node's namespace, veth pair and /30 from the lane's port base (so each lane has its own). */
export function realNodeNetwork(portBase: number): NodeNetwork {
  const slot = portBase % 16384;
  const third = Math.floor((slot * 4) / 256);
  const fourth = (slot * 4) % 256;
  return {
    netns: `vr-node-${portBase}`,
    hostVeth: `vrh${portBase}`,
    nodeVeth: `vrn${portBase}`,
    hostIp: `10.250.${third}.${fourth + 1}`,
    nodeIp: `10.250.${third}.${fourth + 2}`,
  };
}

/** What a pod needs to land on the real node (merge into its spec). */
export const REAL_NODE_POD_PLACEMENT = {
  nodeSelector: { [REAL_NODE_LABEL]: 'true' },
  tolerations: [{ key: REAL_NODE_LABEL, operator: 'Equal', value: 'true', effect: 'NoSchedule' }],
} as const;

export interface RealNodePaths {
  dir: string;
  sock: string;
  runcRoot: string;
  kubeletRoot: string;
}
export const realNodePaths = (dir: string): RealNodePaths => ({
  dir,
  sock: join(dir, 'containerd', 'containerd.sock'),
  runcRoot: join(dir, 'containerd', 'runc'),
  kubeletRoot: join(dir, 'kubelet'),
});

export interface RealNodeCerts {
  kubelet: CertFiles;
  kubeletServing: CertFiles;
  kubeProxy: CertFiles;
  kubeRouter: CertFiles;
  apiserverKubeletClient: CertFiles;
}

/** kube-router's user, bound only to the ClusterRole of the same name in REAL_NODE_RBAC. */
export const KUBE_ROUTER_USER = 'vault-rollout-test:kube-router';
/** The chain kube-router puts in the node's FORWARD chain once its first sync ran: the firewall is in place. */
export const KUBE_ROUTER_FORWARD_CHAIN = 'KUBE-ROUTER-FORWARD';

/** kubelet's identity (system:node:<name> in system:nodes, for the Node authorizer) and serving certificate,
 * kube-proxy's (system:kube-proxy, bound to system:node-proxier) and the API server's client certificate to kubelet. */
export function issueRealNodeCerts(pkiDir: string, ca: CertFiles, net: NodeNetwork): RealNodeCerts {
  return {
    kubelet: issueCert(pkiDir, ca, {
      name: 'kubelet',
      commonName: `system:node:${REAL_NODE_NAME}`,
      organizations: ['system:nodes'],
      usage: 'client',
    }),
    kubeletServing: issueCert(pkiDir, ca, {
      name: 'kubelet-serving',
      commonName: REAL_NODE_NAME,
      usage: 'server',
      sans: [`IP:${net.nodeIp}`, `DNS:${REAL_NODE_NAME}`],
    }),
    kubeProxy: issueCert(pkiDir, ca, { name: 'kube-proxy', commonName: 'system:kube-proxy', usage: 'client' }),
    kubeRouter: issueCert(pkiDir, ca, { name: 'kube-router', commonName: KUBE_ROUTER_USER, usage: 'client' }),
    apiserverKubeletClient: issueCert(pkiDir, ca, {
      name: 'apiserver-kubelet-client',
      commonName: 'kube-apiserver-kubelet-client',
      organizations: ['system:masters'],
      usage: 'client',
    }),
  };
}

/**
 * kube-proxy's rights: the bootstrap ClusterRole system:node-proxier, as kubeadm binds it. kube-router's: list and
 * watch what its informers watch — pods, namespaces and NetworkPolicies for the firewall; nodes, Services, Endpoints
 * and EndpointSlices because it starts those informers whichever controllers run — and get its own Node (its address)
 * when it starts; nothing it could write (its upstream ClusterRole also grants events and leases, which the firewall
 * never uses).
 */
export const REAL_NODE_RBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ${KUBE_ROUTER_USER}
  labels:
    app.kubernetes.io/component: test-clusters
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods, namespaces, services, endpoints]
    verbs: [list, watch]
  - apiGroups: [networking.k8s.io]
    resources: [networkpolicies]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ${KUBE_ROUTER_USER}
  labels:
    app.kubernetes.io/component: test-clusters
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ${KUBE_ROUTER_USER}
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: ${KUBE_ROUTER_USER}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vault-rollout-test:kube-proxy
  labels:
    app.kubernetes.io/component: test-clusters
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-proxier
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: system:kube-proxy
`;

const nsenter = (net: NodeNetwork): string[] => ['/usr/bin/nsenter', `--net=/run/netns/${net.netns}`];

/**
 * The node's processes, in the order they stop: kube-router, kube-proxy and kubelet, containerd, then the host's
 * forwarders (one per cluster of the lane, named by cluster, and the registry's).
 */
export function realNodeProcesses(
  dir: string,
  net: NodeNetwork,
  binDir: string,
  clusters: readonly string[],
): Managed[] {
  const m = (label: string, binary: string, inNode: boolean): Managed => ({
    label: `alpha/${label}`,
    binary,
    pidFile: join(dir, `${label}.pid`),
    logFile: join(dir, 'logs', `${label}.log`),
    ...(inNode ? { launcher: nsenter(net) } : {}),
  });
  return [
    m('kube-router', join(binDir, 'kube-router'), true),
    m('kube-proxy', join(binDir, 'kube-proxy'), true),
    m('kubelet', join(binDir, 'kubelet'), true),
    m('containerd', '/usr/bin/containerd', true),
    ...clusters.map((name) => m(`forward-apiserver-${name}`, '/usr/bin/socat', false)),
    m('forward-registry', '/usr/bin/socat', false),
  ];
}

const ip = (...args: string[]): void => {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
};

/** A new namespace and veth pair (an old one of the same lane goes first); forwarding on inside only. */
export function createNodeNetwork(net: NodeNetwork): void {
  deleteNodeNetwork(net);
  ip('netns', 'add', net.netns);
  ip('link', 'add', net.hostVeth, 'type', 'veth', 'peer', 'name', net.nodeVeth, 'netns', net.netns);
  ip('addr', 'add', `${net.hostIp}/30`, 'dev', net.hostVeth);
  ip('link', 'set', net.hostVeth, 'up');
  ip('-n', net.netns, 'addr', 'add', `${net.nodeIp}/30`, 'dev', net.nodeVeth);
  ip('-n', net.netns, 'link', 'set', net.nodeVeth, 'up');
  ip('-n', net.netns, 'link', 'set', 'lo', 'up');
  execFileSync(nsenter(net)[0]!, [...nsenter(net).slice(1), 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
}

/** Removes the namespace (its end of the veth pair goes with it, and so does the host's end). */
export function deleteNodeNetwork(net: NodeNetwork): void {
  if (existsSync(`/run/netns/${net.netns}`)) spawnSync('ip', ['netns', 'delete', net.netns]);
  spawnSync('ip', ['link', 'delete', net.hostVeth], { stdio: 'ignore' });
}

export interface NodeConfigInput {
  paths: RealNodePaths;
  net: NodeNetwork;
  caFile: string;
  certs: RealNodeCerts;
  pauseImage: string;
  registry: string;
  kubeletKubeconfig: string;
  kubeProxyKubeconfig: string;
  kubeRouterKubeconfig: string;
  cgroupRoot: string;
}

/** containerd's configuration: its own root, state, socket and runc root under the node's directory. */
function containerdConfig(c: NodeConfigInput): string {
  const d = join(c.paths.dir, 'containerd');
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return `version = 2
root = "${d}/root"
state = "${d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "${c.paths.sock}"
[ttrpc]
  address = "${c.paths.sock}.ttrpc"
[metrics]
  address = ""
[${cri}]
  sandbox_image = "${c.pauseImage}"
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  disable_apparmor = true
  # Here even root may not lower a process's oom_score_adj (the pause container asks -998): containers get no lower
  # a score than containerd's own, as in nested set-ups (kind).
  restrict_oom_score_adj = true
[${cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[${cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[${cri}.containerd.runtimes.runc.options]
  BinaryName = "/usr/sbin/runc"
  Root = "${c.paths.runcRoot}"
  SystemdCgroup = false
[${cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "${c.paths.dir}/cni"
  max_conf_num = 1
[${cri}.registry.mirrors."${c.registry}"]
  endpoint = ["http://${c.net.hostIp}:${c.registry.split(':')[1]}"]
`;
}

/** The pods' network: a bridge in the node's namespace, addresses from host-local (its state under the node's
 * directory), masquerading what leaves the pod range (so the host answers the node's own address). */
function cniConfig(c: NodeConfigInput): string {
  return JSON.stringify(
    {
      cniVersion: '0.4.0',
      name: 'vault-rollout-real-node',
      plugins: [
        {
          type: 'bridge',
          bridge: 'vr0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            dataDir: join(c.paths.dir, 'cni-ipam'),
            ranges: [[{ subnet: REAL_NODE_POD_CIDR }]],
            routes: [{ dst: '0.0.0.0/0' }],
          },
        },
      ],
    },
    null,
    2,
  );
}

/** kubelet: cgroup v1 with the cgroupfs driver under a cgroup root of the lane's own, webhook authentication and
 * authorisation, registered tainted; no image garbage collection and near-zero eviction thresholds (a shared disk). */
function kubeletConfig(c: NodeConfigInput): string {
  return JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: c.net.nodeIp,
      port: 10250,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: 10248,
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: c.caFile } },
      authorization: { mode: 'Webhook' },
      tlsCertFile: c.certs.kubeletServing.certFile,
      tlsPrivateKeyFile: c.certs.kubeletServing.keyFile,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: c.cgroupRoot,
      failCgroupV1: false,
      failSwapOn: false,
      containerRuntimeEndpoint: `unix://${c.paths.sock}`,
      registerWithTaints: [REAL_NODE_TAINT],
      evictionHard: {
        'memory.available': '50Mi',
        'nodefs.available': '1%',
        'imagefs.available': '1%',
        'nodefs.inodesFree': '1%',
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      // Its own pod logs directory: a kubelet removes the directories there of pods it does not know (another lane's).
      podLogsDir: join(c.paths.dir, 'pod-logs'),
      resolvConf: join(c.paths.dir, 'resolv.conf'),
      maxPods: 30,
      serializeImagePulls: false,
      rotateCertificates: false,
      serverTLSBootstrap: false,
      shutdownGracePeriod: '0s',
    },
    null,
    2,
  );
}

function kubeProxyConfig(c: NodeConfigInput): string {
  return JSON.stringify(
    {
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      clientConnection: { kubeconfig: c.kubeProxyKubeconfig },
      mode: 'iptables',
      clusterCIDR: REAL_NODE_POD_CIDR,
      hostnameOverride: REAL_NODE_NAME,
      bindAddress: c.net.nodeIp,
      healthzBindAddress: '127.0.0.1:10256',
      metricsBindAddress: '127.0.0.1:10249',
      // The conntrack table size is the host's (only the initial namespace may set it): leave it and its timeouts.
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    },
    null,
    2,
  );
}

/** Writes every configuration file; returns each process's arguments by label. */
export function writeNodeConfig(c: NodeConfigInput, apiPorts: Record<string, number>): Record<string, string[]> {
  const d = c.paths.dir;
  for (const sub of ['logs', 'cni', 'cni-ipam', 'containerd', 'kubelet', 'pod-logs'])
    mkdirSync(join(d, sub), { recursive: true });
  for (const sub of cgroupSubsystems()) mkdirSync(join(CGROUP_ROOT, sub, c.cgroupRoot), { recursive: true });
  writeFileSync(join(d, 'containerd.toml'), containerdConfig(c));
  writeFileSync(join(d, 'cni', '10-vault-rollout.conflist'), cniConfig(c));
  writeFileSync(join(d, 'kubelet.json'), kubeletConfig(c));
  writeFileSync(join(d, 'kube-proxy.json'), kubeProxyConfig(c));
  // No name server: a pod that looks a name up asks its own loopback and gets no answer.
  writeFileSync(join(d, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  const forward = (port: string): string[] => [
    `TCP-LISTEN:${port},bind=${c.net.hostIp},reuseaddr,fork`,
    `TCP:127.0.0.1:${port}`,
  ];
  return {
    'alpha/containerd': ['--config', join(d, 'containerd.toml')],
    'alpha/kubelet': [
      `--config=${join(d, 'kubelet.json')}`,
      `--kubeconfig=${c.kubeletKubeconfig}`,
      `--root-dir=${c.paths.kubeletRoot}`,
      `--node-ip=${c.net.nodeIp}`,
      `--hostname-override=${REAL_NODE_NAME}`,
      `--node-labels=${REAL_NODE_LABEL}=true`,
    ],
    'alpha/kube-proxy': [`--config=${join(d, 'kube-proxy.json')}`],
    // The firewall only: no BGP router, no IPVS service proxy (kube-proxy's iptables rules stay), no CNI set-up; its
    // health endpoint on :20244 inside the node's namespace, no metrics.
    'alpha/kube-router': [
      `--kubeconfig=${c.kubeRouterKubeconfig}`,
      `--hostname-override=${REAL_NODE_NAME}`,
      '--run-firewall=true',
      '--run-router=false',
      '--run-service-proxy=false',
      '--run-loadbalancer=false',
      '--enable-cni=false',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--metrics-port=0',
    ],
    ...Object.fromEntries(
      Object.entries(apiPorts).map(([name, port]) => [`alpha/forward-apiserver-${name}`, forward(String(port))]),
    ),
    'alpha/forward-registry': forward(c.registry.split(':')[1]!),
  };
}

/** The cgroup v1 hierarchies mounted here (cpu, memory, pids, … and the named `systemd` one, which kubelet checks too). */
function cgroupSubsystems(): string[] {
  if (!existsSync(CGROUP_ROOT)) return [];
  return readdirSync(CGROUP_ROOT).filter((s) => s !== 'unified' && existsSync(join(CGROUP_ROOT, s, 'cgroup.procs')));
}

/**
 * After the processes stopped: the containers runc still runs (containerd's shims outlive it), the mounts under the
 * node's directory (overlay roots, volumes), the pods' namespaces, the node's namespace and its cgroups.
 */
export function cleanUpRealNode(paths: RealNodePaths, net: NodeNetwork, cgroupRoot: string): void {
  const runcNs = join(paths.runcRoot, 'k8s.io');
  if (existsSync(runcNs)) {
    for (const id of readdirSync(runcNs))
      spawnSync('/usr/sbin/runc', ['--root', runcNs, 'delete', '--force', id], { stdio: 'ignore' });
  }
  for (const pid of shimPids(paths.sock)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(`${paths.dir}/`))
    .reverse();
  for (const m of mounts) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  deleteNodeNetwork(net);
  for (const sub of cgroupSubsystems()) removeCgroupTree(join(CGROUP_ROOT, sub, cgroupRoot));
}

function shimPids(sock: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return argv[0]?.endsWith('containerd-shim-runc-v2') === true && argv.includes(sock);
      } catch {
        return false;
      }
    });
}

function removeCgroupTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroupTree(join(dir, e.name));
  try {
    rmdirSync(dir);
  } catch {
    /* still in use: the next start reuses it */
  }
}

export interface StartRealNodeInput {
  cluster: ClusterInfo;
  paths: RealNodePaths;
  net: NodeNetwork;
  certs: RealNodeCerts;
  binDir: string;
  /** The lane's API server ports by cluster name; the node's own cluster is `cluster.name`. */
  apiPorts: Record<string, number>;
  registry: string;
  pauseImage: string;
  cgroupRoot: string;
}

const INOTIFY_INSTANCES = '/proc/sys/fs/inotify/max_user_instances';
/** What the node needs at least: every API server, controller, kubelet and containerd of the machine holds some. */
const INOTIFY_INSTANCES_NEEDED = 1024;

/**
 * containerd's CRI plugin and kubelet each open inotify instances, and the per-user default (128) runs out when several
 * sets of clusters run on one machine: containerd then starts without its CRI service and kubelet exits ("unknown
 * service runtime.v1.RuntimeService"). Raised here as root, as kind's known issues advise; where /proc/sys is
 * read-only the limit stays, and a CRI that did not load is reported with containerd's own words.
 */
export function raiseInotifyInstances(): void {
  try {
    if (Number(readFileSync(INOTIFY_INSTANCES, 'utf8').trim()) < INOTIFY_INSTANCES_NEEDED)
      writeFileSync(INOTIFY_INSTANCES, String(INOTIFY_INSTANCES_NEEDED));
  } catch {
    /* not writable here: the CRI check below says what failed */
  }
}

/** containerd's log line saying its CRI plugin did not load, if it says so. */
function criLoadFailure(logFile: string): string | undefined {
  try {
    return readFileSync(logFile, 'utf8')
      .split('\n')
      .find((l) => l.includes('failed to load plugin io.containerd.grpc.v1.cri'));
  } catch {
    return undefined;
  }
}

/** kube-proxy's binding, the namespace and link, containerd, kubelet and kube-proxy; waits for the Node to be Ready. */
export async function startRealNode(s: StartRealNodeInput): Promise<void> {
  const server = `https://${s.net.hostIp}:${s.apiPorts[s.cluster.name]}`;
  const kubeletKubeconfig = join(s.paths.dir, 'kubelet.kubeconfig');
  const kubeProxyKubeconfig = join(s.paths.dir, 'kube-proxy.kubeconfig');
  const kubeRouterKubeconfig = join(s.paths.dir, 'kube-router.kubeconfig');
  mkdirSync(s.paths.dir, { recursive: true });
  writeKubeconfig(
    kubeletKubeconfig,
    s.cluster.name,
    server,
    s.cluster.caFile,
    `system:node:${REAL_NODE_NAME}`,
    s.certs.kubelet,
  );
  writeKubeconfig(
    kubeProxyKubeconfig,
    s.cluster.name,
    server,
    s.cluster.caFile,
    'system:kube-proxy',
    s.certs.kubeProxy,
  );
  writeKubeconfig(kubeRouterKubeconfig, s.cluster.name, server, s.cluster.caFile, KUBE_ROUTER_USER, s.certs.kubeRouter);
  await run(
    join(s.binDir, 'kubectl'),
    [
      `--kubeconfig=${s.cluster.adminKubeconfig}`,
      'apply',
      '--server-side',
      '--field-manager=vault-rollout-clusters',
      '--filename=-',
    ],
    { input: REAL_NODE_RBAC },
  );
  raiseInotifyInstances();
  createNodeNetwork(s.net);
  const args = writeNodeConfig(
    { ...s, caFile: s.cluster.caFile, kubeletKubeconfig, kubeProxyKubeconfig, kubeRouterKubeconfig },
    s.apiPorts,
  );
  const clusters = Object.keys(s.apiPorts);
  const procs = new Map(realNodeProcesses(s.paths.dir, s.net, s.binDir, clusters).map((p) => [p.label, p]));
  const start = (label: string): [Managed, number] => {
    const p = procs.get(label)!;
    return [p, startProcess(p, args[label]!)];
  };
  const started = [
    ...clusters.map((name) => `alpha/forward-apiserver-${name}`),
    'alpha/forward-registry',
    'alpha/containerd',
  ].map(start);
  const [containerd, containerdPid] = started.at(-1)!;
  await waitFor(
    async () => {
      if (!isAlive(containerdPid)) throw new DiedError(containerd);
      return existsSync(s.paths.sock);
    },
    { timeoutMs: 30_000, intervalMs: 100, what: 'containerd socket' },
  ).catch(rethrowWithLog(containerd));
  const criFailure = criLoadFailure(containerd.logFile);
  if (criFailure !== undefined)
    throw new Error(`alpha/containerd started without its CRI service (kubelet cannot use it): ${criFailure}`);
  const [kubelet, kubeletPid] = start('alpha/kubelet');
  start('alpha/kube-proxy');
  const admin = {
    ca: readFileSync(s.cluster.caFile),
    cert: readFileSync(s.cluster.admin.certFile),
    key: readFileSync(s.cluster.admin.keyFile),
  };
  await waitFor(
    async () => {
      if (!isAlive(kubeletPid)) throw new DiedError(kubelet);
      const r = await kubeRequest<{ status?: { conditions?: { type: string; status: string }[] } }>(
        s.cluster.server,
        admin,
        'GET',
        `/api/v1/nodes/${REAL_NODE_NAME}`,
      );
      return (
        r.status === 200 && (r.body.status?.conditions ?? []).some((x) => x.type === 'Ready' && x.status === 'True')
      );
    },
    { timeoutMs: 120_000, intervalMs: 250, what: `${s.cluster.name}: node ${REAL_NODE_NAME} Ready` },
  ).catch(rethrowWithLog(kubelet));
  // The API server taints a new Node not-ready; the node-lifecycle controller that would lift it is not run here (as
  // for the kwok nodes): the node keeps only its own taint.
  const r = await kubeRequest(s.cluster.server, admin, 'PATCH', `/api/v1/nodes/${REAL_NODE_NAME}`, {
    body: { spec: { taints: [REAL_NODE_TAINT] } },
    contentType: 'application/merge-patch+json',
  });
  if (r.status !== 200) throw new Error(`${s.cluster.name}: untainting node ${REAL_NODE_NAME}: HTTP ${r.status}`);
  // kube-router reads its Node's address when it starts (it exits without it), then creates its chains once its
  // informers synced: from then on a NetworkPolicy is enforced moments after it is written.
  const [kubeRouter, kubeRouterPid] = start('alpha/kube-router');
  await waitFor(
    async () => {
      if (!isAlive(kubeRouterPid)) throw new DiedError(kubeRouter);
      return hasForwardChain(s.net);
    },
    { timeoutMs: 90_000, intervalMs: 250, what: `${s.cluster.name}: kube-router's ${KUBE_ROUTER_FORWARD_CHAIN} chain` },
  ).catch(rethrowWithLog(kubeRouter));
}

/** Whether kube-router's firewall chain is in the node's namespace (iptables -S answers 1 for a missing chain). */
export function hasForwardChain(net: NodeNetwork): boolean {
  const r = spawnSync(
    nsenter(net)[0]!,
    [...nsenter(net).slice(1), 'iptables', '-w', '5', '-S', KUBE_ROUTER_FORWARD_CHAIN],
    {
      stdio: 'ignore',
    },
  );
  return r.status === 0;
}
