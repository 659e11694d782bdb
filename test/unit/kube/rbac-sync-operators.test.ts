/** infra/rbac/sync-operators.yaml: exactly what a nudge and its wait need, on the operators' kinds only; never Secrets. */
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { SYNC_KINDS } from '../../../lib/workloads/sync-kinds.ts';
import { readRepoFile } from '../../helpers.ts';

const docs = parseAllDocuments(readRepoFile('infra/rbac/sync-operators.yaml')).map(
  (d) => d.toJS() as { kind?: string; rules?: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> },
);

describe('infra/rbac/sync-operators.yaml', () => {
  it('grants get, list, watch and patch on each operator kind vault-rollout syncs, and nothing else', () => {
    const rules = docs.find((d) => d.kind === 'ClusterRole')?.rules ?? [];
    expect(rules).toEqual(
      Object.values(SYNC_KINDS).map((d) => ({
        apiGroups: [d.apiVersion.split('/')[0]],
        resources: [`${d.kind.toLowerCase()}s`],
        verbs: ['get', 'list', 'watch', 'patch'],
      })),
    );
    expect(
      rules
        .flatMap((r) => [...r.resources, ...r.apiGroups, ...r.verbs])
        .filter((x) => x === 'secrets' || x.includes('*')),
    ).toEqual([]);
  });
});
