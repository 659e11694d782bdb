// Proves that the local test clusters (test/clusters/clusters.ts, started by
// test/global-setup-clusters.ts) are real, separate Kubernetes control planes:
// verified TLS, client-certificate and token authentication, RBAC with the
// project's least-privilege ClusterRole, patches and dry-run, a controller
// manager that rolls Deployments, and the Argo Rollouts CRD.
// Talks to the API servers with node:https only.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  REPO_ROOT,
  client,
  clusterClient,
  kubeRequest,
  loadClusters,
  waitFor,
  type ClusterInfo,
  type KubeClient,
  type KubeResponse,
} from '../clusters/kube-http.ts';

const { clusters, kubernetesVersion } = loadClusters();
const NS = `vr-it-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
const SLOW = { timeout: 120_000 };

interface ObjectMeta {
  name: string;
  uid?: string;
  generation?: number;
  annotations?: Record<string, string>;
  ownerReferences?: { kind: string; name: string; uid: string }[];
}
interface KubeObject {
  metadata: ObjectMeta;
}
interface ReplicaSet extends KubeObject {
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
}
interface List<T> {
  items: T[];
}
interface Status {
  kind: 'Status';
  reason?: string;
  code?: number;
}

function expectStatus(res: KubeResponse, ...codes: number[]): void {
  expect(codes, `HTTP ${res.status}: ${res.text.slice(0, 500)}`).toContain(res.status);
}

async function createIn(kube: KubeClient, path: string, body: unknown): Promise<void> {
  expectStatus(await kube.request('POST', path, { body }), 201);
}

async function selfSubjectReview(kube: KubeClient): Promise<{ username: string; groups: string[] }> {
  const res = await kube.request<{ status: { userInfo: { username: string; groups?: string[] } } }>(
    'POST',
    '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
  );
  expectStatus(res, 201);
  return { username: res.body.status.userInfo.username, groups: res.body.status.userInfo.groups ?? [] };
}

interface ResourceAttributes {
  group?: string;
  resource: string;
  subresource?: string;
  verb: string;
  namespace?: string;
  name?: string;
}

async function canI(kube: KubeClient, attrs: ResourceAttributes): Promise<boolean> {
  const res = await kube.request<{ status: { allowed: boolean } }>(
    'POST',
    '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    {
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: { resourceAttributes: attrs },
      },
    },
  );
  expectStatus(res, 201);
  return res.body.status.allowed;
}

async function waitForDefaultServiceAccount(admin: KubeClient): Promise<void> {
  await waitFor(
    async () => (await admin.request('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`)).status === 200,
    { timeoutMs: 60_000, what: `ServiceAccount ${NS}/default` },
  );
}

async function requestToken(admin: KubeClient, namespace: string, serviceAccount: string): Promise<string> {
  const res = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
    { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } } },
  );
  expectStatus(res, 201);
  const token = res.body.status.token;
  expect(typeof token).toBe('string');
  return token;
}

function tlsErrorCode(err: unknown): string {
  return String((err as { code?: unknown } | null)?.code ?? (err instanceof Error ? err.message : err));
}

// Workload bodies: kwok plays the kubelet (test/clusters/kwok-stages.yaml), so
// the image is never pulled; nodes.test.ts covers what happens to the pods.
const podTemplate = (app: string) => ({
  metadata: { labels: { app } },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/vault-rollout/demo:1' }] },
});
const deployment = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: podTemplate(name) },
});

beforeAll(async () => {
  await Promise.all(
    clusters.map(async (c) => {
      await createIn(clusterClient(c, 'admin'), '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: NS },
      });
    }),
  );
}, 60_000);

afterAll(async () => {
  await Promise.all(
    clusters.map((c) =>
      clusterClient(c, 'admin')
        .request('DELETE', `/api/v1/namespaces/${NS}`)
        .catch(() => undefined),
    ),
  );
});

describe('local test clusters', () => {
  it('are three (alpha, beta, gamma)', () => {
    expect(clusters.map((c) => c.name)).toEqual(['alpha', 'beta', 'gamma']);
  });
});

