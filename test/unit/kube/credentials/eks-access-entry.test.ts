import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

const read = (path: string): string => readFileSync(new URL(`../../../../${path}`, import.meta.url), 'utf8');

describe('infra/eks', () => {
  it('maps the vault-rollout role to the Kubernetes group vault-rollout, with no EKS access policy', () => {
    const template = parse(read('infra/eks/access-entry.example.yaml')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    };
    const entries = Object.values(template.Resources).filter((r) => r.Type === 'AWS::EKS::AccessEntry');
    expect(entries).toHaveLength(1);
    expect(entries[0]?.Properties).toMatchObject({ Type: 'STANDARD', KubernetesGroups: ['vault-rollout'] });
    expect(entries[0]?.Properties.AccessPolicies).toBeUndefined();
  });

  it('binds that group to the ClusterRole infra/rbac defines', () => {
    const binding = parse(read('infra/eks/clusterrolebinding-group.yaml')) as {
      kind: string;
      roleRef: { kind: string; name: string };
      subjects: { kind: string; name: string }[];
    };
    const clusterRoles = parseAllDocuments(read('infra/rbac/clusterrole.yaml'))
      .map((doc) => doc.toJS() as { kind?: string; metadata?: { name?: string } } | null)
      .filter((doc) => doc?.kind === 'ClusterRole')
      .map((doc) => doc?.metadata?.name);
    expect(binding.kind).toBe('ClusterRoleBinding');
    expect(binding.roleRef).toMatchObject({ kind: 'ClusterRole', name: 'vault-rollout' });
    expect(clusterRoles).toContain(binding.roleRef.name);
    expect(binding.subjects).toEqual([{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'vault-rollout' }]);
  });
});
