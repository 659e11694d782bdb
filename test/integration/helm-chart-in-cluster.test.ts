/**
 * The chart as a user installs it: the shell blocks of docs/how-to/install-in-a-cluster.md marked
 * `<!-- run-on-cluster -->`, as written, in one shell at the root of a copy of this checkout, against the test
 * cluster alpha with its real node (kubelet, containerd, runc: test/clusters/real-node.ts). The image is built and
 * pushed to the lane's registry by the page's own command, pulled by containerd and run as a container; the
 * StatefulSet's claim binds to a local PersistentVolume on the node; `kubectl exec … vault-rollout doctor` runs in the
 * pod. Then, as a user would check it: `kubectl exec … status | halts | halts clear`, `kubectl logs`, and a Vault audit
 * entry posted through `kubectl port-forward svc/…` that the pod turns into a restart in alpha (its ServiceAccount,
 * `inCluster: true`) and in beta (the kubeconfig Secret, `prod-eu` in the page). Last, the page's uninstall block.
 *
 * What the test gives the page's shell, and why:
 * - REGISTRY, NAMESPACE and RELEASE (the page's step 1 is the user's choice): the lane's registry, and names of its
 *   own, because the test cluster has a ClusterRole and an admission policy named vault-rollout for the tests' identity;
 * - routes.yaml and prod-eu.kubeconfig (the page shows the table's clusters only): beta's vault-rollout identity at
 *   the address where the real node's pods reach the lane's API servers;
 * - a `helm` function that renames the generated admission policy to the release's name (one policy named
 *   vault-rollout per cluster: the test cluster's is taken) and adds one values file, placing the pod on the real node
 *   and naming the StorageClass of the local PersistentVolume made here;
 * - the chart's ServiceAccount among the users the test cluster's own policy (the one named vault-rollout, which doctor
 *   reads) binds, as the page says to do in a cluster that has the policy already; the file's users again after.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';

import { REAL_NODE_CLUSTER } from '../clusters/clusters.ts';
import { loadClusters } from '../clusters/kube-http.ts';
import { REAL_NODE_NAME, REAL_NODE_POD_PLACEMENT } from '../clusters/real-node.ts';
import { codeBlocks, type CodeBlock } from '../docs/blocks.ts';
import { RUNTIME_GID, RUNTIME_UID, ROUTES_FILE, SERVE_PORT } from '../../tools/image/config.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  repoRootDir,
  uniqueName,
} from './support.ts';
import {
  createLocalVolume,
  deleteLocalVolume,
  expectRestartedInAlphaAndBeta,
  HELM,
  KUBECTL,
  kubeconfigForPods,
  kubectlInput,
  postThroughPortForward,
} from './real-node-chart.ts';

const PAGE = 'docs/how-to/install-in-a-cluster.md';
const SLOW = 600_000;
const { registry } = loadClusters();
const suffix = uniqueName('x').slice(-6);
// The release's name contains the chart's, so its objects are named after it alone (the pod is $RELEASE-0).
const RELEASE = `vault-rollout-${suffix}`;
const NAMESPACE = `vr-howto-${suffix}`;
const APPS = uniqueName('vr-howto-apps'); // the Deployments it restarts, in alpha and beta
const STORAGE_CLASS = `vr-howto-local-${suffix}`;
const PV = `vr-howto-${suffix}`;
const work = mkdtempSync(join(tmpdir(), 'vault-rollout-howto-'));
const checkout = join(work, 'checkout');
const volume = join(work, 'volume'); // the local PersistentVolume, on the node's (the host's) file system
const POD = `${RELEASE}-0`;

/** The page's blocks to run, before and after its Uninstall heading. */
function pageBlocks(): { install: CodeBlock[]; uninstall: CodeBlock[] } {
  const text = readFileSync(join(repoRootDir, PAGE), 'utf8');
  const uninstallLine = text.split('\n').indexOf('## Uninstall') + 1;
  expect(uninstallLine).toBeGreaterThan(0);
  const blocks = codeBlocks(PAGE, text).filter((b) => b.marker?.kind === 'run-on-cluster');
  return {
    install: blocks.filter((b) => b.line < uninstallLine),
    uninstall: blocks.filter((b) => b.line > uninstallLine),
  };
}

