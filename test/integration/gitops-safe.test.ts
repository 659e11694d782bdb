/**
 * A vault-rollout restart is GitOps-safe: it survives the GitOps controller's next sync and causes no second rollout.
 * Each tool is played by its own code (test/gitops/, built by test/clusters/build-gitops.sh): Flux's
 * kustomize-controller server-side apply (github.com/fluxcd/pkg/ssa, field manager kustomize-controller, its
 * field-manager clean-up) and Argo CD's client-side apply and diff (github.com/argoproj/gitops-engine). On alpha, for
 * each tool: the tool applies a Deployment, vault-rollout restarts it (`apply` before Flux, `serve`'s intake before
 * Argo CD), the tool applies the same manifest again (its next sync) and, for Argo CD, diffs it (what self-heal acts
 * on); then the restart is still on the pod template and the ReplicaSets, their pod-template-hashes and which one
 * runs are what the restart left.
 *
 * The contrast: the same with `kubectl rollout restart` (field manager kubectl-rollout). Flux's clean-up names the
 * manager "kubectl" and matches it as a prefix, so it takes kubectl-rollout's fields over and its apply drops the
 * annotation: the Deployment rolls back to its first ReplicaSet, a second rollout. Argo CD keeps it, as it keeps
 * vault-rollout's. docs/how-to/gitops.md says what a user sees and why.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { gitopsBinary, type GitopsHelper } from '../clusters/gitops.ts';
import { REPO_ROOT, waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { admin, cluster, clusters, createNamespace, deleteNamespace, spawnServe, uniqueName } from './support.ts';
import { kvWriteAudit, serveEnv } from './wave-fixtures.ts';

const run = promisify(execFile);
const NS = uniqueName('vr-gitops');
const SLOW = { timeout: 180_000 };
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
const VERSIONS = 'vault-rollout.io/versions';
const work = mkdtempSync(join(tmpdir(), 'vr-gitops-'));
// The GitOps controllers' own rights are cluster-wide: they run as alpha's admin here.
const kubeconfig = () => cluster('alpha').adminKubeconfig;

beforeAll(async () => {
  await createNamespace('alpha', NS);
}, SLOW.timeout);
afterAll(async () => {
  await deleteNamespace('alpha', NS);
  rmSync(work, { recursive: true, force: true });
});

/** The Deployment as it would sit in the Git repository: no annotation on the pod template. */
function manifest(name: string): string {
  const file = join(work, `${name}.yaml`);
  writeFileSync(
    file,
    `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  namespace: ${NS}
  labels: { app: ${name} }
spec:
  replicas: 2
  selector:
    matchLabels: { app: ${name} }
  template:
    metadata:
      labels: { app: ${name} }
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
`,
  );
  return file;
}

type Mode = 'flux-apply' | 'argo-apply' | 'argo-diff';
interface HelperResult {
  tool: string;
  mode: Mode;
  changes?: { subject: string; action: string }[];
  applied?: { subject: string; output: string }[];
  diffs?: { subject: string; modified: boolean; normalizedLive: unknown; predictedLive: unknown }[];
  synced?: boolean;
}

async function gitops(mode: Mode, file: string): Promise<HelperResult> {
  const helper: GitopsHelper = mode === 'flux-apply' ? 'gitops-flux' : 'gitops-argo';
  const { stdout } = await run(gitopsBinary(helper), ['-kubeconfig', kubeconfig(), '-manifest', file, '-mode', mode], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout) as HelperResult;
}

interface Deployment {
  metadata: {
    generation: number;
    resourceVersion: string;
    managedFields?: { manager: string; operation: string; subresource?: string; fieldsV1?: unknown }[];
  };
  spec: { replicas: number; template: { metadata: { annotations?: Record<string, string> } } };
  status?: { observedGeneration?: number; replicas?: number; updatedReplicas?: number; readyReplicas?: number };
}
interface ReplicaSetView {
  name: string;
  hash: string;
  revision: string;
  replicas: number;
}

