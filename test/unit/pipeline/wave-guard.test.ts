/**
 * The wave guard: a halt holds against every message, and a later wave restarts only once a passed gate
 * released it — whatever the message says about itself. Each case first shows what got through before the guard.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { changesByCluster, changeSets, firstWaveMessages } from '../../../lib/pipeline/intake.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import {
  changeIdentity,
  isGateMessage,
  queuedChange,
  rolloutMessages,
  ROLLOUT_MESSAGE_VERSION,
  type GateMessage,
} from '../../../lib/queue/rollout-message.ts';
import { MemoryRotationStore, type RotationHalt, type RotationStore } from '../../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  gamma: { kubeconfig: { env: C } }
  alpha: { kubeconfig: { env: A } }
  beta: { kubeconfig: { env: B } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }, { clusters: [beta] }]
  gate: { timeout: 2m, pause: 0s }
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha, beta, gamma], namespace: ns, kind: Deployment, name: api }]
`);

const change = (version: number): SecretChange => kvWrite('app/db', version, { id: `id-${version}` });
const rotationOf = (c: SecretChange): string => changeSets(table, [c], planRollouts(table, [c]))[0]?.key ?? '';

let n = 0;
/** A message for `cluster` as a forger (or a reconcile run, or a relay without waves) would send it: any wave it likes. */
const forged = (cluster: string, c: SecretChange, wave?: number): QueueRecord => {
  const [m] = rolloutMessages(cluster, [c], '2026-11-20T10:00:01Z', wave);
  return { messageId: `m${++n}`, body: JSON.stringify(m), groupId: cluster };
};

function worker(rotations: RotationStore, deadLetters: Array<{ messageId: string; reason: string }> = []) {
  const fake = fakeClusters({ gamma: ['api'], alpha: ['api'], beta: ['api'] });
  const deps = {
    table,
    rotations,
    telemetry: memoryTelemetry(),
    executor: options(fake.apiFor),
    deadLetter: async (r: QueueRecord, reason: string) => void deadLetters.push({ messageId: r.messageId, reason }),
  };
  const patched = () =>
    fake.calls
      .filter((c) => c.op === 'patch')
      .map((c) => c.cluster)
      .sort();
  return { deps, patched, deadLetters };
}

const halt = (c: SecretChange): RotationHalt => ({
  rotation: rotationOf(c),
  route: 'app',
  changes: [changeIdentity(queuedChange(c))],
  secrets: [`secret/app/db version ${c.version}`],
  wave: 1,
  waves: 3,
  failing: { cluster: 'gamma', namespace: 'ns', kind: 'Deployment', name: 'api', state: 'timeout' },
  why: 'rollout timeout',
  notRestarted: ['alpha', 'beta'],
  haltedAt: '2026-11-20T10:05:00Z',
});

