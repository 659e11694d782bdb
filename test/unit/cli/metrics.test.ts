/** The samplers behind /metrics (serve's queue, the relay) and the scrape listener of worker and relay. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { queueSampler, relaySampler } from '../../../lib/cli/metrics.ts';
import { METRICS } from '../../../lib/kernel/telemetry.ts';
import { startMetricsServer } from '../../../lib/observability/metrics-server.ts';
import { PrometheusMetrics } from '../../../lib/observability/prometheus.ts';
import {
  followUpMessage,
  queuedChange,
  rolloutMessages,
  ROLLOUT_MESSAGE_VERSION,
  type GateMessage,
} from '../../../lib/queue/rollout-message.ts';
import { SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { RelayCounters } from '../../../lib/relay/counters.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { kvWrite } from '../../secret-changes.ts';

const change = (key: string, version: number): SecretChange => kvWrite(key, version);
const NOW = Date.parse('2026-11-20T10:10:00Z');
const byName = (samples: ReadonlyArray<{ name: string; value: number; labels?: object }>) =>
  Object.fromEntries(samples.map((s) => [`${s.name}${s.labels ? JSON.stringify(s.labels) : ''}`, s.value]));

describe("queueSampler on serve's SQLite queue", () => {
  it('an empty queue: zero depth, zero ages', async () => {
    const queue = new SqliteRolloutQueue({ file: ':memory:' });
    expect(byName(await queueSampler(queue, () => NOW)())).toEqual({
      'QueueDepth{"state":"available"}': 0,
      'QueueDepth{"state":"in_flight"}': 0,
      QueueOldestMessageAge: 0,
      ContinuationsPending: 0,
      ContinuationOldestAge: 0,
      DeadLetters: 0,
    });
    queue.close();
  });

  it('depth by state, the oldest change waiting (not a continuation or a gate), continuations and their oldest', async () => {
    const queue = new SqliteRolloutQueue({ file: ':memory:' });
    const [older] = rolloutMessages('a', [change('api', 1)], '2026-11-20T10:05:00Z');
    const [newer] = rolloutMessages('b', [change('web', 1)], '2026-11-20T10:08:00Z');
    // A continuation of a change accepted long ago: its age counts from its step, and not as a change waiting.
    const [first] = rolloutMessages('a', [change('db', 1)], '2026-11-20T09:00:00Z');
    const continuation = followUpMessage(first!, '2026-11-20T10:09:00Z', ['ns/Deployment/db']);
    const gate: GateMessage = {
      v: ROLLOUT_MESSAGE_VERSION,
      kind: 'gate',
      changes: [queuedChange(change('api', 1))],
      wave: 0,
      since: '2026-11-20T08:00:00Z',
      acceptedAt: '2026-11-20T08:00:00Z',
      round: 0,
    };
    await queue.send([older!, newer!, continuation, gate]);
    await queue.receive({ max: 1 });
    expect(byName(await queueSampler(queue, () => NOW)())).toEqual({
      'QueueDepth{"state":"available"}': 3,
      'QueueDepth{"state":"in_flight"}': 1,
      QueueOldestMessageAge: 5 * 60_000,
      ContinuationsPending: 1,
      ContinuationOldestAge: 60_000,
      DeadLetters: 0,
    });
    queue.close();
  });
});

describe('relaySampler', () => {
  it("the counters as totals, the spool bytes, and the oldest spooled batch's age", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vr-relay-metrics-'));
    const file = join(dir, '0000000000000001.audit.ndjson');
    writeFileSync(file, 'x\n');
    const counters = new RelayCounters();
    counters.received = 10;
    counters.spooled = 9;
    counters.delivered = 4;
    counters.drop('spool-full', 1);
    const spool = { usedBytes: 2048, entries: () => [{ seq: 1, kind: 'audit' as const, file, bytes: 2 }] };
    const now = Date.now() + 3000;
    const samples = byName(await relaySampler({ counters, spool } as never, () => now)());
    expect(samples).toMatchObject({
      'RelayRecords{"stage":"received"}': 10,
      'RelayRecords{"stage":"spooled"}': 9,
      'RelayRecords{"stage":"delivered"}': 4,
      'RelayRecordsDropped{"reason":"spool-full"}': 1,
      RelaySpoolBytes: 2048,
    });
    expect(samples.RelayDeliveryLag).toBeGreaterThanOrEqual(3000);
    expect(samples.RelayDeliveryLag).toBeLessThan(60_000);
    // Delivered and removed meanwhile: nothing waits.
    expect(
      byName(
        await relaySampler({
          counters,
          spool: { usedBytes: 0, entries: () => [{ seq: 2, kind: 'audit', file: join(dir, 'gone'), bytes: 1 }] },
        } as never)(),
      ).RelayDeliveryLag,
    ).toBe(0);
  });
});

describe('the scrape listener', () => {
  it('answers GET /metrics in the text format and 404 to anything else', async () => {
    const metrics = new PrometheusMetrics({ processMetrics: false });
    metrics.record(METRICS.haltedRotations, 1);
    const server = await startMetricsServer(metrics, '127.0.0.1', 0);
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      expect(await res.text()).toContain('vault_rollout_halted_rotations_total 1');
      expect((await fetch(`http://127.0.0.1:${server.port}/`)).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${server.port}/metrics`, { method: 'POST' })).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});
