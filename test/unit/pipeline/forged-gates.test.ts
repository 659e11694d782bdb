/**
 * A gate's clock is the rotation store's, never its message's: a queue sender can write any `since`, `completeAt` or
 * `lookAt` into a gate message. Each case sends the forged gate the way the security review did, straight to the
 * worker (processBatch), with the real rotation stores and the in-memory cluster of the unit tests.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { changeSets, firstWaveMessages } from '../../../lib/pipeline/intake.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { memoryRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import {
  deduplicationId,
  gateGroupId,
  isGateMessage,
  messageGroupId,
  queuedChange,
  ROLLOUT_MESSAGE_VERSION,
  type GateMessage,
  type QueueMessage,
} from '../../../lib/queue/rollout-message.ts';
import { MemoryRotationStore, type RotationStore } from '../../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  gamma: { kubeconfig: { env: C } }
  alpha: { kubeconfig: { env: A } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }]
  gate: { timeout: 2m, pause: 10m }
  onFailure: halt
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha, gamma], namespace: ns, kind: Deployment, name: api }]
`);

const T0 = Date.parse('2026-11-20T10:00:00Z');
const change = (version: number): SecretChange => kvWrite('app/db', version, { id: `id-${version}` });
const rotationOf = (c: SecretChange): string => changeSets(table, [c], planRollouts(table, [c]))[0]?.key ?? '';

let n = 0;
const recordOf = (m: QueueMessage): QueueRecord => ({
  messageId: `m${++n}`,
  body: JSON.stringify(m),
  groupId: messageGroupId(m),
});
const forgedGate = (c: SecretChange, extra: Partial<GateMessage>): QueueRecord =>
  recordOf({
    v: ROLLOUT_MESSAGE_VERSION,
    kind: 'gate',
    changes: [queuedChange(c)],
    wave: 0,
    acceptedAt: '1970-01-01T00:00:00Z',
    round: 0,
    ...extra,
  });

function world(rotations: RotationStore) {
  const fake = fakeClusters({ gamma: ['api'], alpha: ['api'] });
  const clock = { now: T0 };
  const queue = memoryRolloutQueue();
  const deps = {
    table,
    rotations,
    queue,
    telemetry: memoryTelemetry(),
    executor: options(fake.apiFor, { clock: { now: () => clock.now, monotonic: () => 0 } }),
    now: () => clock.now,
  };
  const patched = () =>
    fake.calls
      .filter((c) => c.op === 'patch')
      .map((c) => c.cluster)
      .sort();
  /** gamma's api as its controller reports it once every new pod is available. */
  const complete = () =>
    fake.update('gamma/api', (o) => ({
      ...o,
      metadata: { ...o.metadata, generation: 2 },
      status: { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
    }));
  const queued = async () => (await queue.receive({ max: 10 })).map((m) => JSON.parse(m.body) as QueueMessage);
  return { deps, clock, patched, complete, queued };
}

