/**
 * The rotation store's semantics, one table of behaviours run against the DynamoDB store on DynamoDB Local
 * (what Lambda uses) and the SQLite store (serve, worker, the CLI), two handles on one table or file each: a release
 * by one worker is seen by the other, a release never goes down, a halt is found by any of its changes and cleared,
 * a wave's start and completion are written once (the gate's clock) and cleared with the halt, a clear keeps who
 * cleared it, and an approval is recorded on a request only, the first request's time and the first approval staying.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbRotationStore } from '../../lib/rotations/dynamodb-rotation-store.ts';
import type { KeyBaselineStore } from '../../lib/rotations/key-baselines.ts';
import type { RotationHalt, RotationStore } from '../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { createSlotTable, startDynamoDbLocal, type DynamoDbLocal } from '../dynamodb/dynamodb-local.ts';

let dynamo: DynamoDbLocal;
let client: DynamoDBClient;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-rotations-'));
let tables = 0;

beforeAll(async () => {
  dynamo = await startDynamoDbLocal();
  client = dynamo.client();
}, 300_000);

afterAll(async () => {
  client?.destroy();
  await dynamo?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const kinds: Array<[string, () => Promise<[RotationStore, RotationStore]>]> = [
  [
    'DynamoDB (DynamoDB Local)',
    async () => {
      const table = `rotations-${++tables}`;
      // The same key schema as the slot table (pk, sk), as serverless.yml's RotationStateTable.
      await createSlotTable(client, table);
      return [new DynamoDbRotationStore({ client, table }), new DynamoDbRotationStore({ client, table })];
    },
  ],
  [
    'SQLite (node:sqlite, one file)',
    () => {
      const file = join(dir, `rotations-${++tables}.sqlite`);
      return Promise.resolve([new SqliteRotationStore(file), new SqliteRotationStore(file)]);
    },
  ],
];

const halt = (rotation: string, changes: string[], haltedAt: string): RotationHalt => ({
  rotation,
  route: 'app',
  changes,
  secrets: changes.map((c) => `${c} (secret)`),
  wave: 1,
  waves: 3,
  failing: { cluster: 'gamma', namespace: 'ns', kind: 'Deployment', name: 'api', state: 'timeout' },
  why: 'rollout timeout',
  notRestarted: ['alpha', 'beta'],
  haltedAt,
});

describe.each(kinds)('rotation store: %s', (_, make) => {
  it('a release by one worker is seen by the other and never goes down', async () => {
    const [a, b] = await make();
    expect(await b.releasedWave('r1')).toBe(0);
    await a.releaseWave('r1', 1);
    expect(await b.releasedWave('r1')).toBe(1);
    await b.releaseWave('r1', 2);
    await a.releaseWave('r1', 1);
    expect(await a.releasedWave('r1')).toBe(2);
    expect(await a.releasedWave('r2')).toBe(0);
  });

  it('a halt is found by any of its changes, listed oldest first, and cleared with its releases', async () => {
    const [a, b] = await make();
    await a.releaseWave('r1', 1);
    await a.halt(halt('r1', ['secret/x@2:write', 'secret/y@5:write'], '2026-11-25T10:00:00.000Z'));
    await b.halt(halt('r0', ['secret/z@1:write'], '2026-11-25T09:00:00.000Z'));
    expect((await b.haltsOf(['secret/y@5:write'])).map((h) => h.rotation)).toEqual(['r1']);
    expect(await b.haltsOf(['secret/y@6:write'])).toEqual([]);
    expect((await b.halts()).map((h) => h.rotation)).toEqual(['r0', 'r1']);
    const cleared = await b.clear('r1');
    expect(cleared?.changes).toEqual(['secret/x@2:write', 'secret/y@5:write']);
    expect(await a.haltsOf(['secret/x@2:write'])).toEqual([]);
    expect(await a.releasedWave('r1')).toBe(0);
    expect(await a.clear('r1')).toBeUndefined();
    expect((await a.halts()).map((h) => h.rotation)).toEqual(['r0']);
  });

  it("a wave's times: the first write stays, whoever writes after; forgotten once passed; cleared with the halt", async () => {
    const [a, b] = await make();
    // The real clock: DynamoDB Local removes expired items, and the times' TTL counts from when they were written.
    const base = Math.floor(Date.now() / 1000) * 1000;
    const at = (s: number) => new Date(base + s * 1000).toISOString();
    expect(await b.waveTimes('r1', 0)).toEqual({});
    expect(await a.markWave('r1', 0, 'startedAt', at(0))).toEqual({ startedAt: at(0) });
    // A later (or forged) start changes nothing: the gate's timeout counts from the first.
    expect(await b.markWave('r1', 0, 'startedAt', at(-3600))).toEqual({ startedAt: at(0) });
    expect(await b.markWave('r1', 0, 'completeAt', at(5))).toEqual({ startedAt: at(0), completeAt: at(5) });
    expect(await a.markWave('r1', 0, 'completeAt', at(9))).toEqual({ startedAt: at(0), completeAt: at(5) });
    await a.markWave('r1', 1, 'startedAt', at(6));
    await a.markWave('r2', 0, 'startedAt', at(7));
    expect(await b.waveTimes('r1', 1)).toEqual({ startedAt: at(6) });
    await b.forgetWave('r1', 0);
    expect([await a.waveTimes('r1', 0), await a.waveTimes('r1', 1)]).toEqual([{}, { startedAt: at(6) }]);
    await a.halt(halt('r1', ['secret/w@2:write'], at(8)));
    await b.clear('r1');
    expect([await a.waveTimes('r1', 1), await a.waveTimes('r2', 0)]).toEqual([{}, { startedAt: at(7) }]);
  });

  it('a clear keeps who cleared the halt, from which host and when, newest first, seen by the other handle', async () => {
    const [a, b] = await make();
    await a.halt(halt('c1', ['secret/c@1:write'], '2026-11-25T10:00:00.000Z'));
    await a.halt(halt('c2', ['secret/c@2:write'], '2026-11-25T11:00:00.000Z'));
    await b.clear('c1', { user: 'alice', host: 'laptop-1', clearedAt: '2026-11-26T09:00:00.000Z' });
    await a.clear('c2', { user: 'bob', host: 'serve-0', clearedAt: '2026-11-26T10:00:00.000Z' });
    // A clear of no halt, and a clear without `by`, keep nothing.
    await a.clear('c1', { user: 'eve', host: 'x', clearedAt: '2026-11-26T11:00:00.000Z' });
    const trail = (await b.clearances?.()) ?? [];
    expect(trail.map((c) => [c.rotation, c.user, c.host, c.clearedAt])).toEqual([
      ['c2', 'bob', 'serve-0', '2026-11-26T10:00:00.000Z'],
      ['c1', 'alice', 'laptop-1', '2026-11-26T09:00:00.000Z'],
    ]);
    expect(trail[1]).toMatchObject({
      secrets: ['secret/c@1:write (secret)'],
      wave: 1,
      waves: 3,
      why: 'rollout timeout',
      failing: { cluster: 'gamma', name: 'api' },
    });
    expect(await a.halts()).toEqual([]);
  });

  it('key baselines: per device, forward only while alive, an expired one replaced; forget one device, clear the path', async () => {
    const [a, b] = (await make()) as unknown as [KeyBaselineStore, KeyBaselineStore];
    // The real clock, not a fixed date: DynamoDB Local removes items whose TTL has passed (as DynamoDB does, late),
    // so a baseline stamped to expire in the past may vanish between two reads.
    const now = Math.floor(Date.now() / 1000) * 1000;
    await a.putBaseline('secret/x', { device: 'A', version: 3, digests: { p: 'd3' } }, now + 10_000, now);
    await a.putBaseline('secret/x', { device: 'B', version: 7, digests: { p: 'e7' } }, now + 10_000, now);
    expect(await b.baseline('A', 'secret/x', now + 1)).toEqual({ device: 'A', version: 3, digests: { p: 'd3' } });
    await b.putBaseline('secret/x', { device: 'A', version: 2, digests: { p: 'd2' } }, now + 10_000, now + 1);
    expect((await a.baseline('A', 'secret/x', now + 1))?.version).toBe(3);
    expect(await a.baseline('A', 'secret/x', now + 10_000)).toBeUndefined();
    await b.putBaseline('secret/x', { device: 'A', version: 1, digests: { p: 'd1' } }, now + 30_000, now + 20_000);
    expect((await a.baseline('A', 'secret/x', now + 20_001))?.version).toBe(1);
    await b.forgetBaseline('A', 'secret/x');
    expect([
      await a.baseline('A', 'secret/x', now + 20_001),
      (await a.baseline('B', 'secret/x', now + 1))?.version,
    ]).toEqual([undefined, 7]);
    await b.clearBaselines('secret/x');
    expect(await a.baseline('B', 'secret/x', now + 1)).toBeUndefined();
  });
  it('restart breaker: two handles racing for the last restarts never both take one; a redelivery counts once; reset', async () => {
    const [a, b] = await make();
    const now = Date.now();
    const limit = { restarts: 3, withinMs: 3_600_000 };
    const w = 'alpha/ns/Deployment/api';
    expect((await a.admitRestart?.(w, 't0', now, limit))?.allowed).toBe(true);
    // Six restarts at once from both handles: exactly two more go (3 in all); the store's conditional write decides.
    const verdicts = await Promise.all(
      Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).admitRestart?.(w, `t${i + 1}`, now + 1, limit)),
    );
    expect(verdicts.filter((v) => v?.allowed)).toHaveLength(2);
    const admitted = verdicts.flatMap((v, i) => (v?.allowed ? [`t${i + 1}`] : []));
    // The same restart seen again (a redelivered message) goes without counting; a new one is refused.
    expect((await b.admitRestart?.(w, admitted[0] as string, now + 2, limit))?.allowed).toBe(true);
    const refused = await a.admitRestart?.(w, 'tx', now + 2, limit);
    expect(refused?.allowed).toBe(false);
    expect(refused && !refused.allowed ? refused.why : '').toContain('3 restarts within 1h');
    // Another workload counts apart; a reset (halts clear) lets the next one go.
    expect((await b.admitRestart?.('alpha/ns/Deployment/web', 'tx', now + 2, limit))?.allowed).toBe(true);
    await b.resetRestarts?.(w);
    expect((await a.admitRestart?.(w, 'tx', now + 3, limit))?.allowed).toBe(true);
  });

  it('approvals: on a request only, the first request and approval stay, pending listed, forgotten with a clear', async () => {
    const [a, b] = await make();
    const request = { rotation: 'r9', route: 'app', secrets: ['secret/app/db version 2'], wave: 2, waves: 3 };
    expect(await a.approvals?.approve('r9', 2, 'mallory', '2026-01-01T00:00:00.000Z')).toBeUndefined();
    expect(await b.approvals?.get('r9', 2)).toBeUndefined();
    await a.approvals?.request({ ...request, since: '2026-01-01T00:00:01.000Z' });
    const again = await b.approvals?.request({ ...request, since: '2026-01-01T00:00:09.000Z' });
    expect(again).toMatchObject({ since: '2026-01-01T00:00:01.000Z' });
    expect(again?.approvedAt).toBeUndefined();
    await a.approvals?.request({ ...request, rotation: 'r8', since: '2026-01-01T00:00:00.000Z' });
    expect((await b.approvals?.pending())?.map((r) => [r.rotation, r.wave])).toEqual([
      ['r8', 2],
      ['r9', 2],
    ]);
    expect(await b.approvals?.approve('r9', 2, 'alice', '2026-01-01T00:01:00.000Z')).toMatchObject({
      approvedBy: 'alice',
      approvedAt: '2026-01-01T00:01:00.000Z',
    });
    await a.approvals?.approve('r9', 2, 'bob', '2026-01-01T00:02:00.000Z');
    expect(await a.approvals?.get('r9', 2)).toMatchObject({ approvedBy: 'alice', since: '2026-01-01T00:00:01.000Z' });
    expect((await a.approvals?.pending())?.map((r) => r.rotation)).toEqual(['r8']);
    expect((await b.approvals?.ofRotation('r9'))?.map((r) => r.wave)).toEqual([2]);
    await b.clear('r9');
    expect(await a.approvals?.get('r9', 2)).toBeUndefined();
    expect(await a.approvals?.get('r8', 2)).toBeDefined();
  });
});