async function deployment(name: string): Promise<Deployment> {
  const res = await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/${name}`);
  if (res.status !== 200) throw new Error(`GET deployment ${name}: HTTP ${res.status}`);
  return res.body as Deployment;
}

async function replicaSets(name: string): Promise<ReplicaSetView[]> {
  const res = await admin('alpha').request(
    'GET',
    `/apis/apps/v1/namespaces/${NS}/replicasets?labelSelector=${encodeURIComponent(`app=${name}`)}`,
  );
  const items = (
    res.body as {
      items: {
        metadata: { name: string; labels: Record<string, string>; annotations?: Record<string, string> };
        spec: { replicas: number };
      }[];
    }
  ).items;
  return items
    .map((rs) => ({
      name: rs.metadata.name,
      hash: rs.metadata.labels['pod-template-hash'] ?? '',
      revision: rs.metadata.annotations?.['deployment.kubernetes.io/revision'] ?? '',
      replicas: rs.spec.replicas,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Waits until the Deployment's rollout is complete (the controller saw the latest generation and every replica is
 * updated and ready) and nothing has moved for two seconds, then returns its ReplicaSets.
 */
async function settled(name: string, replicaSetCount: number): Promise<ReplicaSetView[]> {
  let last = '';
  let since = Date.now();
  return waitFor(
    async () => {
      const d = await deployment(name);
      const sets = await replicaSets(name);
      const s = d.status ?? {};
      const complete =
        s.observedGeneration === d.metadata.generation &&
        s.updatedReplicas === d.spec.replicas &&
        s.readyReplicas === d.spec.replicas &&
        s.replicas === d.spec.replicas &&
        sets.length === replicaSetCount;
      const now = JSON.stringify({ rv: d.metadata.resourceVersion, sets });
      if (now !== last) {
        last = now;
        since = Date.now();
        return undefined;
      }
      return complete && Date.now() - since >= 2000 ? sets : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: `${name}: rollout complete with ${replicaSetCount} ReplicaSet(s)` },
  );
}

/** The ReplicaSet the Deployment runs on: the one with replicas. */
const running = (sets: ReplicaSetView[]): string[] => sets.filter((s) => s.replicas > 0).map((s) => s.name);

let seq = 0;
/** vault-rollout's own path: an audit line for a KV v2 write, planned and executed against alpha. */
/** The routing table `apply` and `serve` read: one route to this Deployment, with the restricted identity. */
const routesYaml = (name: string): string => `clusters:
${clusters.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2 } }
routes:
  - name: ${name}
    match: { path: "secret/gitops/${name}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: ${name} }]
`;

/**
 * vault-rollout restarts the Deployment as users run it: `apply` on a KV write (the Flux cases), or `serve` taking the
 * audit entry at its intake (the Argo CD cases); both end in the same PATCH, with the field manager vault-rollout.
 */
async function vaultRolloutRestart(name: string, via: 'apply' | 'serve'): Promise<void> {
  seq++;
  const line = kvWriteAudit(`req-gitops-${seq}`, `secret/gitops/${name}`, 1);
  if (via === 'apply') {
    const io = memoryIo({ 'routes.yaml': routesYaml(name), '-': line });
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io), io.out + io.err).toBe(0);
    return;
  }
  const dir = mkdtempSync(join(work, 'serve-'));
  writeFileSync(join(dir, 'routes.yaml'), routesYaml(name));
  const serve = await spawnServe({
    routesFile: join(dir, 'routes.yaml'),
    queueFile: join(dir, 'queue.sqlite'),
    env: serveEnv(dir, join(dir, 'state.sqlite')),
  });
  try {
    const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
      method: 'POST',
      body: line,
      headers: { authorization: `Bearer ${BEARER_TOKEN}` },
    });
    expect(res.status).toBe(202);
    await waitFor(async () => (await deployment(name)).spec.template.metadata.annotations?.[VERSIONS] !== undefined, {
      timeoutMs: 30_000,
      what: `serve's restart of ${name}`,
    });
  } finally {
    serve.child.kill('SIGTERM');
  }
}