describe.each([
  ['memory', () => new MemoryRotationStore()],
  [
    'sqlite',
    () => new SqliteRotationStore(join(mkdtempSync(join(tmpdir(), 'vr-gates-')), 'state', 'rotations.sqlite')),
  ],
] as const)('forged gate times (%s rotation store)', (_, make) => {
  it('a forged wave-1 gate with since 1970 halts nothing, even for a version not written yet; the real rotation then runs', async () => {
    const rotations = make();
    const w = world(rotations);
    // Version 3 is not written yet: nothing of its rotation started.
    const out = await processBatch([forgedGate(change(3), { since: '1970-01-01T00:00:00Z' })], w.deps);
    expect(out.halts).toEqual([]);
    expect(await rotations.halts()).toEqual([]);
    expect(out.refused).toEqual([]);
    expect(await rotations.releasedWave(rotationOf(change(3)))).toBe(0);
    // Then version 3 is written: its first wave restarts, refused by no halt.
    const real = firstWaveMessages(table, [change(3)], planRollouts(table, [change(3)]), new Date(T0).toISOString());
    const worked = await processBatch(real.filter((m) => !isGateMessage(m)).map(recordOf), w.deps);
    expect(worked.refused).toEqual([]);
    expect(w.patched()).toEqual(['gamma']);
  });

  it("a forged completeAt of 1970 does not skip the pause: the next wave is released once the store's pause is over", async () => {
    const rotations = make();
    const w = world(rotations);
    const real = firstWaveMessages(table, [change(2)], planRollouts(table, [change(2)]), new Date(T0).toISOString());
    await processBatch(real.filter((m) => !isGateMessage(m)).map(recordOf), w.deps);
    expect(w.patched()).toEqual(['gamma']);
    expect((await rotations.waveTimes(rotationOf(change(2)), 0)).startedAt).toBe(new Date(T0).toISOString());
    w.complete();
    w.clock.now = T0 + 60_000;
    const forged = await processBatch(
      [forgedGate(change(2), { since: '1970-01-01T00:00:00Z', completeAt: '1970-01-01T00:00:00Z' })],
      w.deps,
    );
    expect(forged.halts).toEqual([]);
    expect(await rotations.releasedWave(rotationOf(change(2)))).toBe(0);
    expect(await w.queued()).toEqual([]);
    // The wave was first seen complete at T0 + 1 min: the 10 min pause ends at T0 + 11 min, whatever a message says.
    expect((await rotations.waveTimes(rotationOf(change(2)), 0)).completeAt).toBe(new Date(T0 + 60_000).toISOString());
    w.clock.now = T0 + 10 * 60_000;
    await processBatch([forgedGate(change(2), { completeAt: '1970-01-01T00:00:00Z', round: 1 })], w.deps);
    expect(await rotations.releasedWave(rotationOf(change(2)))).toBe(0);
    w.clock.now = T0 + 11 * 60_000 + 1;
    await processBatch([forgedGate(change(2), { round: 2 })], w.deps);
    expect(await rotations.releasedWave(rotationOf(change(2)))).toBe(1);
    expect((await w.queued()).map((m) => (isGateMessage(m) ? 'gate' : m.cluster))).toEqual(['alpha']);
    // The passed wave's times are forgotten: a later run of the same rotation times it afresh.
    expect(await rotations.waveTimes(rotationOf(change(2)), 0)).toEqual({});
    expect((await rotations.waveTimes(rotationOf(change(2)), 1)).startedAt).toBe(
      new Date(T0 + 11 * 60_000 + 1).toISOString(),
    );
  });

  it("halts a started rotation when its wave is not complete by the store's gate.timeout", async () => {
    const rotations = make();
    const w = world(rotations);
    const real = firstWaveMessages(table, [change(4)], planRollouts(table, [change(4)]), new Date(T0).toISOString());
    await processBatch(real.filter((m) => !isGateMessage(m)).map(recordOf), w.deps);
    // A forged `since` of now does not push the timeout back either.
    w.clock.now = T0 + 2 * 60_000 + 1;
    const out = await processBatch([forgedGate(change(4), { since: new Date(w.clock.now).toISOString() })], w.deps);
    expect(out.halts.map((h) => h.why)).toEqual([expect.stringContaining('not complete 120 s after the wave started')]);
    expect((await rotations.halts()).map((h) => h.rotation)).toEqual([rotationOf(change(4))]);
  });
});

describe("a forged gate cannot take a real gate's deduplication id", () => {
  it('the id covers what the worker reads from a gate (its changes, wave, round, when to look), and nothing else', () => {
    const real: GateMessage = {
      v: ROLLOUT_MESSAGE_VERSION,
      kind: 'gate',
      changes: [queuedChange(change(2))],
      wave: 0,
      acceptedAt: '2026-11-20T10:00:01Z',
      round: 0,
    };
    // Held until a far-off time, a forged copy sent first would have kept the real gate out of the queue.
    expect(deduplicationId({ ...real, lookAt: '2099-01-01T00:00:00Z' })).not.toBe(deduplicationId(real));
    // Times the worker ignores leave the id alone: a copy that differs only there does exactly what the real one does.
    expect(
      deduplicationId({ ...real, since: '1970-01-01T00:00:00Z', completeAt: '1970-01-01T00:00:00Z', acceptedAt: 'x' }),
    ).toBe(deduplicationId(real));
    expect(messageGroupId(real)).toBe(gateGroupId(real.changes));
  });
});
