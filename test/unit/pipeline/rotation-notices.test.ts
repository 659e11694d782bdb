/** Which rotation events the worker writes to the outbox: once per event, whatever is redelivered; never holding a rotation. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RolloutResult } from '../../../lib/engine/types.ts';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { parseEvent } from '../../../lib/notify/event.ts';
import { noticeDeadLetters, noticeHalt, noticeLook, sinksFor } from '../../../lib/pipeline/rotation-notices.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { changeSets } from '../../../lib/plan/cluster-changes.ts';
import { rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { memoryRolloutQueue, SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { MemoryNotificationOutbox, type NotificationOutbox } from '../../../lib/rotations/notification-outbox.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
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
notifications:
  sinks:
    ops: { type: slack, urlFromEnv: SLACK_URL }
routes:
  - name: app
    match: { path: "secret/app/db" }
    notifications:
      sinks:
        audit: { type: webhook, url: "https://audit.example.com/in", secretFromEnv: AUDIT_KEY }
      events: [halted, complete, rollout-failed, target-failed, dead-letter]
    targets: [{ clusters: [alpha, beta, gamma], namespace: ns, kind: Deployment, name: api }]
`);

const change = (version: number): SecretChange => kvWrite('app/db', version, { id: `id-${version}` });
const setOf = (c: SecretChange) => changeSets(table, [c], planRollouts(table, [c]))[0];
let n = 0;
const message = (cluster: string, c: SecretChange): QueueRecord => {
  const [m] = rolloutMessages(cluster, [c], '2026-11-20T10:00:01Z');
  return { messageId: `m${++n}`, body: JSON.stringify(m), groupId: cluster };
};

/** What a delivery pass would send now; each is then marked sent, as the pass does (so a second emit would show again). */
async function events(outbox: NotificationOutbox) {
  const due = await outbox.takeDue(Number.MAX_SAFE_INTEGER - 10, 1000, 1);
  for (const d of due) await outbox.sent(d.eventId, d.sink);
  return due
    .map((d) => ({ sink: d.sink, kind: parseEvent(d.body)?.kind, event: parseEvent(d.body) }))
    .sort((a, b) => a.sink.localeCompare(b.sink));
}

function worker(outbox: NotificationOutbox) {
  const rotations = new MemoryRotationStore();
  const fake = fakeClusters({ gamma: ['api'], alpha: ['api'], beta: ['api'] });
  const deps = {
    table,
    rotations,
    telemetry: memoryTelemetry(),
    executor: options(fake.apiFor),
    notifications: { outbox },
    deadLetter: async () => {},
  };
  return {
    deps,
    rotations,
    patched: () =>
      fake.calls
        .filter((c) => c.op === 'patch')
        .map((c) => c.cluster)
        .sort(),
  };
}

