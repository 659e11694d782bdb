// The Helm chart deploy/helm/vault-rollout, with helm v3 built from its Go module (test/clusters/build-helm.sh):
// `helm lint` and `helm template` over several values sets, the rendered objects applied to the real alpha cluster
// (the StatefulSet's pod scheduled on a kwok node and Ready, selected by the Service), and end to end: the applied
// pod, materialised and run from the container image (test/integration/pod-runner.ts), takes a bearer-authenticated audit entry and restarts
// a Deployment in alpha (inCluster: true, the chart's ServiceAccount and ClusterRole) and one in beta (the kubeconfig
// Secret the chart mounts); and `kubectl exec POD -- vault-rollout …` (doctor, status, halts, halts clear) in that pod,
// from the image's PATH with no shell. What a user meets at install (refusals, schema, notes): helm-chart-install.test.ts.
import { randomBytes } from 'node:crypto';
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { waitFor } from '../clusters/kube-http.ts';
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
import { imageLayout, readImage, unpackImage } from '../image/image.ts';
import { ROUTES_FILE, RUNTIME_GID, RUNTIME_UID, SERVE_PORT } from '../../deploy/image/config.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { imageRunner, materialisePod, removeRoot, type PodView } from './pod-runner.ts';
import {
  admissionPolicyFor,
  CHART,
  helm,
  IN_CLUSTER_ROUTES,
  MINIMAL,
  render,
  valuesFile,
  type K8sObject,
  type Values,
} from './helm-chart-support.ts';

const KUBECTL = join(repoRootDir, '.local/bin/kubectl');

/**
 * Records a halt in a rotation store file, as a wave's failed gate in the pod's serve would have (lib/rotations),
 * the files the pod's user's as serve would have left them; returns the rotation key.
 */
async function seedHalt(file: string, namespace: string): Promise<string> {
  mkdirSync(dirname(file), { recursive: true });
  const store = new SqliteRotationStore(file);
  const rotation = 'c0ffee0123456789';
  await store.halt({
    rotation,
    route: 'chart-e2e',
    changes: [`secret/${namespace}/db@4`],
    secrets: [`secret/${namespace}/db version 4`],
    wave: 1,
    waves: 2,
    failing: { cluster: 'alpha', namespace, kind: 'Deployment', name: 'app', state: 'FAILED' },
    why: 'did not roll out within 1m',
    notRestarted: ['beta'],
    haltedAt: new Date().toISOString(),
  });
  store.close();
  for (const path of [dirname(file), ...readdirSync(dirname(file)).map((name) => join(dirname(file), name))])
    chownSync(path, RUNTIME_UID, RUNTIME_GID);
  return rotation;
}

// What the assertions read of the rendered objects.
interface ContainerView {
  image: string;
  args: string[];
  env: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  securityContext: unknown;
  livenessProbe: { httpGet: unknown };
  readinessProbe: { httpGet: unknown };
  resources: { requests?: unknown; limits?: { memory?: string } };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface StatefulSetView {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    volumeClaimTemplates: unknown[];
    template: {
      spec: {
        securityContext: unknown;
        automountServiceAccountToken: boolean;
        serviceAccountName: string;
        containers: ContainerView[];
        volumes: Array<{ name: string; projected?: { sources: Array<{ serviceAccountToken?: { path: string } }> } }>;
      };
    };
  };
}
interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
interface Views {
  StatefulSet: StatefulSetView;
  ConfigMap: { data: Record<string, string> };
  Service: { spec: { selector: Record<string, string>; ports: unknown[] } };
  ServiceAccount: { automountServiceAccountToken: boolean };
  NetworkPolicy: {
    spec: {
      policyTypes: string[];
      ingress: unknown[];
      egress: unknown[];
      podSelector: { matchLabels: Record<string, string> };
    };
  };
  ClusterRole: { rules: Rule[] };
  ClusterRoleBinding: { subjects: unknown[] };
  ServiceMonitor: { spec: { selector: { matchLabels: Record<string, string> } } };
}