clusters.forEach((c: ClusterInfo, i: number) => {
  const other = clusters[(i + 1) % clusters.length];
  if (other === undefined) throw new Error('need at least two clusters');

  describe(`cluster ${c.name}`, () => {
    const admin = clusterClient(c, 'admin');
    const vr = clusterClient(c, 'vault-rollout');
    const anonymous = clusterClient(c, 'anonymous');

    it('serves /readyz and /version over TLS verified with its own CA', async () => {
      const ready = await anonymous.request('GET', '/readyz');
      expectStatus(ready, 200);
      expect(ready.text).toBe('ok');
      const version = await anonymous.request<{ gitVersion: string; major: string; minor: string }>('GET', '/version');
      expectStatus(version, 200);
      expect(version.body.gitVersion).toBe(kubernetesVersion);
      // The serving certificate also names localhost.
      const byName = await kubeRequest(
        c.server.replace('127.0.0.1', 'localhost'),
        { ca: readFileSync(c.caFile) },
        'GET',
        '/readyz',
      );
      expectStatus(byName, 200);
    });

    it(`fails the TLS handshake when only ${other.name}'s CA is trusted`, async () => {
      const err: unknown = await kubeRequest(c.server, { ca: readFileSync(other.caFile) }, 'GET', '/readyz').then(
        () => new Error('request succeeded'),
        (e: unknown) => e,
      );
      expect(tlsErrorCode(err)).toMatch(
        /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN|CERT_SIGNATURE_FAILURE)$/,
      );
    });

    it(`rejects a client certificate issued by ${other.name}'s CA`, async () => {
      const foreign = {
        ca: readFileSync(c.caFile),
        cert: readFileSync(other.admin.certFile),
        key: readFileSync(other.admin.keyFile),
      };
      const res = await kubeRequest(c.server, foreign, 'GET', '/api/v1/namespaces');
      expectStatus(res, 401);
    });

    it('authenticates the admin and vault-rollout client certificates', async () => {
      const a = await selfSubjectReview(admin);
      expect(a.username).toBe('admin');
      expect(a.groups).toContain('system:masters');
      const v = await selfSubjectReview(vr);
      expect(v.username).toBe('vault-rollout');
      expect(v.groups).toContain('system:authenticated');
      expect(v.groups).not.toContain('system:masters');
    });

    it('grants vault-rollout exactly the ClusterRole in infra/rbac (SelfSubjectAccessReview)', async () => {
      const allowed: ResourceAttributes[] = [
        { group: 'apps', resource: 'deployments', verb: 'patch', namespace: NS },
        { group: 'apps', resource: 'deployments', verb: 'get', namespace: NS },
        { group: 'apps', resource: 'deployments', verb: 'list' },
        { group: 'apps', resource: 'deployments', verb: 'watch', namespace: NS },
        { group: 'apps', resource: 'statefulsets', verb: 'watch', namespace: NS },
        { group: 'batch', resource: 'cronjobs', verb: 'watch', namespace: NS },
        { group: 'apps', resource: 'statefulsets', verb: 'patch', namespace: NS },
        { group: 'apps', resource: 'daemonsets', verb: 'patch', namespace: NS },
        { group: 'batch', resource: 'cronjobs', verb: 'patch', namespace: NS },
        { group: 'argoproj.io', resource: 'rollouts', verb: 'patch', namespace: NS },
        { group: '', resource: 'events', verb: 'create', namespace: NS },
      ];
      const denied: ResourceAttributes[] = [
        { group: '', resource: 'secrets', verb: 'get', namespace: NS },
        { group: '', resource: 'secrets', verb: 'list', namespace: NS },
        { group: '', resource: 'pods', verb: 'delete', namespace: NS },
        { group: '', resource: 'pods', verb: 'get', namespace: NS },
        { group: '', resource: 'configmaps', verb: 'get', namespace: NS },
        { group: 'apps', resource: 'deployments', verb: 'create', namespace: NS },
        { group: 'apps', resource: 'deployments', verb: 'update', namespace: NS },
        { group: 'apps', resource: 'deployments', verb: 'delete', namespace: NS },
        { group: 'apps', resource: 'deployments', subresource: 'scale', verb: 'patch', namespace: NS },
        { group: 'apps', resource: 'replicasets', verb: 'get', namespace: NS },
        { group: 'batch', resource: 'jobs', verb: 'create', namespace: NS },
        { group: '', resource: 'events', verb: 'delete', namespace: NS },
        // Only core/v1 Events are ever created, never updated: no patch, nothing in events.k8s.io.
        { group: '', resource: 'events', verb: 'patch', namespace: NS },
        { group: 'events.k8s.io', resource: 'events', verb: 'create', namespace: NS },
        { group: 'events.k8s.io', resource: 'events', verb: 'patch', namespace: NS },
        { group: 'rbac.authorization.k8s.io', resource: 'clusterroles', verb: 'escalate' },
      ];
      for (const attrs of allowed) expect(await canI(vr, attrs), JSON.stringify(attrs)).toBe(true);
      for (const attrs of denied) expect(await canI(vr, attrs), JSON.stringify(attrs)).toBe(false);
      // The same question as the admin, for contrast.
      expect(await canI(admin, { group: '', resource: 'secrets', verb: 'get', namespace: NS })).toBe(true);
    });

    it('answers 403 when vault-rollout reads a Secret or deletes a Pod', SLOW, async () => {
      await createIn(admin, `/api/v1/namespaces/${NS}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'demo' },
        stringData: { password: 'not-a-real-secret' },
      });
      await waitForDefaultServiceAccount(admin); // the ServiceAccount admission plugin needs it for pods
      await createIn(admin, `/api/v1/namespaces/${NS}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        ...podTemplate('lonely'),
        metadata: { name: 'demo' },
      });

      const getSecret = await vr.request<Status>('GET', `/api/v1/namespaces/${NS}/secrets/demo`);
      expectStatus(getSecret, 403);
      expect(getSecret.body.reason).toBe('Forbidden');
      const listSecrets = await vr.request<Status>('GET', `/api/v1/namespaces/${NS}/secrets`);
      expectStatus(listSecrets, 403);
      const deletePod = await vr.request<Status>('DELETE', `/api/v1/namespaces/${NS}/pods/demo`);
      expectStatus(deletePod, 403);
      expect(deletePod.body.reason).toBe('Forbidden');

      expectStatus(await admin.request('GET', `/api/v1/namespaces/${NS}/secrets/demo`), 200);
      expectStatus(await admin.request('GET', `/api/v1/namespaces/${NS}/pods/demo`), 200);
    });

    it('rolls a Deployment when vault-rollout patches its pod template (dry-run first)', SLOW, async () => {
      const name = 'web';
      const path = `/apis/apps/v1/namespaces/${NS}/deployments/${name}`;
      const rsPath = `/apis/apps/v1/namespaces/${NS}/replicasets?labelSelector=${encodeURIComponent(`app=${name}`)}`;
      await createIn(admin, `/apis/apps/v1/namespaces/${NS}/deployments`, deployment(name));
      const replicaSets = async () => (await admin.request<List<ReplicaSet>>('GET', rsPath)).body.items;

      const first = await waitFor(
        async () => {
          const items = await replicaSets();
          return items.length === 1 ? items[0] : undefined;
        },
        { timeoutMs: 60_000, what: `the first ReplicaSet of ${name}` },
      );
      const created = await vr.request<KubeObject>('GET', path);
      expectStatus(created, 200);
      expect(first?.metadata.ownerReferences?.[0]?.uid).toBe(created.body.metadata.uid);

      const restartedAt = new Date().toISOString();
      const patch = {
        spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } } } },
      };
      const strategic = 'application/strategic-merge-patch+json';

      // Server-side dry-run: validated and answered, not persisted.
      const dry = await vr.request<ReplicaSet>('PATCH', `${path}?dryRun=All`, { body: patch, contentType: strategic });
      expectStatus(dry, 200);
      expect(dry.body.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']).toBe(restartedAt);
      const afterDry = await vr.request<ReplicaSet>('GET', path);
      expect(afterDry.body.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']).toBeUndefined();
      expect(afterDry.body.metadata.generation).toBe(created.body.metadata.generation);

      const real = await vr.request<ReplicaSet>('PATCH', path, { body: patch, contentType: strategic });
      expectStatus(real, 200);
      expect(real.body.metadata.generation).toBe((created.body.metadata.generation ?? 0) + 1);

      const rolled = await waitFor(
        async () => {
          const items = await replicaSets();
          return items.length === 2 ? items : undefined;
        },
        { timeoutMs: 60_000, what: `a second ReplicaSet of ${name}` },
      );
      const fresh = rolled.find((rs) => rs.metadata.uid !== first?.metadata.uid);
      expect(fresh?.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']).toBe(restartedAt);
      expect(fresh?.metadata.ownerReferences?.[0]?.name).toBe(name);

      // vault-rollout cannot replace the object (no `update`), only patch it.
      const put = await vr.request<Status>('PUT', path, { body: real.body });
      expectStatus(put, 403);
    });

    it('issues ServiceAccount tokens (TokenRequest) that authenticate', SLOW, async () => {
      await waitForDefaultServiceAccount(admin);
      const token = await requestToken(admin, NS, 'default');
      const bearer = { ca: readFileSync(c.caFile), token };
      const review = await kubeRequest<{ status: { userInfo: { username: string } } }>(
        c.server,
        bearer,
        'POST',
        '/apis/authentication.k8s.io/v1/selfsubjectreviews',
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
      );
      expectStatus(review, 201);
      expect(review.body.status.userInfo.username).toBe(`system:serviceaccount:${NS}:default`);
      // A token signed by another cluster's key is not accepted here.
      await waitFor(
        async () =>
          (await clusterClient(other, 'admin').request('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`))
            .status === 200,
        { timeoutMs: 60_000, what: `ServiceAccount ${NS}/default in ${other.name}` },
      );
      const foreignToken = await requestToken(clusterClient(other, 'admin'), NS, 'default');
      const foreign = await kubeRequest(
        c.server,
        { ca: readFileSync(c.caFile), token: foreignToken },
        'GET',
        '/api/v1/namespaces',
      );
      expectStatus(foreign, 401);

      // The shipped ClusterRoleBinding's subject, ServiceAccount vault-rollout/vault-rollout,
      // gets the same least privilege as the client-certificate user.
      const saToken = await requestToken(admin, 'vault-rollout', 'vault-rollout');
      const sa = client(c.server, { ca: readFileSync(c.caFile), token: saToken });
      expect(await canI(sa, { group: 'apps', resource: 'deployments', verb: 'patch', namespace: NS })).toBe(true);
      expect(await canI(sa, { group: '', resource: 'secrets', verb: 'get', namespace: NS })).toBe(false);
    });

    it('serves the Argo Rollout CRD; vault-rollout merge-patches spec.restartAt', SLOW, async () => {
      const crd = await admin.request<{
        spec: { group: string; scope: string };
        status: { conditions: { type: string; status: string }[] };
      }>('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rollouts.argoproj.io');
      expectStatus(crd, 200);
      expect(crd.body.spec.group).toBe('argoproj.io');
      expect(crd.body.spec.scope).toBe('Namespaced');
      expect(crd.body.status.conditions).toContainEqual(
        expect.objectContaining({ type: 'Established', status: 'True' }),
      );

      const base = `/apis/argoproj.io/v1alpha1/namespaces/${NS}/rollouts`;
      await createIn(admin, base, {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Rollout',
        metadata: { name: 'canary' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'canary' } },
          template: podTemplate('canary'),
          strategy: { canary: { steps: [{ setWeight: 20 }] } },
        },
      });
      const restartAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const merged = await vr.request<{ spec: { restartAt?: string; strategy?: unknown } }>('PATCH', `${base}/canary`, {
        body: { spec: { restartAt } },
        contentType: 'application/merge-patch+json',
      });
      expectStatus(merged, 200);
      expect(merged.body.spec.restartAt).toBe(restartAt);
      expect(merged.body.spec.strategy).toEqual({ canary: { steps: [{ setWeight: 20 }] } }); // unknown fields kept

      // Custom resources do not take strategic-merge patches, and restartAt must be a date-time.
      const smp = await vr.request('PATCH', `${base}/canary`, {
        body: { spec: { restartAt } },
        contentType: 'application/strategic-merge-patch+json',
      });
      expectStatus(smp, 415);
      const bad = await vr.request<Status>('PATCH', `${base}/canary`, {
        body: { spec: { restartAt: 'tomorrow' } },
        contentType: 'application/merge-patch+json',
      });
      expectStatus(bad, 422);
      // RBAC would let it pause the Rollout; the admission policy (test/clusters/admission-policy.yaml) does not.
      const paused = await vr.request<Status>('PATCH', `${base}/canary`, {
        body: { spec: { paused: true } },
        contentType: 'application/merge-patch+json',
      });
      expectStatus(paused, 403);
      expect(paused.text).toContain("ValidatingAdmissionPolicy 'vault-rollout'");
    });
  });
});

