/**
 * The engine's two refusals for a route's sake, against the in-memory API: a notify-only route's targets come back
 * `skipped` with NOTIFY_ONLY_REASON and nothing is written (not even a key-level record), unless a restart route
 * reaches them too; `rollout.breaker` is asked before each patch and a refusal is `skipped` with BREAKER_REASON and
 * its why, nothing patched; a dry run never asks it.
 */
import { describe, expect, it } from 'vitest';
import { executeRollouts, type ExecutorOptions } from '../../../lib/engine/rollout-executor.ts';
import { BREAKER_REASON } from '../../../lib/engine/types.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { breakerKey, type RestartBreakerPort } from '../../../lib/plan/restart-breaker.ts';
import { NOTIFY_ONLY_REASON } from '../../../lib/plan/route-modes.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: watch
    match: { path: "secret/watch/{app}" }
    mode: notify
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: both
    match: { path: "secret/watch/y" }
    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: y }]
  - name: bounded
    match: { path: "secret/bounded/{app}" }
    rollout: { breaker: { restarts: 1, within: 1h } }
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);
const change = (path: string, version: number): SecretChange =>
  kvWrite(path.replace(/^secret\//, ''), version, { id: `id-${path}-${version}` });
const run = (fake: ReturnType<typeof fakeClusters>, changes: SecretChange[], extra: Partial<ExecutorOptions> = {}) =>
  executeRollouts(table, planRollouts(table, changes).targets, options(fake.apiFor, extra));

describe('a notify-only route in the engine', () => {
  it('answers its targets without a write; a target a restart route reaches too restarts', async () => {
    const fake = fakeClusters({ a: ['x', 'y'] });
    const results = await run(fake, [change('secret/watch/x', 2), change('secret/watch/y', 2)]);
    const byName = new Map(results.map((r) => [r.name, r]));
    expect(byName.get('x')).toMatchObject({ outcome: 'skipped', reason: NOTIFY_ONLY_REASON });
    expect(byName.get('y')?.outcome).toBe('restarted');
    expect(fake.calls.filter((c) => c.op === 'patch').map((c) => c.name)).toEqual(['y']);
  });
});

describe('rollout.breaker in the engine', () => {
  it('asks the breaker before the patch; a refusal patches nothing and says why', async () => {
    const fake = fakeClusters({ a: ['p'] });
    const store = new MemoryRotationStore();
    const asked: string[] = [];
    const breaker: RestartBreakerPort = (workload, token, limit) => {
      asked.push(breakerKey(workload));
      return store.admitRestart(breakerKey(workload), token, Date.now(), limit);
    };
    const first = await run(fake, [change('secret/bounded/p', 2)], { breaker });
    expect(first[0]?.outcome).toBe('restarted');
    const second = await run(fake, [change('secret/bounded/p', 3)], { breaker });
    expect(second[0]).toMatchObject({ outcome: 'skipped', reason: BREAKER_REASON });
    expect(second[0]?.detail).toMatch(/^restart breaker: 1 restart within 1h/);
    expect(fake.calls.filter((c) => c.op === 'patch')).toHaveLength(1);
    expect(asked).toEqual(['a/ns/Deployment/p', 'a/ns/Deployment/p']);
    // A dry run asks nothing and counts nothing.
    await run(fake, [change('secret/bounded/p', 4)], { breaker, dryRun: true });
    expect(asked).toHaveLength(2);
  });
});