describe('the wave guard', () => {
  it('refuses a later-wave cluster message no gate released, whatever wave it claims; dead-letters it with the reason', async () => {
    const w = worker(new MemoryRotationStore());
    const out = await processBatch([forged('alpha', change(2), 1), forged('beta', change(2))], w.deps);
    expect(w.patched()).toEqual([]);
    expect(out.refused.map((r) => r.reason)).toEqual([
      expect.stringMatching(/cluster "alpha" is in wave 2 of 3 of rotation \w+ .*no passed gate released/),
      expect.stringMatching(/cluster "beta" is in wave 3 of 3/),
    ]);
    expect(w.deadLetters.map((d) => d.reason)).toEqual(out.refused.map((r) => r.reason));
    expect(out.failed).toEqual([]);
  });

  it('lets the first wave restart at once, and a later wave once its gate released it', async () => {
    const rotations = new MemoryRotationStore();
    const w = worker(rotations);
    await processBatch([forged('gamma', change(2))], w.deps);
    expect(w.patched()).toEqual(['gamma']);
    await rotations.releaseWave(rotationOf(change(2)), 1);
    const out = await processBatch([forged('alpha', change(2)), forged('beta', change(2))], w.deps);
    expect(w.patched()).toEqual(['alpha', 'gamma']);
    expect(out.refused.map((r) => r.reason)).toEqual([expect.stringMatching(/cluster "beta" is in wave 3 of 3/)]);
  });

  it('refuses every message of a halted rotation, the first wave too; a newer version goes through', async () => {
    const rotations = new MemoryRotationStore();
    await rotations.halt(halt(change(2)));
    await rotations.releaseWave(rotationOf(change(2)), 2);
    const w = worker(rotations);
    const out = await processBatch([forged('gamma', change(2)), forged('beta', change(2), 2)], w.deps);
    expect(w.patched()).toEqual([]);
    expect(out.refused.map((r) => r.reason)).toEqual([
      expect.stringContaining('halted at wave 1 of 3'),
      expect.stringContaining(`vault-rollout halts clear ${rotationOf(change(2))}`),
    ]);
    await processBatch([forged('gamma', change(3))], w.deps);
    expect(w.patched()).toEqual(['gamma']);
  });

  it('refuses a gate for a later wave that was never released, and a gate of a halted rotation', async () => {
    const rotations = new MemoryRotationStore();
    const w = worker(rotations);
    const gate = (c: SecretChange, wave: number): QueueRecord => {
      const m: GateMessage = {
        v: ROLLOUT_MESSAGE_VERSION,
        kind: 'gate',
        changes: [queuedChange(c)],
        wave,
        since: '2026-11-20T10:00:01Z',
        acceptedAt: '2026-11-20T10:00:01Z',
        round: 0,
      };
      return { messageId: `g${++n}`, body: JSON.stringify(m), groupId: `gate-${rotationOf(c)}` };
    };
    const skipped = await processBatch([gate(change(2), 1)], w.deps);
    expect(skipped.refused.map((r) => r.reason)).toEqual([
      expect.stringMatching(/a gate for wave 2 of rotation \w+, which no passed gate released/),
    ]);
    await rotations.halt(halt(change(4)));
    const halted = await processBatch([gate(change(4), 0)], w.deps);
    expect(halted.refused.map((r) => r.reason)).toEqual([expect.stringContaining('halted at wave 1 of 3')]);
    expect(w.patched()).toEqual([]);
  });

  it('redelivers a refused message the dead letters cannot take, rather than dropping it', async () => {
    const w = worker(new MemoryRotationStore());
    const out = await processBatch([forged('beta', change(2))], {
      ...w.deps,
      deadLetter: () => Promise.reject(new Error('DLQ down')),
    });
    expect(out.failed).toEqual([out.refused[0]?.messageId]);
  });

  it('says when the sender planned with another routing table', async () => {
    const w = worker(new MemoryRotationStore());
    const [m] = rolloutMessages('beta', [change(2)], '2026-11-20T10:00:01Z', undefined, 'abcdef0123456789');
    const out = await processBatch([{ messageId: 'x', body: JSON.stringify(m), groupId: 'beta' }], w.deps);
    expect(out.refused[0]?.reason).toContain(
      `the sender planned with routing table abcdef0123456789, this worker's is ${table.hash}`,
    );
  });
});

describe('what every sender queues (firstWaveMessages)', () => {
  it('the first wave only, each message carrying the whole rotation; `needs` leaves out clusters with nothing behind', () => {
    const changes = [change(2)];
    const plan = planRollouts(table, changes);
    const all = firstWaveMessages(table, changes, plan, '2026-11-20T10:00:01Z');
    expect(all.map((m) => (isGateMessage(m) ? `gate ${m.wave}` : m.cluster))).toEqual(['gamma', 'gate 0']);
    expect(all.every((m) => m.table === table.hash)).toBe(true);
    const none = firstWaveMessages(table, changes, plan, '2026-11-20T10:00:01Z', () => false);
    expect(none.map((m) => (isGateMessage(m) ? `gate ${m.wave}` : m.cluster))).toEqual(['gate 0']);
    expect([...changesByCluster(changes, plan).keys()].sort()).toEqual(['alpha', 'beta', 'gamma']);
  });
});

describe.each([
  ['memory', () => new MemoryRotationStore()],
  ['sqlite', () => new SqliteRotationStore(join(mkdtempSync(join(tmpdir(), 'vr-rot-')), 'state', 'rotations.sqlite'))],
] as const)('the %s rotation store', (_, make) => {
  it('releases waves monotonically, finds halts by change, lists and clears them', async () => {
    const store = make();
    expect(await store.releasedWave('r1')).toBe(0);
    await store.releaseWave('r1', 2);
    await store.releaseWave('r1', 1);
    expect(await store.releasedWave('r1')).toBe(2);
    const h = { ...halt(change(2)), rotation: 'r1' };
    await store.halt(h);
    await store.halt({ ...halt(change(5)), rotation: 'r2', haltedAt: '2026-11-20T10:06:00Z' });
    expect((await store.haltsOf([changeIdentity(queuedChange(change(2))), 'other'])).map((x) => x.rotation)).toEqual([
      'r1',
    ]);
    expect((await store.haltsOf(['other'])).length).toBe(0);
    expect((await store.halts()).map((x) => x.rotation)).toEqual(['r1', 'r2']);
    expect(await store.clear('r1')).toEqual(h);
    expect(await store.releasedWave('r1')).toBe(0);
    expect(await store.haltsOf(h.changes)).toEqual([]);
    expect(await store.clear('r1')).toBeUndefined();
    store.close?.();
  });
});