describe('infra/rbac', () => {
  it('role-namespaced.yaml holds the same rules as the ClusterRole and applies (server-side dry-run)', async () => {
    const [c] = clusters;
    if (c === undefined) throw new Error('no clusters');
    const out = execFileSync(
      join(REPO_ROOT, '.local', 'bin', 'kubectl'),
      [
        `--kubeconfig=${c.adminKubeconfig}`,
        'apply',
        '--dry-run=server',
        `--namespace=${NS}`,
        '--output=json',
        `--filename=${join(REPO_ROOT, 'infra', 'rbac', 'role-namespaced.yaml')}`,
      ],
      { encoding: 'utf8' },
    );
    const applied = JSON.parse(out) as List<{ kind: string; metadata: { namespace?: string }; rules?: unknown[] }>;
    expect(applied.items.map((o) => o.kind)).toEqual(['Role', 'RoleBinding']);
    expect(applied.items.every((o) => o.metadata.namespace === NS)).toBe(true);
    const clusterRole = await clusterClient(c, 'admin').request<{ rules: unknown[] }>(
      'GET',
      '/apis/rbac.authorization.k8s.io/v1/clusterroles/vault-rollout',
    );
    expectStatus(clusterRole, 200);
    // Except the read of the cluster-scoped admission policy (doctor's check), which a Role cannot grant.
    const namespaced = clusterRole.body.rules.filter(
      (r) => !(r as { apiGroups: string[] }).apiGroups.includes('admissionregistration.k8s.io'),
    );
    expect(namespaced).toHaveLength(clusterRole.body.rules.length - 1);
    expect(applied.items[0]?.rules).toEqual(namespaced);
  });
});