describe('rotation notifications', () => {
  it("sinks: the route's own (added to the top level's) for the kinds it sends; the top level's for events of no route", () => {
    expect(sinksFor(table, 'complete', ['app'])).toEqual(['audit', 'ops']);
    expect(sinksFor(table, 'progressing', ['app'])).toEqual([]);
    expect(sinksFor(table, 'dead-letter', [])).toEqual(['ops']);
  });

  it("rotation complete: once, when every wave's cluster finished — not before, and not again on a redelivery", async () => {
    const outbox = new MemoryNotificationOutbox();
    const w = worker(outbox);
    const c = change(2);
    const key = setOf(c)?.key ?? '';
    await processBatch([message('gamma', c)], w.deps);
    await w.rotations.releaseWave(key, 2);
    await processBatch([message('alpha', c)], w.deps);
    expect(await events(outbox)).toEqual([]);
    await processBatch([message('beta', c)], w.deps);
    const got = await events(outbox);
    expect(got.map((e) => [e.sink, e.kind])).toEqual([
      ['audit', 'complete'],
      ['ops', 'complete'],
    ]);
    expect(got[0]?.event).toMatchObject({
      rotation: key,
      route: 'app',
      waves: 3,
      clusters: ['gamma', 'alpha', 'beta'],
      secrets: ['secret/app/db version 2'],
    });
    // Redeliveries of every cluster's message: the workloads are unchanged, the rotation finishes again, the event
    // is already recorded: nothing more to send.
    await processBatch([message('beta', c), message('gamma', c)], w.deps);
    await processBatch([message('alpha', c)], w.deps);
    expect(w.patched()).toEqual(['alpha', 'beta', 'gamma']);
    expect(await events(outbox)).toEqual([]);
  });

  it('a failed rollout: one rollout-failed per workload (a timeout seen again, or the continuation expiring, is the same event), and no complete', async () => {
    const outbox = new MemoryNotificationOutbox();
    const w = worker(outbox);
    const c = change(3);
    const plan = planRollouts(table, [c]);
    const result = (cluster: string, extra: Partial<RolloutResult>): RolloutResult => ({
      cluster,
      namespace: 'ns',
      kind: 'Deployment',
      name: 'api',
      outcome: 'restarted',
      reason: '',
      attempts: 1,
      durationMs: 1,
      routes: ['app'],
      paths: ['secret/app/db'],
      restartToken: 't',
      ...extra,
    });
    const looked = (cluster: string) => ({
      cluster,
      changes: [c],
      plan,
      targets: plan.targets.filter((t) => t.cluster === cluster),
    });
    await noticeLook(
      w.deps,
      looked('gamma'),
      [result('gamma', { rollout: 'timeout', rolloutReason: '0 of 1 new pods Ready' })],
      { sinceMs: 0, finished: true },
    );
    const first = await events(outbox);
    await noticeLook(w.deps, looked('gamma'), [], {
      sinceMs: 0,
      finished: false,
      expired: [result('gamma', { rollout: 'progressing' })],
    });
    expect(await events(outbox)).toEqual([]);
    for (const cluster of ['alpha', 'beta'])
      await noticeLook(w.deps, looked(cluster), [result(cluster, { rollout: 'complete' })], {
        sinceMs: 0,
        finished: true,
      });
    await noticeLook(
      w.deps,
      looked('alpha'),
      [result('alpha', { outcome: 'failed', reason: 'forbidden', detail: 'patch refused' })],
      { sinceMs: 0, finished: false },
    );
    const got = [...first, ...(await events(outbox))];
    expect(got.filter((e) => e.sink === 'ops').map((e) => [e.kind, e.event?.cluster, e.event?.reason])).toEqual([
      ['rollout-failed', 'gamma', 'rollout timeout: 0 of 1 new pods Ready'],
      ['target-failed', 'alpha', 'forbidden: patch refused'],
    ]);
  });

  it('halted: one event per rotation and wave, however often the gate is worked again', async () => {
    const outbox = new MemoryNotificationOutbox();
    const w = worker(outbox);
    const halt = {
      secrets: ['secret/app/db version 4'],
      wave: 1,
      waves: 3,
      failing: { cluster: 'gamma', namespace: 'ns', kind: 'Deployment', name: 'api', state: 'failed' as const },
      why: 'rollout failed: ProgressDeadlineExceeded',
      notRestarted: ['alpha', 'beta'],
    };
    await noticeHalt(w.deps, { key: 'rot1', route: 'app' }, halt);
    const got = await events(outbox);
    await noticeHalt(w.deps, { key: 'rot1', route: 'app' }, halt);
    expect(await events(outbox)).toEqual([]);
    expect(got.map((e) => [e.sink, e.kind])).toEqual([
      ['audit', 'halted'],
      ['ops', 'halted'],
    ]);
    expect(got[0]?.event).toMatchObject({
      rotation: 'rot1',
      wave: 1,
      waves: 3,
      cluster: 'gamma',
      workload: { namespace: 'ns', kind: 'Deployment', name: 'api' },
      notRestarted: ['alpha', 'beta'],
    });
  });

  it('dead letter: a refused message, once per message id, to the top-level sinks', async () => {
    const outbox = new MemoryNotificationOutbox();
    const w = worker(outbox);
    const forged = message('beta', change(5));
    await processBatch([forged], w.deps);
    const got = await events(outbox);
    await processBatch([forged], w.deps);
    expect(await events(outbox)).toEqual([]);
    expect(got.map((e) => [e.sink, e.kind])).toEqual([['ops', 'dead-letter']]);
    expect(got[0]?.event?.reason).toContain('cluster "beta" is in wave 3 of 3');
  });

  it.each([
    ['in-memory', () => memoryRolloutQueue({ maxReceiveCount: 2 })],
    [
      'SQLite file (serve)',
      () =>
        new SqliteRolloutQueue({
          file: join(mkdtempSync(join(tmpdir(), 'vr-notices-')), 'queue.sqlite'),
          maxReceiveCount: 2,
        }),
    ],
  ])(
    'dead letter: a message the %s queue dead-letters after its redrive limit, once per message id, however often it is read',
    async (_, makeQueue) => {
      const outbox = new MemoryNotificationOutbox();
      const w = worker(outbox);
      const queue = makeQueue();
      await queue.send(rolloutMessages('gamma', [change(7)], '2026-11-20T10:00:01Z'));
      for (let i = 0; i < 2; i++) {
        const [m] = await queue.receive({ max: 1 });
        expect(m).toBeDefined();
        await queue.release(m?.receiptHandle ?? '');
      }
      const [letter] = queue.deadLetters();
      expect(letter?.reason).toBeUndefined();
      expect(await noticeDeadLetters(w.deps, queue, 0)).toBe(1);
      const got = await events(outbox);
      // Read again (the next sweep, a restarted serve): nothing more.
      expect(await noticeDeadLetters(w.deps, queue, 0)).toBe(1);
      expect(await events(outbox)).toEqual([]);
      expect(got.map((e) => [e.sink, e.kind, e.event?.rotation])).toEqual([['ops', 'dead-letter', letter?.messageId]]);
      expect(got[0]?.event?.reason).toBe(
        "group gamma: received 2 times without being worked (the queue's redrive limit)",
      );
      // Only those dead-lettered since the time asked.
      expect(await noticeDeadLetters(w.deps, queue, (letter?.deadLetteredAt ?? 0) + 1)).toBe(0);
    },
  );

  it('an outbox that fails holds nothing back: the restart happens, the failure is a warning', async () => {
    const broken: NotificationOutbox = {
      ...new MemoryNotificationOutbox(),
      enqueueOnce: () => Promise.reject(new Error('disk full')),
      note: () => Promise.reject(new Error('disk full')),
      notes: () => Promise.resolve([]),
      takeDue: () => Promise.resolve([]),
      take: () => Promise.resolve('done' as const),
      sent: () => Promise.resolve(),
      failed: () => Promise.resolve(),
    };
    const w = worker(broken);
    const out = await processBatch([message('gamma', change(6))], w.deps);
    expect(out.failed).toEqual([]);
    expect(w.patched()).toEqual(['gamma']);
    expect(
      w.deps.telemetry.lines.some((l) => l.level === 'warn' && l.message.startsWith('could not queue a notification')),
    ).toBe(true);
  });
});
