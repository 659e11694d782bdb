// The Helm chart infra/helm/vault-rollout, with helm v3 built from its Go module (test/clusters/build-helm.sh):
// `helm lint` and `helm template` over several values sets, and what each renders. The chart installed as the install
// guide says, on a real node, its pod running the image: helm-chart-in-cluster.test.ts; what a user meets at install
// (refusals, schema, notes): helm-chart-install.test.ts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot as repoRootDir } from '../helpers.ts';
import { ROUTES_FILE, SERVE_PORT } from '../../tools/image/config.ts';
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

describe('helm chart infra/helm/vault-rollout: lint and template', () => {
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
    // The image's port and routing table path (tools/image/config.ts): one of each, whichever starts serve.
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

  it('RBAC is infra/rbac/clusterrole.yaml: no wildcard, no Secrets; pods, ReplicaSets and ControllerRevisions only listed', async () => {
    const shipped = parseAllDocuments(readFileSync(join(repoRootDir, 'infra/rbac/clusterrole.yaml'), 'utf8'))
      .map((d) => d.toJS() as K8sObject & { rules?: Rule[] })
      .find((o) => o.kind === 'ClusterRole');
    const podRule = (r: Rule) => ['pods', 'replicasets', 'controllerrevisions'].some((x) => r.resources.includes(x));
    const rules = shipped?.rules ?? [];
    expect(rules.filter((r) => !podRule(r)).length).toBeGreaterThan(3);
    // `status` (kubectl exec), the status page and GET /safe-to-revoke count pods by revision: list, nothing more.
    expect(rules.filter(podRule).every((r) => r.verbs.join() === 'list')).toBe(true);
    for (const values of [MINIMAL, fullValues()]) {
      const objects = await render(values);
      const role = one(objects, 'ClusterRole');
      expect(role.rules.slice(0, rules.length)).toEqual(rules);
      for (const rule of role.rules) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames ?? []])
          expect(list.join(',')).not.toContain('*');
        expect(rule.resources).not.toContain('secrets');
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
