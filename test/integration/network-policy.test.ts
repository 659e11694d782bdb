/**
 * The chart's NetworkPolicy (`networkPolicy.enabled=true`), enforced on alpha's real node by kube-router's firewall
 * (iptables and ipset in the node's namespace: test/clusters/real-node.ts). The chart is installed as the install
 * guide says, from the image pushed to the lane's registry, with three clusters in its routing table: alpha (`mgmt`,
 * the pod's ServiceAccount), beta (`prod-eu`) and gamma (`far`), each reached by the node's pods at the same host
 * address, on its own port. `networkPolicy.egress.apiServers` gets alpha's endpoint as the guide's own command prints
 * it and beta's, not gamma's; `ingressFrom` one namespace.
 *
 * First the negative control, with the policy off: from the pod doctor reaches all three clusters, and busybox pods
 * in the allowed namespace and in another one both reach serve's /healthz. Then, once `helm upgrade` turned the policy
 * on and it applied: doctor still reaches alpha and beta but not gamma, an audit entry posted through
 * `kubectl port-forward` restarts a Deployment in alpha and in beta, and only the allowed namespace's busybox reaches
 * /healthz. So what the second half shows is the policy at work, not a network that was broken to begin with.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { loadClusters, waitFor } from '../clusters/kube-http.ts';
import { REAL_NODE_NAME, REAL_NODE_POD_PLACEMENT } from '../clusters/real-node.ts';
import { ROUTES_FILE, SERVE_PORT } from '../../tools/image/config.ts';
import {
  createLocalVolume,
  deleteLocalVolume,
  expectRestartedInAlphaAndBeta,
  HELM,
  KUBECTL,
  kubeconfigForPods,
  kubectl,
  kubectlInput,
  postThroughPortForward,
} from './real-node-chart.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  repoRootDir,
  uniqueName,
} from './support.ts';

const SLOW = 600_000;
const { registry, realNode, testImages } = loadClusters();
const suffix = uniqueName('x').slice(-6);
// The release's name contains the chart's, so its objects are named after it alone (the pod is $RELEASE-0).
const RELEASE = `vault-rollout-np${suffix}`;
const NAMESPACE = `vr-netpol-${suffix}`;
const ALLOWED = `vr-netpol-allowed-${suffix}`; // networkPolicy.ingressFrom
const OTHER = `vr-netpol-other-${suffix}`;
const APPS = uniqueName('vr-netpol-apps'); // the Deployments, in alpha, beta and gamma
const STORAGE_CLASS = `vr-netpol-local-${suffix}`;
const PV = `vr-netpol-${suffix}`;
const POD = `${RELEASE}-0`;
const work = mkdtempSync(join(tmpdir(), 'vault-rollout-netpol-'));
const adminKubeconfig = cluster(REAL_NODE_CLUSTER).adminKubeconfig;
const kube = () => admin(REAL_NODE_CLUSTER);

/** Runs a command to its end: exit code, its stdout, and everything it printed. */
function sh(command: string, args: string[], timeout = 120_000): { code: number; stdout: string; out: string } {
  const r = spawnSync(command, args, {
    cwd: repoRootDir,
    encoding: 'utf8',
    timeout,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, PATH: `${join(repoRootDir, 'node_modules/.bin')}:${process.env.PATH ?? ''}` },
  });
  return {
    code: r.status ?? -1,
    stdout: r.stdout ?? '',
    out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`,
  };
}

/** Its stdout, or an error with everything it printed. */
function mustRun(command: string, args: string[], timeout = 300_000): string {
  const r = sh(command, args, timeout);
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')}: exit ${r.code}\n${r.out.slice(-6000)}`);
  return r.stdout;
}

const helm = (...args: string[]): string =>
  mustRun(HELM, [...args, '--namespace', NAMESPACE, '--kubeconfig', adminKubeconfig], 420_000);

interface DoctorCheck {
  cluster: string;
  check: string;
  ok: boolean;
  detail: string;
}

