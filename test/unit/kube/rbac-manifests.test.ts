import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { readRepoFile } from '../../helpers.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: string[];
}

const rulesOf = (file: string): Rule[] =>
  parseAllDocuments(readRepoFile(file))
    .map((doc) => doc.toJS() as { kind?: string; rules?: Rule[] } | null)
    .filter((doc) => doc?.kind === 'ClusterRole' || doc?.kind === 'Role')
    .flatMap((doc) => doc?.rules ?? []);

const workloads: Rule[] = [
  {
    apiGroups: ['apps'],
    resources: ['deployments', 'statefulsets', 'daemonsets'],
    verbs: ['get', 'list', 'watch', 'patch'],
  },
  { apiGroups: ['batch'], resources: ['cronjobs'], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: ['argoproj.io'], resources: ['rollouts'], verbs: ['get', 'list', 'watch', 'patch'] },
  // Events: created for restarts and halts; listed by status to find the RotationHalted Event a gate left.
  { apiGroups: [''], resources: ['events'], verbs: ['create', 'list'] },
  // reconcile: do a workload's running pods predate a version? status: how many pods run an older revision?
  { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
  // status: the ReplicaSets and ControllerRevisions whose pod templates say which version a pod runs.
  { apiGroups: ['apps'], resources: ['replicasets', 'controllerrevisions'], verbs: ['list'] },
];

describe('infra/rbac grants only what vault-rollout uses', () => {
  // Workloads are read, watched (rollout health) and patched; the executor only ever creates core/v1 Events (a
  // repeat is a 409, never an update); doctor reads the admission policy by name (a cluster-scoped object, so only
  // the ClusterRole can grant it).
  it.each([
    [
      'infra/rbac/clusterrole.yaml',
      [
        ...workloads,
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'],
          resourceNames: ['vault-rollout'],
          verbs: ['get'],
        },
      ],
    ],
    ['infra/rbac/role-namespaced.yaml', workloads],
  ])('%s', (file, rules) => {
    expect(rulesOf(file)).toEqual(rules);
  });
});
