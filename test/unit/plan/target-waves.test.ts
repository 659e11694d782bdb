/**
 * Restart order inside a cluster: waves that select targets. Where each planned target falls (table-driven), the
 * routing table's checks, and the worker restarting only the targets of released waves — a message is a claim,
 * whatever wave it names.
 */
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { changeSets, firstWaveMessages } from '../../../lib/pipeline/intake.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { targetWave } from '../../../lib/plan/target-waves.ts';
import { orderWaves } from '../../../lib/plan/waves.ts';
import { isGateMessage, rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { compileWaveTargets, type WaveMember } from '../../../lib/routing/wave-targets.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { problemsOf } from '../routing/problems.ts';
import { pathRotation } from '../../../lib/status/rotation-waves.ts';
import type { ConsumerStatus } from '../../../lib/status/model.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  alpha: { kubeconfig: { env: A } }
  beta: { kubeconfig: { env: B } }
rollout:
  waves:
    - { clusters: [alpha, beta], targets: { names: [db] } }
    - { clusters: [alpha], targets: { kinds: [Deployment], names: ["api-*"] } }
  gate: { timeout: 2m, pause: 0s }
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets:
      - { clusters: [alpha, beta], namespace: ns, kind: Deployment, name: db }
      - { clusters: [alpha, beta], namespace: ns, kind: Deployment, name: api-eu }
      - { clusters: [alpha], namespace: ns, kind: Deployment, name: web }
`);

const change = (version: number): SecretChange => kvWrite('app/db', version, { id: `id-${version}` });

const member = (cluster: string, name: string | undefined, kind = 'Deployment', namespace = 'ns'): WaveMember => ({
  cluster,
  kind,
  namespace,
  name,
});

describe('waves that select targets', () => {
  const waves = [['a'], ['a', 'b'], ['a']];
  const selectors = compileWaveTargets([
    { targets: { names: ['db', 'db-*'] } },
    {},
    { targets: { kinds: ['StatefulSet'], namespaces: ['team-*'] } },
  ]);
  it.each([
    ['a selected target in its first wave', member('a', 'db-0'), 0],
    ['a target the first wave does not select: the next wave holding its cluster', member('a', 'api'), 1],
    ['a nameless target (a label selector) is never selected by names', member('a', undefined), 1],
    ['a cluster the targeted wave does not hold', member('b', 'db'), 1],
    ['no wave holds its cluster: last', member('c', 'db'), 2],
  ] as const)('%s', (_, m, index) => {
    const ordered = orderWaves({ waves, waveTargets: selectors }, [], [m]);
    expect(ordered.length).toBe(1);
    expect(ordered[0]?.from === 'rest' ? 3 : ordered[0]?.from).toBe(index === 2 ? 3 : index);
    expect(targetWave(ordered, m)).toBe(0);
  });

  it('one cluster in several waves; empty waves dropped; an untargeted wave takes the rest of its clusters', () => {
    const members = [member('a', 'db'), member('a', 'api'), member('b', 'api'), member('a', 'x', 'StatefulSet')];
    const ordered = orderWaves({ waves, waveTargets: selectors }, [], members);
    expect(ordered.map((w) => [w.from, w.clusters])).toEqual([
      [0, ['a']],
      [1, ['a', 'b']],
    ]);
    expect(members.map((m) => targetWave(ordered, m))).toEqual([0, 1, 1, 1]);
  });

  it('the table: servers first in every cluster, then api-* in alpha; the rest last', () => {
    const plan = planRollouts(table, [change(2)]);
    const [set] = changeSets(table, [change(2)], plan);
    expect(set?.waves.map((w) => w.clusters)).toEqual([['alpha', 'beta'], ['alpha'], ['alpha', 'beta']]);
    const where = plan.targets.map(
      (t) => `${t.cluster}/${'name' in t ? t.name : ''}:${targetWave(set?.waves ?? [], t)}`,
    );
    expect(where.sort()).toEqual(['alpha/api-eu:1', 'alpha/db:0', 'alpha/web:2', 'beta/api-eu:2', 'beta/db:0']);
    const messages = firstWaveMessages(table, [change(2)], plan, '2026-11-20T10:00:01Z');
    expect(messages.map((m) => (isGateMessage(m) ? `gate ${m.wave}` : `${m.cluster} ${m.wave}`))).toEqual([
      'alpha 0',
      'beta 0',
      'gate 0',
    ]);
  });

  it('the policy: a cluster may come again after a wave that selects targets, not after one that takes them all', () => {
    const policy = loadRoutingTable(`clusters:
  alpha: { kubeconfig: { env: A } }
  beta: { kubeconfig: { env: B } }
rollout:
  waves:
    - { clusters: [alpha], targets: { names: [db] } }
    - { clusters: [alpha, beta] }
    - { clusters: [alpha, beta] }
routes:
  - name: app
    match: { path: "secret/app" }
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: app }]
`).routes[0]?.policy;
    expect(policy?.waves).toEqual([['alpha'], ['alpha', 'beta'], []]);
    expect(policy?.waveTargets?.map((t) => t !== undefined)).toEqual([true, false, false]);
    expect(table.routes[0]?.policy.waveTargets).toHaveLength(2);
  });

  it('status: consumers under the wave that selects them, a halt at wave 1 holds the clients back', () => {
    const consumer = (cluster: string, name: string, ok: boolean): ConsumerStatus => ({
      cluster,
      namespace: 'ns',
      kind: 'Deployment',
      name,
      recorded: ok ? 2 : 1,
      state: ok ? 'current' : 'behind',
      rollout: 'complete',
      routed: true,
      ok,
      detail: '',
    });
    const consumers = [
      consumer('alpha', 'db', true),
      consumer('beta', 'db', true),
      consumer('alpha', 'api-eu', false),
      consumer('alpha', 'web', false),
      consumer('beta', 'api-eu', false),
    ];
    const rotation = pathRotation(
      table,
      {
        path: 'secret/app/db',
        vaultNamespace: '',
        mount: 'secret',
        key: 'app/db',
        kvVersion: 2,
        current: 2,
        currentFrom: 'vault',
        consumers,
        notes: [],
        ok: false,
      },
      [],
    );
    expect(rotation?.waves.map((w) => [w.number, w.clusters, w.consumers, w.state])).toEqual([
      [1, ['alpha', 'beta'], 2, 'complete'],
      [2, ['alpha'], 1, 'waiting'],
      [3, ['alpha', 'beta'], 2, 'waiting'],
    ]);
  });

  it('the schema: an empty selector, an unknown field and a bad name glob are errors with their place', () => {
    const doc = (targets: string) => `clusters:
  alpha: { kubeconfig: { env: A } }