/** What a user types: kubectl's own restart (field manager kubectl-rollout). */
async function kubectlRestart(name: string): Promise<void> {
  await run(join(REPO_ROOT, '.local', 'bin', 'kubectl'), [
    '--kubeconfig',
    kubeconfig(),
    '-n',
    NS,
    'rollout',
    'restart',
    `deployment/${name}`,
  ]);
}

const managers = (d: Deployment) =>
  (d.metadata.managedFields ?? []).filter((m) => !m.subresource).map((m) => `${m.manager} ${m.operation}`);

interface Observed {
  initial: ReplicaSetView[];
  restarted: ReplicaSetView[];
  restartedAnnotations: Record<string, string>;
  restartedGeneration: number;
  reapply: HelperResult;
  diff?: HelperResult;
  after: ReplicaSetView[];
  afterDeployment: Deployment;
}

/** Apply with the tool, restart, apply again (the next sync), diff for Argo CD; what was seen at each step. */
async function scenario(
  tool: 'flux' | 'argo',
  restarter: 'vault-rollout' | 'kubectl',
  name: string,
): Promise<Observed> {
  const file = manifest(name);
  const applyMode: Mode = tool === 'flux' ? 'flux-apply' : 'argo-apply';
  const first = await gitops(applyMode, file);
  expect(JSON.stringify(first)).toMatch(/created/);
  const initial = await settled(name, 1);

  if (restarter === 'vault-rollout') await vaultRolloutRestart(name, tool === 'flux' ? 'apply' : 'serve');
  else {
    await kubectlRestart(name);
  }
  const restarted = await settled(name, 2);
  const restartedDeployment = await deployment(name);

  const reapply = await gitops(applyMode, file);
  const diff = tool === 'argo' ? await gitops('argo-diff', file) : undefined;
  // The controller's answer to whatever the re-apply changed, or two quiet seconds when it changed nothing.
  const after = await settled(name, 2);
  const observed: Observed = {
    initial,
    restarted,
    restartedAnnotations: restartedDeployment.spec.template.metadata.annotations ?? {},
    restartedGeneration: restartedDeployment.metadata.generation,
    reapply,
    ...(diff ? { diff } : {}),
    after,
    afterDeployment: await deployment(name),
  };
  // The figures the report quotes: ReplicaSets before and after the re-apply.
  process.stderr.write(
    `[gitops] ${tool} x ${restarter}: initial ${JSON.stringify(initial)}\n` +
      `[gitops]   restarted ${JSON.stringify(restarted)} managers ${JSON.stringify(managers(restartedDeployment))}\n` +
      `[gitops]   re-apply ${JSON.stringify(reapply.changes ?? reapply.applied)}${diff ? ` synced ${String(diff.synced)}` : ''}\n` +
      `[gitops]   after ${JSON.stringify(after)} managers ${JSON.stringify(managers(observed.afterDeployment))}\n`,
  );
  return observed;
}

/** The restart holds: annotations kept, no new generation, the same ReplicaSets with the same one running. */
function expectRestartKept(o: Observed, restartAnnotations: string[]): void {
  expect(o.restarted).toHaveLength(2);
  expect(running(o.restarted)).not.toEqual(running(o.initial));
  const after = o.afterDeployment.spec.template.metadata.annotations ?? {};
  for (const key of restartAnnotations) {
    expect(o.restartedAnnotations[key]).toBeDefined();
    expect(after[key]).toBe(o.restartedAnnotations[key]);
  }
  expect(o.afterDeployment.metadata.generation).toBe(o.restartedGeneration);
  expect(o.after.map((s) => [s.name, s.hash])).toEqual(o.restarted.map((s) => [s.name, s.hash]));
  expect(running(o.after)).toEqual(running(o.restarted));
}

