import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { readRepoFile } from '../../helpers.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

const rulesOf = (file: string): Rule[] =>
  parseAllDocuments(readRepoFile(file))
    .map((doc) => doc.toJS() as { kind?: string; rules?: Rule[] } | null)
    .filter((doc) => doc?.kind === 'ClusterRole' || doc?.kind === 'Role')
    .flatMap((doc) => doc?.rules ?? []);

describe('infra/rbac grants only what vault-rollout uses', () => {
  it.each(['infra/rbac/clusterrole.yaml', 'infra/rbac/role-namespaced.yaml'])('%s', (file) => {
    // The executor only ever creates core/v1 Events (lib/kube/rollout-executor.ts recordEvent); a repeat is a 409,
    // never an update. Workloads are read and patched; nothing else.
    expect(rulesOf(file)).toEqual([
      { apiGroups: ['apps'], resources: ['deployments', 'statefulsets', 'daemonsets'], verbs: ['get', 'list', 'patch'] },
      { apiGroups: ['batch'], resources: ['cronjobs'], verbs: ['get', 'list', 'patch'] },
      { apiGroups: ['argoproj.io'], resources: ['rollouts'], verbs: ['get', 'list', 'patch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    ]);
  });
});
