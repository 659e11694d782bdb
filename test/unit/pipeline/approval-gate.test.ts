/**
 * A gate with `rollout.gate.approval` in the worker (processBatch), with the real rotation stores and the in-memory
 * cluster of the unit tests: it asks once the wave is complete (a request in the store, one notification carrying the
 * command), keeps waiting without one, is not approved by anything a message says, and releases the next wave once
 * after `approve` recorded it in the store.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { parseEvent } from '../../../lib/notify/event.ts';
import { changeSets, firstWaveMessages } from '../../../lib/pipeline/intake.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { memoryRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { isGateMessage, messageGroupId, type QueueMessage } from '../../../lib/queue/rollout-message.ts';
import { MemoryNotificationOutbox } from '../../../lib/rotations/notification-outbox.ts';
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
  gate: { timeout: 2m, approval: true }
notifications:
  sinks:
    ops: { type: slack, urlFromEnv: SLACK_URL }
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha, gamma], namespace: ns, kind: Deployment, name: api }]
`);

const T0 = Date.parse('2026-11-20T10:00:00Z');
const change: SecretChange = kvWrite('app/db', 2, { id: 'id-2' });
const rotation = changeSets(table, [change], planRollouts(table, [change]))[0]?.key ?? '';

let n = 0;
const recordOf = (m: QueueMessage): QueueRecord => ({
  messageId: `m${++n}`,
  body: JSON.stringify(m),
  groupId: messageGroupId(m),
});

function world(rotations: RotationStore) {
  const fake = fakeClusters({ gamma: ['api'], alpha: ['api'] });
  const clock = { now: T0 };
  const queue = memoryRolloutQueue();
  const outbox = new MemoryNotificationOutbox();
  const deps = {
    table,
    rotations,
    queue,
    telemetry: memoryTelemetry(),
    executor: options(fake.apiFor, { clock: { now: () => clock.now, monotonic: () => 0 } }),
    notifications: { outbox },
    now: () => clock.now,
  };
  const patched = () =>
    fake.calls
      .filter((c) => c.op === 'patch')
      .map((c) => c.cluster)
      .sort();
  const complete = () =>
    fake.update('gamma/api', (o) => ({
      ...o,
      metadata: { ...o.metadata, generation: 2 },
      status: { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
    }));
  const events = async () =>
    (await outbox.takeDue(Number.MAX_SAFE_INTEGER - 10, 1000, 1)).map((d) => parseEvent(d.body));
  return { deps, clock, queue, patched, complete, events };
}

describe.each([
  ['memory', () => new MemoryRotationStore()],
  ['sqlite', () => new SqliteRotationStore(join(mkdtempSync(join(tmpdir(), 'vr-approve-')), 'rotations.sqlite'))],
] as const)('an approval gate in the worker (%s rotation store)', (_, make) => {
  it('asks once the wave is complete, waits without an approval, and releases the next wave once after it', async () => {
    const rotations = make();
    const w = world(rotations);
    const first = firstWaveMessages(table, [change], planRollouts(table, [change]), new Date(T0).toISOString());
    await processBatch(first.filter((m) => !isGateMessage(m)).map(recordOf), w.deps);
    expect(w.patched()).toEqual(['gamma']);
    const gate = recordOf(first.find(isGateMessage) as QueueMessage);

    // Still rolling: no request yet.
    const rolling = await processBatch([gate], w.deps);
    expect(rolling.deferred).toHaveLength(1);
    expect(await rotations.approvals?.pending()).toEqual([]);

    w.complete();
    w.clock.now = T0 + 30_000;
    const asked = await processBatch([{ ...gate, receiveCount: 2 }], w.deps);
    expect(asked.deferred).toMatchObject([{ delayMs: 10_000 }]);
    expect(await rotations.approvals?.pending()).toMatchObject([
      { rotation, wave: 2, waves: 2, since: new Date(T0 + 30_000).toISOString(), secrets: ['secret/app/db version 2'] },
    ]);
    const [event] = await w.events();
    expect(event).toMatchObject({
      kind: 'approval-requested',
      rotation,
      wave: 2,
      command: `vault-rollout approve ${rotation} --wave 2`,
    });

    // Looked at again: the first request's time stays, no second notification, nothing released.
    w.clock.now = T0 + 45_000;
    await processBatch([{ ...gate, receiveCount: 3 }], w.deps);
    expect((await rotations.approvals?.get(rotation, 2))?.since).toBe(new Date(T0 + 30_000).toISOString());
    expect(await w.events()).toEqual([]);
    expect(await rotations.releasedWave(rotation)).toBe(0);
    expect(w.patched()).toEqual(['gamma']);

    await rotations.approvals?.approve(rotation, 2, 'alice', new Date(T0 + 50_000).toISOString());
    w.clock.now = T0 + 55_000;
    const released = await processBatch([{ ...gate, receiveCount: 4 }], w.deps);
    expect(released.deferred).toEqual([]);
    expect(await rotations.releasedWave(rotation)).toBe(1);
    const next = await w.queue.receive({ max: 10 });
    await processBatch(next, w.deps);
    expect(w.patched()).toEqual(['alpha', 'gamma']);
  });
});
