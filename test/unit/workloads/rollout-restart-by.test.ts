// Argo Rollouts restarted both ways: `restartBy` on a Rollout target chooses spec.restartAt (the default: the same
// revision, pods replaced) or the pod template (a new revision through the canary's analysis); the record stays on
// the Rollout's metadata either way, and the option is refused on other kinds.
import { describe, expect, it } from 'vitest';
import { restartFields } from '../../../lib/deploy/admission-policy.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { descriptorOf } from '../../../lib/plan/target-descriptor.ts';
import { loadRoutingTable, RoutingTableError } from '../../../lib/routing/routing-table.ts';
import { ROLLOUT_BY_TEMPLATE, WORKLOAD_KINDS } from '../../../lib/workloads/workload-kinds.ts';

const table = (target: string) =>
  loadRoutingTable(`
clusters:
  alpha: { kubeconfig: { file: a } }
routes:
  - name: web
    match: { path: "secret/web" }
    targets: [{ clusters: [alpha], namespace: apps, ${target} }]
`);
const change = {
  namespace: '',
  mount: 'secret',
  key: 'web',
  path: 'secret/web',
  operation: 'write' as const,
  version: 2,
  kvVersion: 2 as const,
  kvVersionFrom: 'routes' as const,
  source: 'audit' as const,
  via: 'direct' as const,
  id: 'c1',
  time: '2026-11-28T00:00:00Z',
  record: 'r',
};
const annotations = { 'kubectl.kubernetes.io/restartedAt': 't', 'vault-rollout.io/versions': '{"secret/web":2}' };

describe('restartBy on Rollout targets', () => {
  it('template: the pod template carries the restart; the record stays on the metadata; no restartAt', () => {
    const plan = planRollouts(table('kind: Rollout, name: web, restartBy: template'), [change]);
    const target = plan.targets[0]!;
    expect(target).toMatchObject({ type: 'workload', kind: 'Rollout', restartBy: 'template' });
    const descriptor = descriptorOf(target);
    expect(descriptor).toBe(ROLLOUT_BY_TEMPLATE);
    expect(descriptor.restartPatch({ annotations, restartAt: '2026-11-28T00:00:00Z' })).toEqual({
      metadata: { annotations: { 'vault-rollout.io/versions': '{"secret/web":2}' } },
      spec: { template: { metadata: { annotations } } },
    });
    expect(restartFields(descriptor)).toEqual({
      metadata: { annotations: { 'vault-rollout.io/versions': true, 'vault-rollout.io/restart-token': true } },
      spec: { template: { metadata: { annotations: expect.any(Object) } } },
    });
  });

  it('restartAt (the default, or named): spec.restartAt as before', () => {
    for (const t of ['kind: Rollout, name: web', 'kind: Rollout, name: web, restartBy: restartAt']) {
      const target = planRollouts(table(t), [change]).targets[0]!;
      expect(target).not.toHaveProperty('restartBy');
      expect(descriptorOf(target)).toBe(WORKLOAD_KINDS.Rollout);
      expect(descriptorOf(target).restartPatch({ annotations, restartAt: 'T' })).toMatchObject({
        spec: { restartAt: 'T' },
      });
    }
  });

  it('is refused on any other kind, and for an unknown way, with where and why', () => {
    expect(() => table('kind: Deployment, name: web, restartBy: template')).toThrow(RoutingTableError);
    expect(() => table('kind: Deployment, name: web, restartBy: template')).toThrow(
      /restartBy is for kind: Rollout only/,
    );
    expect(() => table('kind: Rollout, name: web, restartBy: rollout')).toThrow(/restartBy/);
  });
});
