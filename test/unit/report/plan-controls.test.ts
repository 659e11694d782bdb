import { describe, expect, it } from 'vitest';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { controlsText, routeControls } from '../../../lib/report/plan-controls.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';

const table = (rollout: string, mode = '') =>
  loadRoutingTable(`clusters:
  staging: { kubeconfig: { env: A } }
  prod: { kubeconfig: { env: B } }
vault: { mounts: { secret: 2 } }
routes:
  - name: api
    ${mode}
    match: { path: "secret/app/db" }
    targets: [{ clusters: [staging, prod], namespace: app, kind: Deployment, name: api }]
    rollout: { waves: [{ clusters: [staging] }, { clusters: [prod] }]${rollout} }
`);

describe('the controls a plan shows for its routes', () => {
  it.each([
    ['none', '', '', undefined],
    [
      'a window',
      ', window: { days: [Sat, Sun], from: "22:00", to: "04:00", timeZone: Europe/Berlin }',
      '',
      'window Sat,Sun 22:00-04:00 Europe/Berlin',
    ],
    ['an approval', ', gate: { approval: true }', '', 'each later wave waits for vault-rollout approve'],
    [
      'a breaker',
      ', breaker: { restarts: 3, within: 2h }',
      '',
      'breaker: at most 3 restarts of a workload within 2h, then a halt',
    ],
    [
      'notify-only, whatever else the route says',
      ', gate: { approval: true }, breaker: { restarts: 3, within: 1h }',
      'mode: notify',
      'notify-only: nothing is patched, its sinks get what would restart',
    ],
  ])('%s', (_, rollout, mode, expected) => {
    expect(routeControls(table(rollout, mode).routes[0]!)).toBe(expected);
  });

  it('lists only the routes the plan reaches, one line each', () => {
    const t = table(', gate: { approval: true }');
    const change = { namespace: '', mount: 'secret', key: 'app/db', path: 'secret/app/db', operation: 'write' };
    const reached = planRollouts(t, [{ ...change, version: 2, id: 'a', time: '2026-11-28T10:00:00Z' } as SecretChange]);
    expect(controlsText(reached, t.routes)).toEqual([
      '',
      'Controls:',
      '  api: each later wave waits for vault-rollout approve',
    ]);
    expect(controlsText({ ...reached, routed: [[]] }, t.routes)).toEqual([]);
  });
});