/** A copy of the checkout's root a user's shell stands in: links to everything, its own node_modules (bin/setup
 * refuses a linked one) and room for the files the page's commands write. */
function makeCheckoutCopy(): void {
  mkdirSync(checkout);
  for (const entry of readdirSync(repoRootDir)) {
    if (entry === 'node_modules') continue;
    symlinkSync(join(repoRootDir, entry), join(checkout, entry));
  }
  execFileSync('cp', ['-al', join(repoRootDir, 'node_modules'), join(checkout, 'node_modules')]);
}

const TEST_VALUES = join(work, 'real-node-values.yaml');

/** The shell the page's blocks run in: the test's `helm` function (see the header), then the blocks. */
function script(blocks: CodeBlock[]): string {
  const helm = `helm() {
  if [ "$1" = install ]; then
    sed -i -e "s/^  name: vault-rollout$/  name: $RELEASE/" -e "s/^  policyName: vault-rollout$/  policyName: $RELEASE/" policy.yaml
    command helm "$@" --values ${JSON.stringify(TEST_VALUES)}
  else
    command helm "$@"
  fi
}`;
  return [helm, ...blocks.map((b) => `# ${b.file}:${b.line}\n${b.text}`)].join('\n\n');
}

/** The settings of the test run a user's shell would not have: npm's and vitest's, Node's loader options. */
const NOT_INHERITED = /^(npm_|VITEST|NODE_OPTIONS$|NODE_V8_COVERAGE$|INIT_CWD$|KUBECONFIG$)/i;

function runBlocks(blocks: CodeBlock[]): string {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!NOT_INHERITED.test(k)) env[k] = v;
  const r = spawnSync('sh', ['-e', '-x', '-c', `exec 2>&1\n${script(blocks)}`], {
    cwd: checkout,
    env: {
      ...env,
      PATH: `${join(repoRootDir, 'node_modules/.bin')}:${join(repoRootDir, '.local/bin')}:/usr/local/bin:/usr/bin:/bin`,
      KUBECONFIG: cluster(REAL_NODE_CLUSTER).adminKubeconfig,
      REGISTRY: `${registry}/vault-rollout-howto`,
      NAMESPACE,
      RELEASE,
    },
    encoding: 'utf8',
    timeout: SLOW,
    maxBuffer: 64 * 1024 * 1024,
  });
  const printed = r.stdout ?? '';
  if (r.status !== 0)
    throw new Error(`${PAGE}: ${r.error?.message ?? `exit ${r.status}`}; printed:\n${printed.slice(-8000)}`);
  return printed;
}

/** `kubectl exec` in the pod's serve container: exit code and everything it printed. */
function exec(...argv: string[]): { code: number; stdout: string; all: string } {
  const r = spawnSync(
    KUBECTL,
    [
      `--kubeconfig=${cluster(REAL_NODE_CLUSTER).adminKubeconfig}`,
      '-n',
      NAMESPACE,
      'exec',
      POD,
      '-c',
      'serve',
      '--',
      ...argv,
    ],
    { encoding: 'utf8', timeout: 120_000 },
  );
  return { code: r.status ?? -1, stdout: r.stdout, all: `${r.stdout}${r.stderr}` };
}