describe('the clusters are separate', () => {
  it('an object created in one cluster is not visible in the others', async () => {
    const [first, ...rest] = clusters;
    if (first === undefined) throw new Error('no clusters');
    const name = `marker-${first.name}`;
    await createIn(clusterClient(first, 'admin'), `/api/v1/namespaces/${NS}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name },
      data: { cluster: first.name },
    });
    expectStatus(
      await clusterClient(first, 'admin').request('GET', `/api/v1/namespaces/${NS}/configmaps/${name}`),
      200,
    );
    for (const c of rest) {
      expectStatus(await clusterClient(c, 'admin').request('GET', `/api/v1/namespaces/${NS}/configmaps/${name}`), 404);
    }
  });

  it('each has its own identity: kube-system UIDs, servers and CAs differ', async () => {
    const uids = await Promise.all(
      clusters.map(
        async (c) =>
          (await clusterClient(c, 'admin').request<KubeObject>('GET', '/api/v1/namespaces/kube-system')).body.metadata
            .uid,
      ),
    );
    expect(new Set(uids).size).toBe(clusters.length);
    expect(new Set(clusters.map((c) => c.server)).size).toBe(clusters.length);
    expect(new Set(clusters.map((c) => readFileSync(c.caFile, 'utf8'))).size).toBe(clusters.length);
  });
});
