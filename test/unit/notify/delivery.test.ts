/** Delivering the outbox: sent once, retried with backoff, dropped after the last attempt, counted, logged without secrets. */
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { deliverDue, deliverNamed, LEASE_MS, MAX_ATTEMPTS, RETRY_BASE_MS } from '../../../lib/notify/delivery.ts';
import { rotationEvent } from '../../../lib/notify/event.ts';
import { SinkError, type Sink } from '../../../lib/notify/sinks.ts';
import { MemoryNotificationOutbox } from '../../../lib/rotations/notification-outbox.ts';

const event = rotationEvent({
  kind: 'halted',
  rotation: 'r1',
  at: '2026-11-27T10:00:00.000Z',
  secrets: ['secret/app version 2'],
  wave: 1,
  waves: 2,
});

function sink(name: string, behave: () => Promise<void>): Sink & { calls: number } {
  const s = {
    name,
    type: 'slack' as const,
    calls: 0,
    send: async () => {
      s.calls += 1;
      await behave();
    },
  };
  return s;
}

describe('notification delivery', () => {
  it('sends each sink its delivery once; a failing sink is retried after a growing backoff, then dropped and counted', async () => {
    const outbox = new MemoryNotificationOutbox();
    const telemetry = memoryTelemetry();
    let now = 0;
    const ok = sink('ok', () => Promise.resolve());
    const down = sink('down', () => Promise.reject(new SinkError('sink down: HTTP 500')));
    await outbox.enqueueOnce(event.id, ['ok', 'down'], JSON.stringify(event), now, 3_600_000);
    const deps = {
      outbox,
      sinks: new Map([
        ['ok', ok],
        ['down', down],
      ]),
      telemetry,
      now: () => now,
      random: () => 1,
    };
    expect(await deliverDue(deps)).toEqual({ sent: 1, retry: 1, dropped: 0 });
    const delays: number[] = [];
    for (let attempt = 2; attempt <= MAX_ATTEMPTS; attempt++) {
      // Not before its backoff.
      expect(await deliverDue(deps)).toEqual({ sent: 0, retry: 0, dropped: 0 });
      const retry = telemetry.lines.filter((l) => l.message.startsWith('notification not delivered')).at(-1);
      const delay = Number(retry?.fields?.delayMs);
      delays.push(delay);
      now += delay;
      await deliverDue(deps);
    }
    expect(delays).toEqual([
      RETRY_BASE_MS,
      2 * RETRY_BASE_MS,
      4 * RETRY_BASE_MS,
      8 * RETRY_BASE_MS,
      16 * RETRY_BASE_MS,
    ]);
    expect(ok.calls).toBe(1);
    expect(down.calls).toBe(MAX_ATTEMPTS);
    expect(outbox.deliveries().sort((a, b) => a.sink.localeCompare(b.sink))).toEqual([
      { eventId: event.id, sink: 'down', state: 'gave-up', attempts: MAX_ATTEMPTS },
      { eventId: event.id, sink: 'ok', state: 'sent', attempts: 0 },
    ]);
    now += 10_000_000;
    expect(await deliverDue(deps)).toEqual({ sent: 0, retry: 0, dropped: 0 });
    const outcomes = telemetry.metrics.filter((m) => m.name === 'Notifications').map((m) => m.dimensions?.outcome);
    expect(outcomes.filter((o) => o === 'sent')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'retry')).toHaveLength(MAX_ATTEMPTS - 1);
    expect(outcomes.filter((o) => o === 'dropped')).toHaveLength(1);
    expect(
      telemetry.lines.find((l) => l.message === 'notification dropped after its last attempt')?.fields,
    ).toMatchObject({ sink: 'down', attempts: MAX_ATTEMPTS, why: 'sink down: HTTP 500' });
  });

  it('a hanging sink holds up no other sink of the pass', async () => {
    const outbox = new MemoryNotificationOutbox();
    const order: string[] = [];
    let release: () => void = () => {};
    const hang = sink('hang', () =>
      new Promise<void>((r) => {
        release = r;
      }).then(() => void order.push('hang done')),
    );
    const fast = sink('fast', () => Promise.resolve(void order.push('fast sent')));
    await outbox.enqueueOnce(event.id, ['hang', 'fast'], JSON.stringify(event), 0, 3_600_000);
    const pass = deliverDue({
      outbox,
      sinks: new Map([
        ['hang', hang],
        ['fast', fast],
      ]),
      telemetry: memoryTelemetry(),
      now: () => 0,
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual(['fast sent']);
    release();
    await pass;
    expect(order).toEqual(['fast sent', 'hang done']);
  });

  it('a sink no longer configured drops its delivery at once (logged by name, counted)', async () => {
    const outbox = new MemoryNotificationOutbox();
    const telemetry = memoryTelemetry();
    await outbox.enqueueOnce(event.id, ['gone'], JSON.stringify(event), 0, 3_600_000);
    expect(await deliverDue({ outbox, sinks: new Map(), telemetry, now: () => 0 })).toEqual({
      sent: 0,
      retry: 0,
      dropped: 1,
    });
    expect(telemetry.lines.at(-1)).toMatchObject({ level: 'error', fields: { sink: 'gone' } });
  });

  it("by key (Lambda's stream records): sent once however often named; a failure handed back, its backoff waited out at the next call", async () => {
    const outbox = new MemoryNotificationOutbox();
    const telemetry = memoryTelemetry();
    let now = 0;
    const slept: number[] = [];
    const ok = sink('ok', () => Promise.resolve());
    const down = sink('down', () => Promise.reject(new SinkError('sink down: HTTP 500')));
    await outbox.enqueueOnce(event.id, ['ok', 'down'], JSON.stringify(event), now, 3_600_000);
    const deps = {
      outbox,
      sinks: new Map([
        ['ok', ok],
        ['down', down],
      ]),
      telemetry,
      now: () => now,
      random: () => 1,
      sleep: (ms: number) => {
        slept.push(ms);
        now += ms;
        return Promise.resolve();
      },
    };
    const named = [
      { eventId: event.id, sink: 'ok' },
      { eventId: event.id, sink: 'down' },
      { eventId: event.id, sink: 'ok' },
      { eventId: 'unknown', sink: 'ok' },
    ];
    // The same record twice in a batch (one is taken, the other finds it leased and waits past the budget).
    expect(await deliverNamed(deps, named, 0)).toMatchObject({ again: [1, 2] });
    expect([ok.calls, down.calls]).toEqual([1, 1]);
    // Invoked again from the failed record: the sent one is done, the failed one waits out its backoff, fails again.
    now += 1;
    expect(await deliverNamed(deps, named.slice(1), 60_000)).toMatchObject({ again: [0] });
    expect([ok.calls, down.calls]).toEqual([1, 2]);
    expect(slept).toEqual([RETRY_BASE_MS - 1]);
    // A backoff longer than the budget: handed back at once, no send, no sleep.
    expect(await deliverNamed(deps, [{ eventId: event.id, sink: 'down' }], 1000)).toEqual({ again: [0], outcomes: [] });
    expect(down.calls).toBe(2);
    // Until its last attempt: then dropped, and done.
    for (let i = 0; i < MAX_ATTEMPTS; i++)
      await deliverNamed(deps, [{ eventId: event.id, sink: 'down' }], 10 * LEASE_MS);
    expect(down.calls).toBe(MAX_ATTEMPTS);
    expect(outbox.deliveries().find((d) => d.sink === 'down')).toMatchObject({
      state: 'gave-up',
      attempts: MAX_ATTEMPTS,
    });
    expect(await deliverNamed(deps, [{ eventId: event.id, sink: 'down' }], 0)).toEqual({ again: [], outcomes: [] });
  });
});
