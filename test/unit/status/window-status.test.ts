/** status and maintenance windows: a behind consumer whose restart waits for a closed window says when it opens. */
import { describe, expect, it } from 'vitest';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import type { ConsumerStatus } from '../../../lib/status/model.ts';
import { withWindowWaits } from '../../../lib/status/window-status.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
rollout:
  waves:
    - clusters: [a]
    - clusters: [b]
      window: { days: [Mon], from: "22:00", to: "23:00", timeZone: UTC }
routes:
  - name: app
    match: { path: "secret/api" }
    targets: [{ clusters: [a, b], namespace: ns, kind: Deployment, name: api }]
`);
const probe: SecretChange = {
  namespace: '',
  mount: 'secret',
  key: 'api',
  path: 'secret/api',
  operation: 'write',
  version: 3,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id: 'status',
  time: '',
  record: 'status',
};
const consumer = (cluster: string, state: ConsumerStatus['state']): ConsumerStatus => ({
  cluster,
  namespace: 'ns',
  kind: 'Deployment',
  name: 'api',
  recorded: 2,
  state,
  rollout: 'complete',
  routed: true,
  ok: state === 'current',
  detail: state === 'behind' ? 'records 2, current is 3' : '',
});

describe('withWindowWaits', () => {
  it("puts the wait before a behind consumer's detail, in the wave whose window is closed only", () => {
    const plan = planRollouts(table, [probe]);
    const out = withWindowWaits(
      [consumer('a', 'behind'), consumer('b', 'behind'), consumer('b', 'current')],
      table,
      [probe],
      plan,
      Date.parse('2026-11-30T10:00:00Z'),
    );
    expect(out.map((c) => c.detail)).toEqual([
      'records 2, current is 3',
      'waits for its window (opens 2026-11-30T22:00:00.000Z): records 2, current is 3',
      '',
    ]);
    expect(out[1]?.ok).toBe(false);
  });
  it('says nothing once the window is open', () => {
    const plan = planRollouts(table, [probe]);
    const out = withWindowWaits([consumer('b', 'behind')], table, [probe], plan, Date.parse('2026-11-30T22:10:00Z'));
    expect(out[0]?.detail).toBe('records 2, current is 3');
  });
});
