/**
 * Maintenance windows in the worker: a change outside its window leaves the cluster's group for the window's, a
 * window message is looked at again (never restarted) while the window is closed whatever it claims, and the changes
 * that waited for one opening restart once, onto the newest version.
 */
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { processBatch, type QueueRecord, type WorkerDeps } from '../../../lib/pipeline/worker.ts';
import {
  gateGroupId,
  queuedChange,
  messageGroupId,
  parseRolloutMessage,
  rolloutMessages,
  windowGroupId,
  type QueueMessage,
  type RolloutMessage,
} from '../../../lib/queue/rollout-message.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

// Mondays 22:00-23:00 UTC; 2026-11-30 is a Monday.
const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    rollout: { window: { days: [Mon], from: "22:00", to: "23:00", timeZone: UTC } }
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);
const OPENS = '2026-11-30T22:00:00.000Z';

const change = (version: number): SecretChange =>
  kvWrite('api', version, { id: `id-api-${version}`, time: '2026-11-30T10:00:00Z' });

let n = 0;
const record = (m: RolloutMessage, receiveCount = 1): QueueRecord => ({
  messageId: `m${++n}`,
  body: JSON.stringify(m),
  groupId: messageGroupId(m),
  receiveCount,
});
const clusterMessage = (version: number) => rolloutMessages('a', [change(version)], '2026-11-30T10:00:01Z')[0]!;

function deps(at: string, sent: QueueMessage[]) {
  const fake = fakeClusters({ a: ['api'] });
  const d: WorkerDeps = {
    table,
    rotations: new MemoryRotationStore(),
    telemetry: memoryTelemetry(),
    executor: options(fake.apiFor),
    now: () => Date.parse(at),
    queue: { send: async (ms) => void sent.push(...ms) },
  };
  return { d, fake };
}

describe('the worker and maintenance windows', () => {
  it("moves a change outside its window to the window's group, restarting nothing", async () => {
    const sent: QueueMessage[] = [];
    const { d } = deps('2026-11-30T10:00:00Z', sent);
    const out = await processBatch([record(clusterMessage(2))], d);
    expect(out.results).toEqual([]);
    expect(out.failed).toEqual([]);
    expect(sent).toHaveLength(1);
    const copy = sent[0] as RolloutMessage;
    expect(copy.window).toEqual({ opensAt: OPENS, round: 0, lookAt: '2026-11-30T10:15:00.000Z' });
    expect(messageGroupId(copy)).toBe(windowGroupId('a', OPENS));
    expect(parseRolloutMessage(JSON.stringify(copy))).toEqual(copy);
  });

  it('holds a window message whose window is still closed, whatever lookAt it claims', async () => {
    const sent: QueueMessage[] = [];
    const { d } = deps('2026-11-30T21:50:00Z', sent);
    const forged = {
      ...clusterMessage(2),
      window: { opensAt: '2026-11-30T09:00:00.000Z', round: 0, lookAt: '2026-11-30T09:00:00.000Z' },
    };
    const out = await processBatch([record(forged)], d);
    expect(out.results).toEqual([]);
    expect(out.deferred.map((x) => x.delayMs)).toEqual([10 * 60_000]);
  });

  it('works the changes that waited for one opening as one plan: one restart, onto the newest version', async () => {
    const sent: QueueMessage[] = [];
    const { d } = deps('2026-11-30T22:00:00Z', sent);
    const waiting = (version: number) => ({
      ...clusterMessage(version),
      window: { opensAt: OPENS, round: 1, lookAt: OPENS },
    });
    const out = await processBatch([record(waiting(2)), record(waiting(3))], d);
    expect(out.failed).toEqual([]);
    expect(out.results.map((r) => `${r.name}:${r.outcome}`)).toEqual(['api:restarted']);
    expect(JSON.stringify(out.results[0]?.paths)).toContain('secret/api');
    expect(sent).toEqual([]);
  });

  it('a worker that does not wait for windows (reconcile here) tells and acknowledges, queueing nothing', async () => {
    const sent: QueueMessage[] = [];
    const told: unknown[] = [];
    const { d } = deps('2026-11-30T10:00:00Z', sent);
    const out = await processBatch([record(clusterMessage(2))], { ...d, windowClosed: (w) => void told.push(w) });
    expect({ results: out.results, deferred: out.deferred, failed: out.failed, sent }).toEqual({
      results: [],
      deferred: [],
      failed: [],
      sent: [],
    });
    expect(told).toEqual([{ cluster: 'a', window: 'Mon 22:00-23:00 UTC', opensAt: OPENS }]);
  });

  it('restarts at once inside the window', async () => {
    const { d } = deps('2026-11-30T22:30:00Z', []);
    const out = await processBatch([record(clusterMessage(2))], d);
    expect(out.results.map((r) => r.outcome)).toEqual(['restarted']);
  });

  it('a gate of a wave waiting for its window looks again when the window opens, not every few seconds', async () => {
    const waved = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    rollout:
      waves:
        - clusters: [a]
          window: { days: [Mon], from: "22:00", to: "23:00", timeZone: UTC }
        - clusters: [b]
    targets: [{ clusters: [a, b], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);
    const changes = [queuedChange(change(2))];
    const gate = {
      v: 2 as const,
      kind: 'gate' as const,
      changes,
      wave: 0,
      acceptedAt: '2026-11-30T10:00:01Z',
      round: 0,
    };
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const at = (iso: string) =>
      processBatch(
        [{ messageId: `g${++n}`, body: JSON.stringify(gate), groupId: gateGroupId(changes), receiveCount: 1 }],
        {
          table: waved,
          rotations: new MemoryRotationStore(),
          telemetry: memoryTelemetry(),
          executor: options(fake.apiFor),
          now: () => Date.parse(iso),
          queue: { send: async () => undefined },
        },
      );
    expect((await at('2026-11-30T21:55:00Z')).deferred.map((x) => x.delayMs)).toEqual([5 * 60_000]);
    expect((await at('2026-11-30T10:00:00Z')).deferred.map((x) => x.delayMs)).toEqual([15 * 60_000]);
  });
});
