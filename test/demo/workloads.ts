/**
 * The example workloads of infra/routes/example.yaml, per local cluster: what each route's targets name, so that
 * every route of the example routing table restarts something real. Applied with the cluster's admin kubeconfig
 * (server-side apply). Pods stay Pending on clusters without
 * nodes; a Deployment still gets a new ReplicaSet when its pod template changes, which is what the demo shows.
 */

const podTemplate = (app: string, labels: Record<string, string> = {}) => ({
  metadata: { labels: { app, ...labels } },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/demo:1' }] },
});

const namespace = (name: string) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });

const deployment = (ns: string, name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { namespace: ns, name, labels },
  spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: podTemplate(name, labels) },
});

const daemonSet = (ns: string, name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { namespace: ns, name },
  spec: { selector: { matchLabels: { app: name } }, template: podTemplate(name) },
});

// Opts in through the annotation the batch-opt-in route looks for.
const cronJob = (ns: string, name: string, watch: string) => ({
  apiVersion: 'batch/v1',
  kind: 'CronJob',
  metadata: { namespace: ns, name, annotations: { 'vault-rollout.io/watch': watch } },
  spec: {
    schedule: '0 3 * * *',
    jobTemplate: {
      spec: { template: { ...podTemplate(name), spec: { ...podTemplate(name).spec, restartPolicy: 'OnFailure' } } },
    },
  },
});

// The registry-credentials route patches an operator's custom resource: its CRD, one object, and the one grant the
// project's ClusterRole does not carry (custom resources are the user's to grant, per kind and namespace).
const harborCrd = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'harbors.example.com' },
  spec: {
    group: 'example.com',
    scope: 'Namespaced',
    names: { plural: 'harbors', singular: 'harbor', kind: 'Harbor' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
};
const harbor = {
  apiVersion: 'example.com/v1',
  kind: 'Harbor',
  metadata: { namespace: 'registry', name: 'main' },
  spec: { secretVersion: '0' },
};
const harborGrant = [
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { namespace: 'registry', name: 'vault-rollout-harbors' },
    rules: [{ apiGroups: ['example.com'], resources: ['harbors'], verbs: ['get', 'list', 'patch'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { namespace: 'registry', name: 'vault-rollout-harbors' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'vault-rollout-harbors' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' }],
  },
];

export const TLS_LABEL = { 'vault-rollout.io/tls': 'shared' };

/**
 * Objects per cluster, in apply order (namespaces and CRDs before what lives in them). The second list holds what
 * needs the first one established (custom resources of a new CRD).
 */
export function exampleWorkloads(cluster: string): { first: object[]; then: object[] } {
  const edge = [namespace('edge'), deployment('edge', 'web', TLS_LABEL)];
  switch (cluster) {
    case 'alpha': // env=prod, region=eu
      return {
        first: [
          namespace('payments'),
          deployment('payments', 'checkout'),
          ...edge,
          daemonSet('edge', 'ingress-proxy'),
          namespace('batch'),
          cronJob('batch', 'nightly-report', 'legacy/batch/*'),
          namespace('registry'),
          harborCrd,
          ...harborGrant,
        ],
        then: [harbor],
      };
    case 'beta': // env=prod, region=us
      return { first: [namespace('payments'), deployment('payments', 'checkout'), ...edge], then: [] };
    case 'gamma': // env=staging, region=eu
      return { first: [...edge, namespace('batch'), cronJob('batch', 'nightly-report', 'legacy/batch/*')], then: [] };
    default:
      return { first: [], then: [] };
  }
}

/** The workloads among these objects: what a restart patches and records versions on. */
export const workloadsOf = (objects: object[]): object[] =>
  objects.filter((o) => ['Deployment', 'DaemonSet', 'CronJob', 'Harbor'].includes((o as { kind?: string }).kind ?? ''));

/** A multi-document YAML stream of these objects (JSON is YAML). */
export const toYamlStream = (objects: object[]): string => objects.map((o) => JSON.stringify(o)).join('\n---\n');