function one<K extends keyof Views>(objects: K8sObject[], kind: K): K8sObject & Views[K] {
  const found = objects.filter((o) => o.kind === kind);
  expect(found.map((o) => o.kind)).toEqual([kind]);
  return found[0] as unknown as K8sObject & Views[K];
}

function fullValues(): Values {
  return {
    routes: IN_CLUSTER_ROUTES.replace(
      '  home: { inCluster: true }',
      '  home: { inCluster: true }\n  prod-eu: { kubeconfig: { file: /etc/vault-rollout/kubeconfigs/prod-eu/kubeconfig } }',
    ),
    image: { repository: 'registry.example/vault-rollout', digest: `sha256:${'a'.repeat(64)}` },
    webhook: { existingSecret: 'vr-webhook', hmacSecretKey: 'hmac', bearerTokenKey: 'token' },
    kubeconfigSecrets: [{ name: 'prod-eu', secretName: 'kubeconfig-prod-eu', key: 'config' }],
    admissionPolicy: {
      manifest: admissionPolicyFor(IN_CLUSTER_ROUTES, 'system:serviceaccount:vault-rollout:vr-vault-rollout'),
    },
    rbac: {
      syncOperators: true,
      extraRules: [{ apiGroups: ['example.com'], resources: ['harbors'], verbs: ['get', 'list', 'watch', 'patch'] }],
    },
    statusPage: { enabled: true, refreshSeconds: 60 },
    networkPolicy: {
      enabled: true,
      ingressFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'vault' } } }],
      egress: {
        apiServers: [
          { cidr: '10.0.0.1/32', port: 443 },
          { cidr: '203.0.113.0/24', port: 6443 },
        ],
      },
    },
    serviceMonitor: { enabled: true, labels: { release: 'prometheus' } },
    grafanaDashboard: { enabled: true, annotations: { grafana_folder: 'vault-rollout' } },
  };
}