/** `kubectl exec … vault-rollout doctor` in the serve container (the image has no shell): each cluster's reach. */
function doctorReach(): Record<string, DoctorCheck | undefined> {
  const r = sh(
    KUBECTL,
    [
      `--kubeconfig=${adminKubeconfig}`,
      ...['-n', NAMESPACE, 'exec', POD, '-c', 'serve', '--'],
      ...['vault-rollout', 'doctor', '--routes', ROUTES_FILE, '--output', 'json'],
    ],
    180_000,
  );
  if (!r.stdout.trim().startsWith('{')) throw new Error(`doctor printed no JSON (exit ${r.code}):\n${r.out}`);
  const { checks } = JSON.parse(r.stdout) as { checks: DoctorCheck[] };
  return Object.fromEntries(
    ['mgmt', 'prod-eu', 'far'].map((c) => [c, checks.find((x) => x.cluster === c && x.check === 'reachable')]),
  );
}

/** A busybox pod on the real node in `namespace`, sleeping, to probe from with `kubectl exec`. */
async function startProbePod(namespace: string): Promise<void> {
  await kubectlInput(
    stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'probe', namespace },
      spec: {
        ...REAL_NODE_POD_PLACEMENT,
        terminationGracePeriodSeconds: 0,
        containers: [{ name: 'probe', image: testImages!.busybox, command: ['sleep', '3600'] }],
      },
    }),
    'apply',
    '-f',
    '-',
  );
}

let podIp = '';

/**
 * serve's /healthz at the pod's address, from the probe pod of `namespace`, given 3 seconds. The pod's address, not
 * its Service's: the test clusters run no EndpointSlice controller, so no Service but `kubernetes` has endpoints for
 * kube-proxy. `busybox timeout 3` bounds wget, because the static busybox 1.35 of Debian 12 dies of a segmentation
 * fault on `wget -T` (exit code 139).
 */
function probeHealthz(namespace: string): { reached: boolean; out: string } {
  const r = sh(KUBECTL, [
    `--kubeconfig=${adminKubeconfig}`,
    ...['-n', namespace, 'exec', 'probe', '--'],
    ...['busybox', 'timeout', '3', 'busybox', 'wget', '-q', '-O', '-', `http://${podIp}:${SERVE_PORT}/healthz`],
  ]);
  return { reached: r.code === 0, out: r.out };
}

/** alpha's API server endpoint as the install guide's command prints it (its PORTS and ENDPOINTS columns). */
async function alphaEndpoint(): Promise<{ cidr: string; port: number; printed: string }> {
  const printed = await kubectl(
    'get',
    'endpointslices',
    '-n',
    'default',
    '-l',
    'kubernetes.io/service-name=kubernetes',
  );
  const [header, row] = printed.trim().split('\n');
  const columns = header!.trim().split(/\s+/);
  const cells = row!.trim().split(/\s+/);
  const port = Number(cells[columns.indexOf('PORTS')]);
  const address = cells[columns.indexOf('ENDPOINTS')]!.split(',')[0]!;
  return { cidr: `${address}/32`, port, printed };
}

const policyValues = join(work, 'network-policy.yaml');
let alpha: { cidr: string; port: number; printed: string };

