/**
 * rollout.maxUnavailable in the executor, against the in-memory API and a real (in-memory) SQLite slot store: a
 * target without a free slot is `deferred` and not patched; a rollout that ends gives its slot back and the next
 * deferred target starts within the same follow budget; a later attempt frees the slots of what it finds complete.
 */
import { describe, expect, it } from 'vitest';
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../../../lib/engine/rollout-executor.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { SqliteSlotStore } from '../../../lib/slots/sqlite-slot-store.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
  c: { kubeconfig: { env: C } }
rollout: { maxUnavailable: { perCluster: 1, fleet: 2 } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets:
      - { clusters: [a, b, c], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }
`);
const APPS = ['x', 'y', 'z'];
const change = (key: string, version: number): SecretChange => kvWrite(key, version);
const complete = (o: KubeObject) => ({
  ...o,
  metadata: { ...o.metadata, generation: 2 },
  spec: { ...o.spec, replicas: 1 },
  status: { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
});

const run = (fake: ReturnType<typeof fakeClusters>, extra: Partial<ExecutorOptions>) =>
  executeRollouts(
    table,
    planRollouts(
      table,
      APPS.map((a) => change(a, 2)),
    ).targets,
    options(fake.apiFor, { slotPollMs: 20, ...extra }),
  );

describe('rollout.maxUnavailable', () => {
  it('patches only what the slots allow; the rest is deferred, saying which bound is full', async () => {
    const fake = fakeClusters({ a: APPS, b: APPS, c: APPS });
    const results = await run(fake, { slots: new SqliteSlotStore(':memory:') });
    expect(results.filter((r) => r.outcome === 'restarted').length).toBe(2);
    expect(fake.calls.filter((c) => c.op === 'patch').length).toBe(2);
    const deferred = results.filter((r) => r.outcome === 'deferred');
    expect(deferred.length).toBe(7);
    expect(new Set(deferred.map((r) => r.reason))).toEqual(new Set(['waiting for a rollout slot']));
    expect(deferred.map((r) => r.detail)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^maxUnavailable\.perCluster: 1 of 1 rolling in cluster [ab]$/),
        expect.stringMatching(/^maxUnavailable\.fleet: 2 of 2 rolling over the fleet$/),
      ]),
    );
    // A dry run takes no slot.
    const dry = await run(fakeClusters({ a: APPS, b: APPS, c: APPS }), {
      slots: new SqliteSlotStore(':memory:'),
      dryRun: true,
    });
    expect(dry.every((r) => r.outcome === 'dry-run')).toBe(true);
  });

  it('starts the next deferred target as each rollout completes, never more than the bound at once', async () => {
    const fake = fakeClusters({ a: APPS, b: APPS, c: APPS });
    const rolling = new Map<string, RolloutResult>();
    const order: string[] = [];
    let maxFleet = 0;
    let maxCluster = 0;
    const results = await run(fake, {
      slots: new SqliteSlotStore(':memory:'),
      follow: {
        budgetMs: 30_000,
        onProgress: (r) => {
          const key = `${r.cluster}/${r.name}`;
          if (r.outcome === 'restarted' && r.rollout === undefined && !rolling.has(key)) {
            rolling.set(key, r);
            order.push(r.cluster);
          }
          if (r.rollout === 'complete') rolling.delete(key);
          maxFleet = Math.max(maxFleet, rolling.size);
          for (const c of ['a', 'b', 'c'])
            maxCluster = Math.max(maxCluster, [...rolling.values()].filter((x) => x.cluster === c).length);
          // The controller finishes each rollout as soon as it is followed.
          if (r.rollout === 'progressing') setTimeout(() => fake.update(key, complete), 5);
        },
      },
    });
    expect(results.map((r) => `${r.outcome}:${r.rollout}`)).toEqual(Array(9).fill('restarted:complete'));
    expect(fake.calls.filter((c) => c.op === 'patch').length).toBe(9);
    expect(maxFleet).toBe(2);
    expect(maxCluster).toBe(1);
    // Clusters take turns for the fleet's slots: c, last in plan order, does not wait for a and b to finish.
    expect(order.indexOf('c')).toBeLessThanOrEqual(3);
    // What a freed slot starts joins its cluster's open watch: per cluster one LIST by name, then one of the
    // namespace when the second workload joins — not a LIST and a WATCH per restart.
    for (const c of ['a', 'b', 'c'])
      expect(fake.calls.filter((x) => x.cluster === c && x.op === 'listForWatch').length).toBeLessThanOrEqual(2);
  });

  it('hands back what is still deferred when the budget ends; the next attempt frees the slots of what completed since and goes on', async () => {
    const fake = fakeClusters({ a: APPS, b: APPS, c: APPS });
    const slots = new SqliteSlotStore(':memory:');
    const first = await run(fake, { slots, follow: { budgetMs: 50 } });
    expect(first.filter((r) => r.outcome === 'restarted').map((r) => r.rollout)).toEqual([
      'progressing',
      'progressing',
    ]);
    expect(first.filter((r) => r.outcome === 'deferred').length).toBe(7);
    expect((await slots.leases('fleet')).length).toBe(2);
    // The rollouts finish while no worker watches (a killed worker, a follow-up still queued).
    for (const r of first.filter((x) => x.outcome === 'restarted')) fake.update(`${r.cluster}/${r.name}`, complete);
    const second = await run(fake, { slots, follow: { budgetMs: 200 } });
    const byKey = new Map(second.map((r) => [`${r.cluster}/${r.name}`, r]));
    for (const r of first.filter((x) => x.outcome === 'restarted'))
      expect(byKey.get(`${r.cluster}/${r.name}`)).toMatchObject({ outcome: 'unchanged', rollout: 'complete' });
    expect(second.filter((r) => r.outcome === 'restarted').length).toBe(2);
    // Nothing was patched twice.
    const patched = fake.calls.filter((c) => c.op === 'patch').map((c) => `${c.cluster}/${c.name}`);
    expect(new Set(patched).size).toBe(patched.length);
  });
});
