/**
 * `halts clear` leaves a trail: who cleared the halt (the operating system's user), from which host and when, kept in
 * the rotation store after the halt is gone and listed by `halts`; the same as a RotationHaltCleared Event on the
 * workload that failed the gate (its body here; created on a real cluster in test/integration/halts.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { haltClearedEvent } from '../../../lib/engine/events.ts';
import { clearanceOf, MemoryRotationStore, type RotationHalt } from '../../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';
import { memoryIo } from '../../helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-halts-trail-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rotation = '0123456789abcdef0123';
const halt: RotationHalt = {
  rotation,
  route: 'app',
  changes: ['secret/app/db@2:write'],
  secrets: ['secret/app/db version 2'],
  wave: 1,
  waves: 3,
  failing: { cluster: 'gamma', namespace: 'shop', kind: 'Deployment', name: 'api', state: 'timeout' },
  why: 'rollout timeout',
  notRestarted: ['alpha', 'beta'],
  haltedAt: '2026-11-28T10:00:00.000Z',
};

describe('halts clear', () => {
  it('keeps who cleared the halt, from which host and when, and halts lists it after the halt is gone', async () => {
    const file = join(dir, 'rotations.sqlite');
    const seed = new SqliteRotationStore(file);
    await seed.halt(halt);
    seed.close();
    const env = { VAULT_ROLLOUT_STATE_DB: file };

    const before = Date.now();
    const io = memoryIo({}, env);
    expect(await main(['halts', 'clear', rotation], io)).toBe(0);
    expect(io.out).toContain(`Cleared the halt of rotation ${rotation}`);
    expect(io.out).toContain(`as ${userInfo().username} on ${hostname()} at `);
    // Without --routes no Event can be recorded: it says so, and how.
    expect(io.err).toContain('no Event recorded on Deployment shop/api in gamma: give --routes FILE to record one');

    const store = new SqliteRotationStore(file);
    const [trail, ...more] = await store.clearances();
    store.close();
    expect(more).toEqual([]);
    expect(trail).toMatchObject({ rotation, user: userInfo().username, host: hostname() });
    expect(trail).toMatchObject({ secrets: halt.secrets, wave: 1, waves: 3, failing: halt.failing, why: halt.why });
    expect(Date.parse(trail?.clearedAt ?? '')).toBeGreaterThanOrEqual(before - 1000);

    const list = memoryIo({}, env);
    expect(await main(['halts'], list)).toBe(0);
    expect(list.out).toContain('No halted rotation');
    expect(list.out).toMatch(
      new RegExp(`Latest clears[^\\n]*\\n.*\\n +${rotation} +\\S+ +${userInfo().username} +${hostname()}`),
    );
    const json = memoryIo({}, env);
    expect(await main(['halts', '-o', 'json'], json)).toBe(0);
    expect((JSON.parse(json.out) as { clearances: unknown[] }).clearances).toEqual([trail]);
  });

  it('a clear of no halt keeps no trail', async () => {
    const store = new MemoryRotationStore();
    const by = { user: 'ops', host: 'laptop', clearedAt: '2026-11-28T11:00:00.000Z' };
    expect(await store.clear('feedfacefeedface', by)).toBeUndefined();
    expect(await store.clearances()).toEqual([]);
  });

  it('keeps the clears newest first', async () => {
    const store = new MemoryRotationStore();
    await store.halt(halt);
    await store.clear(rotation, { user: 'ops', host: 'a', clearedAt: '2026-11-28T11:00:00.000Z' });
    await store.halt(halt);
    await store.clear(rotation, { user: 'ops', host: 'b', clearedAt: '2026-11-28T12:00:00.000Z' });
    expect((await store.clearances()).map((c) => c.host)).toEqual(['b', 'a']);
  });
});

describe('haltClearedEvent', () => {
  it('is a Normal RotationHaltCleared Event on the failing workload, from vault-rollout, saying who, where and when', () => {
    const clearance = clearanceOf(halt, { user: 'ops', host: 'laptop-7', clearedAt: '2026-11-28T11:00:00.000Z' });
    const event = haltClearedEvent(clearance) as Record<string, unknown> & {
      metadata: { name: string; namespace: string };
    };
    expect(event.metadata.namespace).toBe('shop');
    expect(event.metadata.name).toMatch(/^api\.vr-0123456789abcdef\.cleared-[0-9a-z]+$/);
    expect(event).toMatchObject({
      apiVersion: 'v1',
      kind: 'Event',
      involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'api', namespace: 'shop' },
      reason: 'RotationHaltCleared',
      type: 'Normal',
      source: { component: 'vault-rollout' },
      reportingComponent: 'vault-rollout',
      firstTimestamp: '2026-11-28T11:00:00.000Z',
    });
    const who = 'cleared by ops on laptop-7 at 2026-11-28T11:00:00.000Z';
    expect(event.message).toBe(`Halt of rotation ${rotation} (secret/app/db version 2; wave 1 of 3) ${who}`);
  });
});