describe('helm chart deploy/helm/vault-rollout: lint and template', () => {
  it('helm lint passes with the minimal and the full values', async () => {
    for (const values of [MINIMAL, fullValues()]) {
      const out = await helm([
        'lint',
        CHART,
        '--strict',
        '--namespace',
        'vault-rollout',
        '--values',
        valuesFile(values),
      ]);
      expect(out).toContain('0 chart(s) failed');
    }
  });

  it('the minimal values render serve as one StatefulSet replica, hardened, probed, with its queue on a PVC', async () => {
    const objects = await render(MINIMAL);
    // No NetworkPolicy unless asked for (as Reloader's and ESO's charts): one that lets out nothing but DNS breaks serve.
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'Service',
      'ServiceAccount',
      'StatefulSet',
    ]);
    for (const o of objects) if (!o.kind.startsWith('Cluster')) expect(o.metadata.namespace).toBe('vault-rollout');
    const sts = one(objects, 'StatefulSet');
    expect(sts.spec.replicas).toBe(1);
    const pod = sts.spec.template.spec;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.serviceAccountName).toBe('vr-vault-rollout');
    const c = pod.containers[0]!;
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      privileged: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.image).toBe('registry.example/vault-rollout:0.1.0');
    // The image's port and routing table path (deploy/image/config.ts): one of each, whichever starts serve.
    expect(c.args.slice(0, 9)).toEqual([
      'serve',
      '--routes',
      ROUTES_FILE,
      '--host',
      '0.0.0.0',
      '--port',
      String(SERVE_PORT),
      '--queue-file',
      '/var/lib/vault-rollout/queue.sqlite',
    ]);
    expect(c.args).not.toContain('--status-page');
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.resources.requests).toBeDefined();
    expect(c.resources.limits?.memory).toBeDefined();
    expect(c.env).toContainEqual({
      name: 'VAULT_ROLLOUT_WEBHOOK_TOKEN',
      valueFrom: { secretKeyRef: { name: 'vr-webhook', key: 'token' } },
    });
    expect(c.env.map((e) => e.name)).not.toContain('VAULT_ROLLOUT_WEBHOOK_SECRET');
    expect(c.volumeMounts.map((m) => m.mountPath)).toEqual(
      expect.arrayContaining([
        '/var/lib/vault-rollout',
        '/etc/vault-rollout/routes',
        '/var/run/secrets/kubernetes.io/serviceaccount',
        '/tmp',
      ]),
    );
    const sa = pod.volumes.find((v) => v.name === 'kube-api-access');
    expect(sa?.projected?.sources[0]?.serviceAccountToken?.path).toBe('token');
    // Vault's Kubernetes login reads a token of Vault's own audience, never the API token that can patch.
    const vaultToken = pod.volumes.find((v) => v.name === 'vault-token');
    expect(vaultToken?.projected?.sources).toEqual([
      { serviceAccountToken: { path: 'token', audience: 'vault', expirationSeconds: 3607 } },
    ]);
    expect(c.volumeMounts).toContainEqual({
      name: 'vault-token',
      mountPath: '/var/run/secrets/vault-rollout/vault',
      readOnly: true,
    });
    expect(sts.spec.volumeClaimTemplates).toHaveLength(1);
    expect(sts.spec.volumeClaimTemplates[0]).toMatchObject({
      metadata: { name: 'data' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    });
    expect(one(objects, 'ConfigMap').data['routes.yaml']).toBe(IN_CLUSTER_ROUTES);
    const svc = one(objects, 'Service');
    expect(svc.spec.selector).toEqual(sts.spec.selector.matchLabels);
    expect(svc.spec.ports).toEqual([{ name: 'http', port: SERVE_PORT, targetPort: 'http', protocol: 'TCP' }]);
    expect(one(objects, 'ServiceAccount').automountServiceAccountToken).toBe(false);
  });

  it('RBAC is infra/rbac/clusterrole.yaml without `list pods`: no wildcard, no Secrets, no Pods', async () => {
    const shipped = parseAllDocuments(readFileSync(join(repoRootDir, 'infra/rbac/clusterrole.yaml'), 'utf8'))
      .map((d) => d.toJS() as K8sObject & { rules?: Rule[] })
      .find((o) => o.kind === 'ClusterRole');
    const withoutPods = (shipped?.rules ?? []).filter((r) => !r.resources.includes('pods'));
    expect(withoutPods.length).toBeGreaterThan(3);
    for (const values of [MINIMAL, fullValues()]) {
      const objects = await render(values);
      const role = one(objects, 'ClusterRole');
      expect(role.rules.slice(0, withoutPods.length)).toEqual(withoutPods);
      for (const rule of role.rules) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames ?? []])
          expect(list.join(',')).not.toContain('*');
        expect(rule.resources).not.toContain('secrets');
        expect(rule.resources).not.toContain('pods');
      }
      const binding = one(objects, 'ClusterRoleBinding');
      expect(binding.subjects).toEqual([
        { kind: 'ServiceAccount', name: 'vr-vault-rollout', namespace: 'vault-rollout' },
      ]);
    }
  });

  it('the full values: digest image, Secret refs (never values), kubeconfig Secrets as files, the generated admission policy, NetworkPolicy sources, ServiceMonitor', async () => {
    const values = fullValues();
    const objects = await render(values);
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    const sts = one(objects, 'StatefulSet');
    const c = sts.spec.template.spec.containers[0]!;
    expect(c.image).toBe(`registry.example/vault-rollout@sha256:${'a'.repeat(64)}`);
    expect(c.env.filter((e) => e.valueFrom)).toEqual([
      { name: 'VAULT_ROLLOUT_WEBHOOK_SECRET', valueFrom: { secretKeyRef: { name: 'vr-webhook', key: 'hmac' } } },
      { name: 'VAULT_ROLLOUT_WEBHOOK_TOKEN', valueFrom: { secretKeyRef: { name: 'vr-webhook', key: 'token' } } },
    ]);
    expect(c.volumeMounts).toContainEqual({
      name: 'kubeconfig-prod-eu',
      mountPath: '/etc/vault-rollout/kubeconfigs/prod-eu',
      readOnly: true,
    });
    expect(sts.spec.template.spec.volumes).toContainEqual({
      name: 'kubeconfig-prod-eu',
      secret: { secretName: 'kubeconfig-prod-eu', defaultMode: 0o440, items: [{ key: 'config', path: 'kubeconfig' }] },
    });
    // The policy and binding are the CLI's output, unchanged.
    const generated = parseAllDocuments((values.admissionPolicy as { manifest: string }).manifest).map(
      (d) => d.toJS() as K8sObject,
    );
    expect(objects.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toEqual(generated);
    expect(generated.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    const role = one(objects, 'ClusterRole');
    expect(role.rules.map((r) => r.resources.join(','))).toEqual(
      expect.arrayContaining(['externalsecrets', 'vaultstaticsecrets', 'harbors']),
    );
    expect(c.args.slice(-3)).toEqual(['--status-page', '--status-refresh', '60s']);
    const np = one(objects, 'NetworkPolicy');
    expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(np.spec.podSelector.matchLabels).toEqual(sts.spec.selector.matchLabels);
    expect(np.spec.ingress).toEqual([
      {
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'vault' } } }],
        ports: [{ port: 'http', protocol: 'TCP' }],
      },
    ]);
    expect(np.spec.egress).toEqual([
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }],
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      },
      { to: [{ ipBlock: { cidr: '10.0.0.1/32' } }], ports: [{ port: 443, protocol: 'TCP' }] },
      { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }], ports: [{ port: 6443, protocol: 'TCP' }] },
    ]);
    const sm = one(objects, 'ServiceMonitor');
    expect(sm.metadata.labels?.release).toBe('prometheus');
    expect(sm.spec.selector.matchLabels).toEqual(sts.spec.selector.matchLabels);
  });

  it('ships the Grafana dashboard as a ConfigMap for the sidecar only when enabled, the committed file unchanged', async () => {
    const dashboards = (objects: K8sObject[]) =>
      objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-grafana-dashboard'));
    expect(dashboards(await render(MINIMAL))).toEqual([]);
    const [configMap, ...more] = dashboards(await render(fullValues()));
    expect(more).toEqual([]);
    expect(configMap?.metadata).toMatchObject({
      name: 'vr-vault-rollout-grafana-dashboard',
      namespace: 'vault-rollout',
      labels: { grafana_dashboard: '1' },
      annotations: { grafana_folder: 'vault-rollout' },
    });
    expect(`${(configMap?.data as Record<string, string>)['vault-rollout.json']}\n`).toBe(
      readFileSync(join(CHART, 'dashboards/vault-rollout.json'), 'utf8'),
    );
    // The sidecar's own label and a namespace it watches, when the values say so.
    const [elsewhere] = dashboards(
      await render({
        ...MINIMAL,
        grafanaDashboard: {
          enabled: true,
          namespace: 'monitoring',
          label: 'grafana_dashboard_vr',
          labelValue: 'vault-rollout',
        },
      }),
    );
    expect(elsewhere?.metadata).toMatchObject({
      namespace: 'monitoring',
      labels: { grafana_dashboard_vr: 'vault-rollout' },
    });
  });

  it('renders no ServiceMonitor unless enabled', async () => {
    expect((await render(MINIMAL)).some((o) => o.kind === 'ServiceMonitor')).toBe(false);
    expect(
      (await render({ ...MINIMAL, serviceMonitor: { enabled: false } })).some((o) => o.kind === 'ServiceMonitor'),
    ).toBe(false);
    expect(
      (await render({ ...MINIMAL, networkPolicy: { enabled: false } })).some((o) => o.kind === 'NetworkPolicy'),
    ).toBe(false);
    expect(
      (
        await render({
          ...MINIMAL,
          networkPolicy: {
            enabled: true,
            ingressFrom: [{ podSelector: {} }],
            egress: { apiServers: [{ cidr: '10.0.0.1/32' }] },
          },
        })
      ).some((o) => o.kind === 'NetworkPolicy'),
    ).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// On the real alpha cluster.
// ---------------------------------------------------------------------------------------------------------------

async function kubectl(clusterName: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      KUBECTL,
      [`--kubeconfig=${cluster(clusterName).adminKubeconfig}`, ...args],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`kubectl ${args[0]}: ${stderr.slice(0, 2000)}`)) : resolve(stdout),
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

const ok = async (res: Promise<{ status: number; text: string }>, what: string) => {
  const r = await res;
  if (r.status >= 300) throw new Error(`${what}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
};

describe('helm chart on the alpha cluster', () => {
  const release = uniqueName('chart').slice(0, 20);
  const fullname = `${release}-vault-rollout`;
  const ns = uniqueName('vr-chart'); // where the chart is installed (alpha)
  const apps = uniqueName('vr-chart-apps'); // the workloads it restarts (alpha and beta)
  const pvName = `${ns}-data`;
  // serve takes webhook secrets of 32 characters or more.
  const bearer = `t-${randomBytes(16).toString('hex')}`;
  const storageClass = 'vr-chart-test';
  let applied: K8sObject[] = [];
  // The image this checkout builds (test/image/image.ts), named by its digest in the chart's values.
  const image = imageLayout().then((built) => ({ contents: readImage(built.layout), root: unpackImage(built.layout) }));

  // The routing table the chart installs: alpha is this cluster (inCluster: true, the chart's ServiceAccount), beta
  // is reached with the kubeconfig Secret the chart mounts (relative to the table: the pod resolves it the same way).
  const routes = `clusters:
  alpha: { inCluster: true }
  beta: { kubeconfig: { file: ../kubeconfigs/beta/kubeconfig } }
vault:
  mounts: { secret: 2 }
routes:
  - name: chart-e2e
    match: { path: "secret/${apps}/db" }
    targets:
      - { clusters: [alpha, beta], namespace: ${apps}, kind: Deployment, name: app }
`;
  const values: Values = {
    routes,
    webhook: { existingSecret: `${release}-webhook`, bearerTokenKey: 'token' },
    kubeconfigSecrets: [{ name: 'beta', secretName: `${release}-kubeconfig-beta`, key: 'kubeconfig' }],
    persistence: { storageClassName: storageClass },
    // The policy is checked by a server-side dry run below, not installed (the test clusters have their own).
    admissionPolicy: { skip: true },
  };

  beforeAll(async () => {
    await createNamespace('alpha', ns);
    for (const c of ['alpha', 'beta']) {
      await createNamespace(c, apps);
      await createWorkload(c, apps, 'Deployment', 'app');
    }
    const kube = admin('alpha');
    await ok(
      kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `${release}-webhook` },
          stringData: { token: bearer },
        },
      }),
      'webhook Secret',
    );
    // beta's vault-rollout kubeconfig, its certificates inline: what an operator would put in the Secret.
    const flat = execFileSync(
      KUBECTL,
      ['config', 'view', '--raw', '--flatten', '--minify', `--kubeconfig=${cluster('beta').vaultRolloutKubeconfig}`],
      { encoding: 'utf8' },
    );
    await ok(
      kube.request('POST', `/api/v1/namespaces/${ns}/secrets`, {
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `${release}-kubeconfig-beta` },
          stringData: { kubeconfig: flat },
        },
      }),
      'kubeconfig Secret',
    );
    // The test clusters run no PersistentVolume controller: the claim the StatefulSet's volumeClaimTemplates would
    // make is made here, bound (volumeName, bind-completed) to a PV made for it; the StatefulSet controller uses an
    // existing claim of its name.
    const claim = `data-${fullname}-0`;
    await ok(
      kube.request('POST', '/api/v1/persistentvolumes', {
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolume',
          metadata: { name: pvName },
          spec: {
            capacity: { storage: '1Gi' },
            accessModes: ['ReadWriteOnce'],
            storageClassName: storageClass,
            hostPath: { path: `/tmp/${pvName}` },
            claimRef: { namespace: ns, name: claim },
          },
        },
      }),
      'PV',
    );
    await ok(
      kube.request('POST', `/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: claim, annotations: { 'pv.kubernetes.io/bind-completed': 'yes' } },
          spec: {
            accessModes: ['ReadWriteOnce'],
            storageClassName: storageClass,
            volumeName: pvName,
            resources: { requests: { storage: '1Gi' } },
          },
        },
      }),
      'PVC',
    );
    // The pod runs this checkout's image, by digest.
    values.image = { repository: 'registry.example/vault-rollout', digest: (await image).contents.manifestDigest };
  }, 300_000);

  afterAll(async () => {
    const kube = admin('alpha');
    for (const o of applied.filter((x) => x.kind === 'ClusterRole' || x.kind === 'ClusterRoleBinding'))
      await kube.request(
        'DELETE',
        `/apis/rbac.authorization.k8s.io/v1/${o.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings'}/${o.metadata.name}`,
      );
    await kube.request('DELETE', `/api/v1/persistentvolumes/${pvName}`);
    await deleteNamespace('alpha', ns);
    for (const c of ['alpha', 'beta']) await deleteNamespace(c, apps);
    rmSync((await image).root, { recursive: true, force: true });
  });

  it('the rendered objects apply; the StatefulSet pod is scheduled on a kwok node and Ready; the Service selects it', async () => {
    const objects = await render(values, release, ns);
    // Cluster-wide and named vault-rollout: the policy is checked by a server-side dry run, not installed, so the
    // test clusters' own policy stays in place (no policy is rendered without admissionPolicy.manifest anyway).
    expect(objects.some((o) => o.kind.startsWith('ValidatingAdmissionPolicy'))).toBe(false);
    applied = objects;
    await kubectl(
      'alpha',
      ['apply', '--server-side', '--field-manager=helm-chart-test', '-f', '-'],
      objects.map((o) => stringify(o)).join('---\n'),
    );
    const kube = admin('alpha');
    const pod = await waitFor(
      async () => {
        const res = await kube.request('GET', `/api/v1/namespaces/${ns}/pods/${fullname}-0`);
        if (res.status !== 200) return undefined;
        const p = res.body as {
          spec: { nodeName?: string };
          status: { conditions?: Array<{ type: string; status: string }> };
        };
        return p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : undefined;
      },
      { timeoutMs: 60_000, what: `pod ${fullname}-0 Ready` },
    );
    expect(pod.spec.nodeName).toMatch(/^kwok-node-/);
    const svc = (await kube.request('GET', `/api/v1/namespaces/${ns}/services/${fullname}`)).body as {
      spec: { selector: Record<string, string> };
    };
    const selector = Object.entries(svc.spec.selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const selected = (
      await kube.request('GET', `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`)
    ).body as { items: Array<{ metadata: { name: string } }> };
    expect(selected.items.map((p) => p.metadata.name)).toEqual([`${fullname}-0`]);
    const sts = (await kube.request('GET', `/apis/apps/v1/namespaces/${ns}/statefulsets/${fullname}`)).body as {
      status: { readyReplicas?: number };
    };
    expect(sts.status.readyReplicas).toBe(1);

    // The admission policy the user would generate for this table and this ServiceAccount: accepted by the API server.
    const policy = admissionPolicyFor(routes, `system:serviceaccount:${ns}:${fullname}`);
    const withPolicy = await render({ ...values, admissionPolicy: { manifest: policy } }, release, ns);
    const vap = withPolicy.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'));
    expect(vap).toHaveLength(2);
    // --force-conflicts: the test clusters' own policy has the same name; a dry run persists nothing.
    await kubectl(
      'alpha',
      ['apply', '--server-side', '--force-conflicts', '--dry-run=server', '--field-manager=helm-chart-test', '-f', '-'],
      vap.map((o) => stringify(o)).join('---\n'),
    );
  });

  it("end to end: an audit entry reaches the chart's serve, which restarts app in alpha (inCluster) and in beta (kubeconfig Secret)", async () => {
    const kube = admin('alpha');
    const pod = (await kube.request('GET', `/api/v1/namespaces/${ns}/pods/${fullname}-0`)).body as PodView;
    expect(pod.metadata.uid).toBeTruthy();
    const { contents, root: imageRoot } = await image;
    expect(pod.spec.containers.find((c) => c.name === 'serve')?.image).toBe(
      `registry.example/vault-rollout@${contents.manifestDigest}`,
    );
    const { spec, root } = await materialisePod(kube, pod, 'serve', cluster('alpha').server);
    const container = await imageRunner(imageRoot, contents.config.config).start(spec);
    try {
      const port = await container.listening;
      const ready = await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, {
        timeoutMs: 30_000,
        what: 'serve ready',
      });
      expect(ready).toBe(true);
      const audit = JSON.stringify({
        time: new Date().toISOString(),
        type: 'response',
        request: {
          id: `chart-e2e-${Date.now()}`,
          operation: 'update',
          mount_type: 'kv',
          mount_point: 'secret/',
          path: `secret/data/${apps}/db`,
        },
        response: { data: { version: 3 } },
      });
      expect(
        (
          await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, {
            method: 'POST',
            body: audit,
            headers: { authorization: 'Bearer wrong' },
          })
        ).status,
      ).toBe(401); // the Secret's token, not any
      const res = await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, {
        method: 'POST',
        body: audit,
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(res.status).toBe(202);
      for (const c of ['beta', 'alpha']) {
        const versions = await waitFor(
          async () =>
            (await getWorkload(c, apps, 'Deployment', 'app')).spec.template?.metadata?.annotations?.[
              'vault-rollout.io/versions'
            ],
          { timeoutMs: 60_000, what: `app restarted in ${c}\n${container.stderr().slice(-2000)}` },
        );
        expect(versions).toBe(`{"secret/${apps}/db":3}`);
      }
    } finally {
      await container.stop();
      removeRoot(root);
    }
  });

  it("kubectl exec POD -- vault-rollout doctor | status | halts | halts clear: the CLI on the image's PATH, no shell, beside serve", async () => {
    const kube = admin('alpha');
    const pod = (await kube.request('GET', `/api/v1/namespaces/${ns}/pods/${fullname}-0`)).body as PodView;
    const { contents, root: imageRoot } = await image;
    const { spec, root } = await materialisePod(kube, pod, 'serve', cluster('alpha').server);
    // A halt in the rotation store on the pod's volume, where XDG_STATE_HOME (the chart's env) puts it.
    const halted = await seedHalt(join(spec.mounts['/var/lib/vault-rollout']!, 'vault-rollout/rotations.sqlite'), apps);
    const runner = imageRunner(imageRoot, contents.config.config);
    const container = await runner.start(spec);
    try {
      await container.listening;
      const exec = async (...argv: string[]) => {
        const result = await runner.exec(spec, argv);
        return { ...result, all: `${result.stdout}${result.stderr}` };
      };
      const doctor = await exec('vault-rollout', 'doctor', '--routes', ROUTES_FILE);
      expect(doctor.all).toMatch(/alpha/);
      expect(doctor.all).toMatch(/beta/);
      expect(doctor.all).not.toMatch(/ENOENT|not found|SyntaxError/);
      const status = await exec('vault-rollout', 'status', '--routes', ROUTES_FILE);
      expect(status.all).toContain(`secret/${apps}/db`);
      const halts = await exec('vault-rollout', 'halts');
      expect(halts).toMatchObject({ code: 0 });
      expect(halts.stdout).toContain(halted);
      expect(halts.stdout).toContain('/var/lib/vault-rollout/vault-rollout/rotations.sqlite');
      const cleared = await exec('vault-rollout', 'halts', 'clear', halted);
      expect(cleared).toMatchObject({ code: 0 });
      expect(cleared.stdout).toContain(`Cleared the halt of rotation ${halted}`);
      expect((await exec('vault-rollout', 'halts')).stdout).toContain('No halted rotation');
    } finally {
      await container.stop();
      removeRoot(root);
    }
  });
});
