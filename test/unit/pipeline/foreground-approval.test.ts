/**
 * `apply`'s waves at an approval gate (applyInForeground): it records the request, says once which command approves
 * it, waits while nobody does, and goes on after `approve`; nobody approving within the gate's timeout stops the
 * rotation, not halted, with its request kept.
 */
import { describe, expect, it } from 'vitest';
import { applyInForeground } from '../../../lib/pipeline/foreground-waves.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  gamma: { kubeconfig: { env: C } }
  alpha: { kubeconfig: { env: A } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }]
  gate: { timeout: 1m, approval: true, healthy: false }
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha, gamma], namespace: ns, kind: Deployment, name: api }]
`);
const change: SecretChange = kvWrite('app/db', 2, { id: 'id-2' });

function run(approveAfterMs: number | undefined) {
  const fake = fakeClusters({ gamma: ['api'], alpha: ['api'] });
  const rotations = new MemoryRotationStore();
  const clock = { now: Date.parse('2026-11-20T10:00:00Z') };
  const asked: string[] = [];
  let waited = 0;
  const outcome = applyInForeground([change], planRollouts(table, [change]), {
    table,
    rotations,
    now: () => clock.now,
    sleep: async (ms) => {
      clock.now += ms;
      waited += ms;
      const [request] = await rotations.approvals.pending();
      if (request && approveAfterMs !== undefined && waited >= approveAfterMs)
        await rotations.approvals.approve(request.rotation, request.wave, 'alice', new Date(clock.now).toISOString());
    },
    onApprovalRequested: (_, command) => asked.push(command),
    executor: {
      ...options(fake.apiFor, { clock: { now: () => clock.now, monotonic: () => 0 } }),
      follow: { budgetMs: 0 },
    },
  });
  const patched = () =>
    fake.calls
      .filter((c) => c.op === 'patch')
      .map((c) => c.cluster)
      .sort();
  return { outcome, asked, patched, rotations };
}

describe('apply at an approval gate', () => {
  it('waits, saying the command once, and restarts the next wave after the approval', async () => {
    const r = run(10_000);
    const out = await r.outcome;
    expect(out.awaitingApproval).toEqual([]);
    expect(out.halts).toEqual([]);
    expect(r.asked).toHaveLength(1);
    expect(r.asked[0]).toMatch(/^vault-rollout approve [0-9a-f]+ --wave 2$/);
    expect(r.patched()).toEqual(['alpha', 'gamma']);
  });

  it("stops the rotation, not halted, when nobody approves within the gate's timeout", async () => {
    const r = run(undefined);
    const out = await r.outcome;
    expect(out.halts).toEqual([]);
    expect(out.awaitingApproval).toMatchObject([{ wave: 2, waves: 2, command: r.asked[0] }]);
    expect(r.patched()).toEqual(['gamma']);
    expect(await r.rotations.approvals.pending()).toHaveLength(1);
  });
});
