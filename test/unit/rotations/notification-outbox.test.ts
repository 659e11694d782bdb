/** The notifications' outbox, one table of behaviour for the memory and SQLite stores: once per id, leases, retries, TTL. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryNotificationOutbox, type NotificationOutbox } from '../../../lib/rotations/notification-outbox.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-outbox-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const TTL = 60_000;

describe.each([
  ['memory', () => new MemoryNotificationOutbox() as NotificationOutbox],
  ['SQLite', () => new SqliteRotationStore(join(dir, `s${n++}.sqlite`)) as NotificationOutbox],
])('notification outbox (%s)', (_, make) => {
  it('records an event once: the second enqueue of the same id (a redelivery) is refused until the TTL ends', async () => {
    const o = make();
    expect(await o.enqueueOnce('e1', ['ops', 'audit'], '{"a":1}', 1000, TTL)).toBe(true);
    expect(await o.enqueueOnce('e1', ['ops', 'audit'], '{"a":2}', 2000, TTL)).toBe(false);
    expect((await o.takeDue(2000, 10, 30_000)).map((d) => [d.eventId, d.sink, d.body, d.attempts]).sort()).toEqual([
      ['e1', 'audit', '{"a":1}', 0],
      ['e1', 'ops', '{"a":1}', 0],
    ]);
    expect(await o.enqueueOnce('e1', ['ops'], '{"a":3}', 1000 + TTL + 1, TTL)).toBe(true);
  });

  it('a taken delivery is leased: not taken again before the lease ends, taken again after (a poller that died)', async () => {
    const o = make();
    await o.enqueueOnce('e2', ['ops'], '{}', 0, TTL);
    expect(await o.takeDue(0, 10, 30_000)).toHaveLength(1);
    expect(await o.takeDue(29_999, 10, 30_000)).toHaveLength(0);
    expect(await o.takeDue(30_000, 10, 30_000)).toHaveLength(1);
  });

  it('sent is never taken again; failed comes back at its retry time with its attempts; given up never', async () => {
    const o = make();
    await o.enqueueOnce('e3', ['a', 'b', 'c'], '{}', 0, TTL);
    await o.takeDue(0, 10, 30_000);
    await o.sent('e3', 'a');
    await o.failed('e3', 'b', 1, 5000);
    await o.failed('e3', 'c', 6, undefined);
    expect(await o.takeDue(4999, 10, 30_000)).toHaveLength(0);
    expect((await o.takeDue(5000, 10, 30_000)).map((d) => [d.sink, d.attempts])).toEqual([['b', 1]]);
    await o.sent('e3', 'b');
    expect(await o.takeDue(10_000_000, 10, 30_000)).toEqual([]);
  });

  it('takes at most `limit`, oldest first', async () => {
    const o = make();
    for (let i = 0; i < 5; i++) await o.enqueueOnce(`e${i}`, ['s'], '{}', i, TTL);
    expect((await o.takeDue(10, 3, 30_000)).map((d) => d.eventId)).toEqual(['e0', 'e1', 'e2']);
  });

  it("a rotation's notes: idempotent, sorted, expired after the TTL", async () => {
    const o = make();
    await o.note('r', 'done beta', 0, TTL);
    await o.note('r', 'done alpha', 0, TTL);
    await o.note('r', 'done alpha', 10, TTL);
    expect(await o.notes('r', 100)).toEqual(['done alpha', 'done beta']);
    expect(await o.notes('r', TTL + 5)).toEqual(['done alpha']);
    expect(await o.notes('other', 0)).toEqual([]);
  });
});

describe('notification outbox (SQLite) across a restart', () => {
  it('a reopened file still refuses a sent id, and hands back a delivery its dead poller had leased', async () => {
    const file = join(dir, 'restart.sqlite');
    const first = new SqliteRotationStore(file);
    await first.enqueueOnce('e1', ['ops'], '{}', 0, TTL);
    await first.enqueueOnce('e2', ['ops'], '{}', 0, TTL);
    await first.takeDue(0, 10, 30_000);
    await first.sent('e1', 'ops');
    first.close();
    const second = new SqliteRotationStore(file);
    expect(await second.enqueueOnce('e1', ['ops'], '{}', 1000, TTL)).toBe(false);
    expect(await second.takeDue(1000, 10, 30_000)).toEqual([]);
    expect((await second.takeDue(30_000, 10, 30_000)).map((d) => d.eventId)).toEqual(['e2']);
    second.close();
  });
});