describe('Flux (kustomize-controller server-side apply)', () => {
  it(
    'keeps a vault-rollout restart: the next sync changes nothing, no second rollout',
    async () => {
      const o = await scenario('flux', 'vault-rollout', 'flux-vr');
      const restartedBy = managers(o.afterDeployment);
      // vault-rollout's PATCH is an Update of its own: neither the applier's fields nor a manager the clean-up names.
      expect(restartedBy).toContain('vault-rollout Update');
      expect(restartedBy).toContain('kustomize-controller Apply');
      expect(o.reapply.changes).toEqual([{ subject: `Deployment/${NS}/flux-vr`, action: 'unchanged' }]);
      expectRestartKept(o, [RESTARTED_AT, VERSIONS]);
    },
    SLOW.timeout,
  );

  it(
    'strips a `kubectl rollout restart` and rolls back to the first ReplicaSet: the contrast',
    async () => {
      const o = await scenario('flux', 'kubectl', 'flux-kubectl');
      expect(o.restartedAnnotations[RESTARTED_AT]).toBeDefined();
      expect(o.reapply.changes).toEqual([{ subject: `Deployment/${NS}/flux-kubectl`, action: 'configured' }]);
      // The clean-up folded kubectl-rollout's fields into kustomize-controller's apply, which then dropped them.
      expect(managers(o.afterDeployment)).not.toContain('kubectl-rollout Update');
      expect(o.afterDeployment.spec.template.metadata.annotations?.[RESTARTED_AT]).toBeUndefined();
      expect(o.afterDeployment.metadata.generation).toBe(o.restartedGeneration + 1);
      // A second rollout: the pod template is the first one again, so its ReplicaSet is scaled back up and the
      // restart's scaled down; no third ReplicaSet, but every pod replaced once more.
      expect(o.after.map((s) => s.name)).toEqual(o.restarted.map((s) => s.name));
      expect(running(o.after)).toEqual(running(o.initial));
      expect(running(o.after)).not.toEqual(running(o.restarted));
    },
    SLOW.timeout,
  );
});

describe('Argo CD (gitops-engine client-side apply and diff)', () => {
  it(
    'keeps a vault-rollout restart: Synced, no drift, no second rollout',
    async () => {
      const o = await scenario('argo', 'vault-rollout', 'argo-vr');
      expect(managers(o.afterDeployment)).toContain('vault-rollout Update');
      expect(o.reapply.applied).toEqual([
        { subject: `Deployment/${NS}/argo-vr`, output: 'deployment.apps/argo-vr unchanged' },
      ]);
      expect(o.diff?.synced).toBe(true);
      expect(o.diff?.diffs?.map((d) => d.modified)).toEqual([false]);
      expectRestartKept(o, [RESTARTED_AT, VERSIONS]);
    },
    SLOW.timeout,
  );

  it(
    'keeps a `kubectl rollout restart` too',
    async () => {
      const o = await scenario('argo', 'kubectl', 'argo-kubectl');
      expect(o.diff?.synced).toBe(true);
      expectRestartKept(o, [RESTARTED_AT]);
    },
    SLOW.timeout,
  );

  it(
    'reports real drift: the diff is not blind (an image changed outside Git is OutOfSync)',
    async () => {
      const res = await admin('alpha').request(
        'PATCH',
        `/apis/apps/v1/namespaces/${NS}/deployments/argo-vr?fieldManager=drift-test`,
        {
          body: { spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:2' }] } } } },
          contentType: 'application/strategic-merge-patch+json',
        },
      );
      expect(res.status).toBe(200);
      const diff = await gitops('argo-diff', join(work, 'argo-vr.yaml'));
      expect(diff.synced).toBe(false);
      expect(diff.diffs?.map((d) => d.modified)).toEqual([true]);
    },
    SLOW.timeout,
  );
});
