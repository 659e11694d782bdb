/**
 * The local worker loop of `serve` (lib/runtime/local-worker.ts) over the real SQLite queue with a short visibility
 * timeout: a message whose work outlasts the visibility timeout stays the worker's (a heartbeat extends it) until it
 * is handed back, so it is worked once — never re-run, never dead-lettered — and a hand-back the queue refuses is an
 * error, logged with the message id and counted, never ignored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METRICS, memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { changesByCluster } from '../../../lib/pipeline/intake.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import type { LocalRolloutQueue } from '../../../lib/queue/local-queue.ts';
import { rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { memoryRolloutQueue, SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { startLocalWorker } from '../../../lib/runtime/local-worker.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);

// Long enough that a loaded CI machine's event-loop stalls (a third of it between heartbeats) never let it lapse.
const VISIBILITY_MS = 600;
/** Every read of the cluster takes this long: one attempt lasts several visibility timeouts. */
const SLOW_READ_MS = 4 * VISIBILITY_MS;

const dir = mkdtempSync(join(tmpdir(), 'vr-local-worker-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

const change = (key: string, version: number): SecretChange => kvWrite(key, version);

async function queueChange(queue: LocalRolloutQueue, c: SecretChange): Promise<void> {
  const plan = planRollouts(table, [c]);
  await queue.send(
    [...changesByCluster([c], plan)].flatMap(([cluster, cs]) => rolloutMessages(cluster, cs, '2026-11-20T10:00:01Z')),
  );
}

/** The fake cluster with every read delayed: the worker's step takes longer than the visibility timeout. */
function slowCluster() {
  const fake = fakeClusters({ a: ['api'] });
  const apiFor: typeof fake.apiFor = (access) => {
    const api = fake.apiFor(access);
    return {
      ...api,
      read: async (...args: Parameters<typeof api.read>) => (
        await new Promise((r) => setTimeout(r, SLOW_READ_MS)),
        api.read(...args)
      ),
    };
  };
  return { fake, apiFor };
}

describe.each([
  [
    'SqliteRolloutQueue',
    () =>
      new SqliteRolloutQueue({
        file: join(dir, `q${++files}.sqlite`),
        visibilityTimeoutMs: VISIBILITY_MS,
        maxReceiveCount: 2,
      }),
  ],
  [
    'SqliteRolloutQueue in memory',
    () => memoryRolloutQueue({ visibilityTimeoutMs: VISIBILITY_MS, maxReceiveCount: 2 }),
  ],
] as Array<[string, () => LocalRolloutQueue]>)('startLocalWorker on %s', (_name, makeQueue) => {
  it('works a message that outlasts the visibility timeout once: no re-run, no dead letter', async () => {
    const queue = makeQueue();
    const { fake, apiFor } = slowCluster();
    const telemetry = memoryTelemetry();
    const worker = startLocalWorker(
      queue,
      { table, rotations: new MemoryRotationStore(), telemetry, executor: options(apiFor) },
      { pollMs: 20 },
    );
    try {
      await queueChange(queue, change('api', 1));
      await worker.idle();
    } finally {
      await worker.stop();
    }
    expect(queue.deadLetters()).toEqual([]);
    expect(queue.counts()).toEqual({ available: 0, inFlight: 0, deadLetters: 0 });
    // One attempt: one read of the workload and one patch, not a second run finding it unchanged.
    expect(fake.calls.filter((c) => c.op === 'read')).toHaveLength(1);
    expect(fake.calls.filter((c) => c.op === 'patch' && c.dryRun !== true)).toHaveLength(1);
    expect(telemetry.lines.filter((l) => l.level === 'error')).toEqual([]);
    queue.close();
  }, 30_000);
});

describe('startLocalWorker: the queue took a message back before the worker handed it back', () => {
  it.each([
    // The heartbeat is refused while the work goes on (the lease was lost): said at once, not at the hand-back.
    ['extendVisibility', true],
    // The hand-back itself is refused.
    ['delete', false],
  ] as const)(
    '%s answering false is an error with the message id and a VisibilityLost metric',
    async (operation, slow) => {
      const queue = Object.assign(memoryRolloutQueue({ visibilityTimeoutMs: VISIBILITY_MS }), {
        [operation]: async () => false,
      });
      const { fake, apiFor } = slowCluster();
      const telemetry = memoryTelemetry();
      const worker = startLocalWorker(
        queue,
        { table, rotations: new MemoryRotationStore(), telemetry, executor: options(slow ? apiFor : fake.apiFor) },
        { pollMs: 20 },
      );
      try {
        await queueChange(queue, change('api', 1));
        // Bounded wait for the first error line (at most 10 s), then stop before any redelivery is worked.
        for (let i = 0; i < 1000 && !telemetry.lines.some((l) => l.level === 'error'); i++)
          await new Promise((r) => setTimeout(r, 10));
      } finally {
        await worker.stop();
      }
      const [first] = telemetry.lines.filter((l) => l.level === 'error');
      expect(first).toEqual({
        level: 'error',
        message:
          'the queue took back a message the worker had not handed back: it will be redelivered, and its restarts are recorded, so this worker does nothing more with it',
        fields: { messageId: expect.stringMatching(/^[0-9a-f-]{36}$/), group: 'a', operation },
      });
      expect(telemetry.metrics.filter((m) => m.name === METRICS.visibilityLost).length).toBeGreaterThanOrEqual(1);
      queue.close();
    },
    30_000,
  );
});