/** A halt in the rotation store on the volume, where serve's XDG_STATE_HOME puts it, owned by the image's user. */
async function seedHalt(): Promise<string> {
  const file = join(volume, 'vault-rollout/rotations.sqlite');
  mkdirSync(dirname(file), { recursive: true });
  const store = new SqliteRotationStore(file);
  const rotation = 'c0ffee0123456789';
  await store.halt({
    rotation,
    route: 'howto',
    changes: [`secret/${APPS}/db@4`],
    secrets: [`secret/${APPS}/db version 4`],
    wave: 1,
    waves: 2,
    failing: { cluster: 'mgmt', namespace: APPS, kind: 'Deployment', name: 'app', state: 'FAILED' },
    why: 'did not roll out within 1m',
    notRestarted: ['prod-eu'],
    haltedAt: new Date().toISOString(),
  });
  store.close();
  for (const path of [volume, dirname(file), ...readdirSync(dirname(file)).map((n) => join(dirname(file), n))])
    chownSync(path, RUNTIME_UID, RUNTIME_GID);
  return rotation;
}

/** The test cluster's admission policy (test/clusters/admission-policy.yaml), binding `users` too when given. */
async function applyClusterPolicy(users: string[] = []): Promise<void> {
  const routes = join(repoRootDir, 'test/clusters/admission-routes.yaml');
  const manifest =
    users.length === 0
      ? readFileSync(join(repoRootDir, 'test/clusters/admission-policy.yaml'), 'utf8')
      : execFileSync(
          join(repoRootDir, 'node_modules/.bin/node'),
          [
            join(repoRootDir, 'lib/cli/main.ts'),
            'admission-policy',
            '--routes',
            routes,
            ...['system:serviceaccount:vault-rollout:vault-rollout', 'vault-rollout', ...users].flatMap((u) => [
              '--user',
              u,
            ]),
            '--group',
            'vault-rollout',
          ],
          { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
        );
  await kubectlInput(manifest, 'apply', '--server-side', '--field-manager=vault-rollout-clusters', '-f', '-');
}

const kube = () => admin(REAL_NODE_CLUSTER);
let halted = '';
let installLog = '';

beforeAll(async () => {
  for (const c of ['alpha', 'beta']) {
    await createNamespace(c, APPS);
    await createWorkload(c, APPS, 'Deployment', 'app');
  }
  makeCheckoutCopy();
  writeFileSync(
    join(checkout, 'routes.yaml'),
    `clusters:
  mgmt: { inCluster: true }
  prod-eu: { kubeconfig: { file: /etc/vault-rollout/kubeconfigs/prod-eu/kubeconfig } }
vault:
  mounts: { secret: 2 }
routes:
  - name: howto
    match: { path: "secret/${APPS}/db" }
    targets:
      - { clusters: [mgmt, prod-eu], namespace: ${APPS}, kind: Deployment, name: app }
`,
  );
  writeFileSync(join(checkout, 'prod-eu.kubeconfig'), kubeconfigForPods('beta'), { mode: 0o600 });
  writeFileSync(
    TEST_VALUES,
    stringify({ ...REAL_NODE_POD_PLACEMENT, persistence: { storageClassName: STORAGE_CLASS } }),
  );
  mkdirSync(volume, { recursive: true });
  halted = await seedHalt();
  await createLocalVolume(STORAGE_CLASS, PV, volume);
  await applyClusterPolicy([`system:serviceaccount:${NAMESPACE}:${RELEASE}`]);
  installLog = runBlocks(pageBlocks().install);
}, SLOW);

afterAll(async () => {
  // What the page's uninstall did not get to, when a test failed before it.
  spawnSync(HELM, [
    'uninstall',
    RELEASE,
    '--namespace',
    NAMESPACE,
    '--kubeconfig',
    cluster(REAL_NODE_CLUSTER).adminKubeconfig,
  ]);
  await deleteNamespace(REAL_NODE_CLUSTER, NAMESPACE);
  await applyClusterPolicy();
  await deleteLocalVolume(STORAGE_CLASS, PV);
  for (const c of ['alpha', 'beta']) await deleteNamespace(c, APPS);
  rmSync(work, { recursive: true, force: true });
}, SLOW);

interface PodView {
  spec: { nodeName?: string; containers: Array<{ name: string; image: string }> };
  status: { containerStatuses?: Array<{ name: string; ready: boolean; imageID: string }> };
}

describe(`${PAGE}, run as written on alpha's real node`, () => {
  it('pushes the image, installs it, and the pod runs it on the real node with its volume bound', async () => {
    const digest = /"digest":"(sha256:[0-9a-f]{64})"/.exec(readFileSync(join(checkout, 'image.json'), 'utf8'))?.[1];
    expect(digest).toBeDefined();
    expect(installLog).toContain(`STATUS: deployed`);
    const pod = (await kube().request('GET', `/api/v1/namespaces/${NAMESPACE}/pods/${POD}`)).body as PodView;
    expect(pod.spec.nodeName).toBe(REAL_NODE_NAME);
    expect(pod.spec.containers.find((c) => c.name === 'serve')?.image).toBe(
      `${registry}/vault-rollout-howto@${digest}`,
    );
    const serve = pod.status.containerStatuses?.find((c) => c.name === 'serve');
    expect(serve).toMatchObject({ ready: true });
    // containerd pulled it from the registry: the image it runs is the one pushed.
    expect(serve?.imageID).toContain(digest);
    const claim = (await kube().request('GET', `/api/v1/namespaces/${NAMESPACE}/persistentvolumeclaims/data-${POD}`))
      .body as { spec: { volumeName?: string }; status: { phase?: string } };
    expect(claim).toMatchObject({ spec: { volumeName: PV }, status: { phase: 'Bound' } });
  });

  it('kubectl exec … vault-rollout doctor (the page) reaches both clusters; kubectl logs shows serve', () => {
    expect(installLog).toMatch(/mgmt/);
    expect(installLog).toMatch(/prod-eu/);
    expect(installLog).not.toMatch(/executable file not found|ENOENT|SyntaxError/);
    expect(installLog).toContain('vault-rollout serve: listening on http://');
  });

  it('kubectl exec … vault-rollout status | halts | halts clear: the CLI beside serve, on its volume', () => {
    const status = exec('vault-rollout', 'status', '--routes', ROUTES_FILE);
    expect(status.all).toContain(`secret/${APPS}/db`);
    const halts = exec('vault-rollout', 'halts');
    expect(halts).toMatchObject({ code: 0 });
    expect(halts.stdout).toContain(halted);
    expect(halts.stdout).toContain('/var/lib/vault-rollout/vault-rollout/rotations.sqlite');
    const cleared = exec('vault-rollout', 'halts', 'clear', halted);
    expect(cleared).toMatchObject({ code: 0 });
    expect(cleared.stdout).toContain(`Cleared the halt of rotation ${halted}`);
    expect(exec('vault-rollout', 'halts').stdout).toContain('No halted rotation');
  });

  it('an audit entry through kubectl port-forward svc/… restarts app in alpha (inCluster) and beta (kubeconfig Secret)', async () => {
    const wrong = await postThroughPortForward(NAMESPACE, RELEASE, SERVE_PORT, {
      path: `secret/${APPS}/db`,
      version: 3,
      token: 'wrong-token-of-the-right-length-0123456789',
    });
    expect(wrong).toEqual({ readyz: 200, status: 401 });
    expect(
      await postThroughPortForward(NAMESPACE, RELEASE, SERVE_PORT, { path: `secret/${APPS}/db`, version: 3 }),
    ).toEqual({ readyz: 200, status: 202 });
    await expectRestartedInAlphaAndBeta(APPS, 3, { namespace: NAMESPACE, pod: POD });
  });

  it("the page's uninstall removes the release and its cluster-wide objects", async () => {
    runBlocks(pageBlocks().uninstall);
    expect((await kube().request('GET', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${RELEASE}`)).status).toBe(
      404,
    );
    expect(
      (await kube().request('GET', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${RELEASE}`))
        .status,
    ).toBe(404);
  });
});