beforeAll(async () => {
  if (realNode === undefined || testImages === undefined)
    throw new Error('this lane has no real node (clusters.json has no realNode or testImages)');
  for (const c of ['alpha', 'beta', 'gamma']) {
    await createNamespace(c, APPS);
    await createWorkload(c, APPS, 'Deployment', 'app');
  }
  for (const ns of [NAMESPACE, ALLOWED, OTHER]) await createNamespace(REAL_NODE_CLUSTER, ns);
  await Promise.all([startProbePod(ALLOWED), startProbePod(OTHER)]);

  // The install guide's steps, with three clusters in the table.
  const image = JSON.parse(
    mustRun('npm', ['run', 'image', '--silent', '--', '--push', `${registry}/vault-rollout-netpol:0.1.0`], 600_000),
  ) as { pushed: { digest: string } };
  const files = {
    routes: join(work, 'routes.yaml'),
    prodEu: join(work, 'prod-eu.kubeconfig'),
    far: join(work, 'far.kubeconfig'),
    values: join(work, 'real-node-values.yaml'),
  };
  writeFileSync(
    files.routes,
    `clusters:
  mgmt: { inCluster: true }
  prod-eu: { kubeconfig: { file: /etc/vault-rollout/kubeconfigs/prod-eu/kubeconfig } }
  far: { kubeconfig: { file: /etc/vault-rollout/kubeconfigs/far/kubeconfig } }
vault:
  mounts: { secret: 2 }
routes:
  - name: near
    match: { path: "secret/${APPS}/db" }
    targets:
      - { clusters: [mgmt, prod-eu], namespace: ${APPS}, kind: Deployment, name: app }
  - name: far
    match: { path: "secret/${APPS}/far" }
    targets:
      - { clusters: [far], namespace: ${APPS}, kind: Deployment, name: app }
`,
  );
  writeFileSync(files.prodEu, kubeconfigForPods('beta'), { mode: 0o600 });
  writeFileSync(files.far, kubeconfigForPods('gamma'), { mode: 0o600 });
  writeFileSync(
    files.values,
    stringify({ ...REAL_NODE_POD_PLACEMENT, persistence: { storageClassName: STORAGE_CLASS } }),
  );
  const volume = join(work, 'volume');
  mkdirSync(volume, { recursive: true });
  await createLocalVolume(STORAGE_CLASS, PV, volume);
  const k = (...args: string[]) => mustRun(KUBECTL, [`--kubeconfig=${adminKubeconfig}`, '-n', NAMESPACE, ...args]);
  k('create', 'secret', 'generic', 'vault-rollout-webhook', `--from-literal=token=${'ab'.repeat(32)}`);
  k('create', 'secret', 'generic', 'kubeconfig-prod-eu', `--from-file=kubeconfig=${files.prodEu}`);
  k('create', 'secret', 'generic', 'kubeconfig-far', `--from-file=kubeconfig=${files.far}`);
  // The test cluster has an admission policy named vault-rollout already (for the tests' identity), which helm cannot
  // take over: the chart installs without one, as the guide says for that case.
  helm(
    'install',
    RELEASE,
    join(repoRootDir, 'infra/helm/vault-rollout'),
    '--wait',
    '--timeout=5m',
    ...['--set', `image.repository=${registry}/vault-rollout-netpol`, '--set', `image.digest=${image.pushed.digest}`],
    ...['--set-file', `routes=${files.routes}`, '--set', 'admissionPolicy.skip=true'],
    ...['--set', 'webhook.existingSecret=vault-rollout-webhook', '--set', 'webhook.bearerTokenKey=token'],
    ...['--set', 'kubeconfigSecrets[0].name=prod-eu', '--set', 'kubeconfigSecrets[0].secretName=kubeconfig-prod-eu'],
    ...['--set', 'kubeconfigSecrets[1].name=far', '--set', 'kubeconfigSecrets[1].secretName=kubeconfig-far'],
    ...['--values', files.values],
  );
  const served = (await kube().request('GET', `/api/v1/namespaces/${NAMESPACE}/pods/${POD}`)).body as {
    status: { podIP: string };
  };
  podIp = served.status.podIP;
  for (const ns of [ALLOWED, OTHER])
    await waitFor(
      async () =>
        (
          (await kube().request('GET', `/api/v1/namespaces/${ns}/pods/probe`)).body as {
            status?: { phase?: string };
          }
        ).status?.phase === 'Running',
      { timeoutMs: 120_000, what: `${ns}/probe Running` },
    );

  alpha = await alphaEndpoint();
  writeFileSync(
    policyValues,
    stringify({
      networkPolicy: {
        enabled: true,
        ingressFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ALLOWED } } }],
        egress: {
          apiServers: [
            { cidr: alpha.cidr, port: alpha.port },
            { cidr: `${realNode.apiServersAt}/32`, port: Number(new URL(cluster('beta').server).port) },
          ],
        },
      },
    }),
  );
}, SLOW);

afterAll(async () => {
  spawnSync(HELM, ['uninstall', RELEASE, '--namespace', NAMESPACE, '--kubeconfig', adminKubeconfig]);
  for (const ns of [NAMESPACE, ALLOWED, OTHER]) await deleteNamespace(REAL_NODE_CLUSTER, ns);
  await deleteLocalVolume(STORAGE_CLASS, PV);
  for (const c of ['alpha', 'beta', 'gamma']) await deleteNamespace(c, APPS);
  rmSync(work, { recursive: true, force: true });
}, SLOW);