rollout:
  waves:
    - { clusters: [alpha], targets: ${targets} }
routes:
  - name: app
    match: { path: "secret/app" }
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: app }]
`;
    expect(problemsOf(doc('{}')).join('\n')).toMatch(/rollout\.waves\[0\]\.targets: give at least one of kinds/);
    expect(problemsOf(doc('{ labels: { a: b } }')).join('\n')).toMatch(/rollout\.waves\[0\]\.targets.*labels/);
    expect(problemsOf(doc('{ names: [DB] }')).join('\n')).toMatch(/rollout\.waves\[0\]\.targets\.names\[0\]/);
  });
});

describe('the worker restarts only the targets of released waves', () => {
  let n = 0;
  const record = (cluster: string, c: SecretChange, wave?: number): QueueRecord => {
    const [m] = rolloutMessages(cluster, [c], '2026-11-20T10:00:01Z', wave);
    return { messageId: `m${++n}`, body: JSON.stringify(m), groupId: cluster };
  };
  function worker(rotations: MemoryRotationStore) {
    const fake = fakeClusters({ alpha: ['db', 'api-eu', 'web'], beta: ['db', 'api-eu'] });
    const deps = {
      table,
      rotations,
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      deadLetter: async () => undefined,
    };
    const patched = () =>
      fake.calls
        .filter((c) => c.op === 'patch' && !('dryRun' in c && c.dryRun))
        .map((c) => `${c.cluster}/${'name' in c ? c.name : ''}`)
        .sort();
    return { deps, patched };
  }
  const rotation = () => changeSets(table, [change(2)], planRollouts(table, [change(2)]))[0]?.key ?? '';

  it('wave 1 restarts the servers only, whatever the message names; a claim of an unreleased wave is refused', async () => {
    const rotations = new MemoryRotationStore();
    const w = worker(rotations);
    const out = await processBatch([record('alpha', change(2), 0), record('beta', change(2))], w.deps);
    expect(w.patched()).toEqual(['alpha/db', 'beta/db']);
    expect(await rotations.waveTimes(rotation(), 0)).toMatchObject({ startedAt: expect.any(String) });
    const forged = await processBatch([record('alpha', change(2), 1)], w.deps);
    expect(forged.refused.map((r) => r.reason)).toEqual([
      expect.stringMatching(/claims wave 2 of 3 of rotation \w+ .*which no passed gate released/),
    ]);
    expect(w.patched()).toEqual(['alpha/db', 'beta/db']);
    expect(out.refused).toEqual([]);
  });

  it('once wave 2 is released, alpha restarts api-eu (db once: exactly once); web and beta/api-eu wait for wave 3', async () => {
    const rotations = new MemoryRotationStore();
    const w = worker(rotations);
    await processBatch([record('alpha', change(2), 0), record('beta', change(2), 0)], w.deps);
    await rotations.releaseWave(rotation(), 1);
    await processBatch([record('alpha', change(2), 1)], w.deps);
    expect(w.patched()).toEqual(['alpha/api-eu', 'alpha/db', 'beta/db']);
    const refused = await processBatch([record('beta', change(2), 2)], w.deps);
    expect(refused.refused.map((r) => r.reason)).toEqual([expect.stringMatching(/claims wave 3 of 3/)]);
    await rotations.releaseWave(rotation(), 2);
    await processBatch([record('alpha', change(2), 2), record('beta', change(2), 2)], w.deps);
    expect(w.patched()).toEqual(['alpha/api-eu', 'alpha/db', 'alpha/web', 'beta/api-eu', 'beta/db']);
  });
});