describe("the chart's NetworkPolicy on alpha's real node (kube-router's firewall)", () => {
  it('without the policy (the negative control): doctor reaches all three clusters, both namespaces reach /healthz', () => {
    const reach = doctorReach();
    for (const c of ['mgmt', 'prod-eu', 'far']) expect(reach[c], c).toMatchObject({ ok: true });
    expect(probeHealthz(ALLOWED)).toMatchObject({
      reached: true,
      out: expect.stringContaining('"ok":true') as unknown,
    });
    expect(probeHealthz(OTHER)).toMatchObject({ reached: true });
  });

  it("alpha's endpoint as the install guide's command prints it is where the pod's API server is", () => {
    expect(alpha.printed).toMatch(/PORTS\s+ENDPOINTS/);
    expect(alpha).toMatchObject({
      cidr: `${realNode!.apiServersAt}/32`,
      port: Number(new URL(cluster('alpha').server).port),
    });
  });

  it('with networkPolicy.enabled=true: only the allowed namespace reaches /healthz, the pod stays Ready', async () => {
    helm(
      'upgrade',
      RELEASE,
      join(repoRootDir, 'infra/helm/vault-rollout'),
      '--reuse-values',
      '--wait',
      '--timeout=5m',
      '--values',
      policyValues,
    );
    const policy = JSON.parse(await kubectl('-n', NAMESPACE, 'get', 'networkpolicy', RELEASE, '-o', 'json')) as {
      spec: { policyTypes: string[]; egress: Array<{ to?: Array<{ ipBlock?: { cidr: string } }>; ports: unknown[] }> };
    };
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    // DNS, then alpha's and beta's API servers: gamma's port is in no rule.
    const apiServerRules = policy.spec.egress.filter((r) => r.to?.[0]?.ipBlock !== undefined);
    expect(apiServerRules.map((r) => r.ports)).toEqual(
      ['alpha', 'beta'].map((c) => [{ port: Number(new URL(cluster(c).server).port), protocol: 'TCP' }]),
    );
    // kube-router applies a policy moments after it is written; until then the other namespace still gets in.
    await waitFor(async () => !probeHealthz(OTHER).reached, {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: 'the policy to shut the other namespace out',
    });
    const blocked = probeHealthz(OTHER);
    expect(blocked.reached).toBe(false);
    // Dropped, so the connection hangs until `timeout` ends wget (SIGTERM: exit code 143), or refused.
    expect(blocked.out).toMatch(/exit code 143|timed out|refused|unreachable/i);
    expect(probeHealthz(ALLOWED)).toMatchObject({
      reached: true,
      out: expect.stringContaining('"ok":true') as unknown,
    });
    const pod = (await kube().request('GET', `/api/v1/namespaces/${NAMESPACE}/pods/${POD}`)).body as {
      spec: { nodeName?: string };
      status: { containerStatuses?: Array<{ name: string; ready: boolean; restartCount: number }> };
    };
    expect(pod.spec.nodeName).toBe(REAL_NODE_NAME);
    expect(pod.status.containerStatuses?.find((c) => c.name === 'serve')).toMatchObject({ ready: true });
  });

  it("doctor in the pod reaches alpha and beta, not gamma (same address, a port the policy doesn't list)", () => {
    const reach = doctorReach();
    expect(reach.mgmt, 'mgmt').toMatchObject({ ok: true });
    expect(reach['prod-eu'], 'prod-eu').toMatchObject({ ok: true });
    expect(reach.far, 'far').toMatchObject({ ok: false });
    expect(reach.far?.detail).toMatch(/timeout|unreachable/);
  });

  it('an audit entry through kubectl port-forward restarts app in alpha (inCluster) and beta (kubeconfig Secret)', async () => {
    const posted = await postThroughPortForward(NAMESPACE, RELEASE, SERVE_PORT, {
      path: `secret/${APPS}/db`,
      version: 3,
    });
    expect(posted.status).toBe(202);
    await expectRestartedInAlphaAndBeta(APPS, 3, { namespace: NAMESPACE, pod: POD });
    // gamma's Deployment was never a target of that path: nothing there moved.
    const far = await getWorkload('gamma', APPS, 'Deployment', 'app');
    expect(far.spec.template?.metadata?.annotations?.['vault-rollout.io/versions']).toBeUndefined();
  });
});
