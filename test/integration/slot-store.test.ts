/**
 * The slot store's semantics, one table of behaviours run against both stores: DynamoDB on DynamoDB Local (what
 * Lambda uses) and SQLite through node:sqlite (what `serve` uses). Time is the test's: a clock it moves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbSlotStore } from '../../lib/slots/dynamodb-slot-store.ts';
import type { SlotStore } from '../../lib/slots/slot-store.ts';
import { SqliteSlotStore } from '../../lib/slots/sqlite-slot-store.ts';
import { createSlotTable, startDynamoDbLocal, type DynamoDbLocal } from '../dynamodb/dynamodb-local.ts';

let dynamo: DynamoDbLocal;
let client: DynamoDBClient;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-slots-'));
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

interface Fixture {
  /** Two stores over the same table/file: two workers. */
  stores: [SlotStore, SlotStore];
  clock: { t: number };
}

const kinds: Array<[string, () => Promise<Fixture>]> = [
  [
    'DynamoDB (DynamoDB Local)',
    async () => {
      const table = `slots-${++tables}`;
      await createSlotTable(client, table);
      const clock = { t: 1_800_000_000_000 };
      const make = () => new DynamoDbSlotStore({ client, table, now: () => clock.t });
      return { stores: [make(), make()], clock };
    },
  ],
  [
    'SQLite (node:sqlite, one file)',
    () => {
      const file = join(dir, `slots-${++tables}.db`);
      const clock = { t: 1_800_000_000_000 };
      const make = () => new SqliteSlotStore(file, { now: () => clock.t });
      return Promise.resolve({ stores: [make(), make()], clock });
    },
  ],
];

const alpha = { key: 'cluster:alpha', limit: 2 };
const beta = { key: 'cluster:beta', limit: 2 };
const fleet = { key: 'fleet', limit: 3 };

describe.each(kinds)('slot store: %s', (_, fixture) => {
  it('takes leases up to the limit, refuses the next naming the full scope, and a release frees one', async () => {
    const {
      stores: [a],
    } = await fixture();
    expect(await a.acquire('w1', [alpha], 60_000)).toEqual({ acquired: true });
    expect(await a.acquire('w2', [alpha], 60_000)).toEqual({ acquired: true });
    expect(await a.acquire('w3', [alpha], 60_000)).toEqual({ acquired: false, full: alpha, held: 2 });
    await a.release('w1', [alpha.key]);
    expect(await a.acquire('w3', [alpha], 60_000)).toEqual({ acquired: true });
    expect((await a.leases(alpha.key)).map((l) => l.holder).sort()).toEqual(['w2', 'w3']);
  });

  it('is atomic across scopes: a full fleet takes nothing in the cluster', async () => {
    const {
      stores: [a],
    } = await fixture();
    for (const w of ['w1', 'w2']) expect(await a.acquire(w, [alpha, fleet], 60_000)).toEqual({ acquired: true });
    expect(await a.acquire('w3', [beta, fleet], 60_000)).toEqual({ acquired: true });
    expect(await a.acquire('w4', [beta, fleet], 60_000)).toEqual({ acquired: false, full: fleet, held: 3 });
    expect((await a.leases(beta.key)).map((l) => l.holder)).toEqual(['w3']);
    await a.release('w1', [alpha.key, fleet.key]);
    expect(await a.acquire('w4', [beta, fleet], 60_000)).toEqual({ acquired: true });
    expect((await a.leases(fleet.key)).length).toBe(3);
  });

  it('is idempotent per holder: a second acquire keeps the first lease and its time', async () => {
    const {
      stores: [a, b],
      clock,
    } = await fixture();
    await a.acquire('w1', [alpha, fleet], 60_000);
    clock.t += 5_000;
    expect(await b.acquire('w1', [alpha, fleet], 60_000)).toEqual({ acquired: true });
    const leases = await a.leases(alpha.key);
    expect(leases).toEqual([{ holder: 'w1', acquiredAt: clock.t - 5_000, expiresAt: clock.t - 5_000 + 60_000 }]);
    expect((await a.leases(fleet.key)).length).toBe(1);
  });

  it('lets a lease expire: a holder that never releases (a killed worker) frees its slot at the deadline', async () => {
    const {
      stores: [a, b],
      clock,
    } = await fixture();
    await a.acquire('killed-1', [alpha], 10_000);
    await a.acquire('killed-2', [alpha], 20_000);
    expect((await b.acquire('w3', [alpha], 60_000)).acquired).toBe(false);
    clock.t += 10_000;
    expect((await b.leases(alpha.key)).map((l) => l.holder)).toEqual(['killed-2']);
    expect(await b.acquire('w3', [alpha], 60_000)).toEqual({ acquired: true });
    // Releasing an expired lease, or one never taken, is nothing to do; another holder's lease stays.
    await a.release('killed-1', [alpha.key]);
    await a.release('nobody', [alpha.key, fleet.key]);
    expect((await b.leases(alpha.key)).map((l) => l.holder).sort()).toEqual(['killed-2', 'w3']);
  });

  it('never hands out more than the limit to concurrent workers', async () => {
    const {
      stores: [a, b],
    } = await fixture();
    const wide = { key: 'fleet', limit: 5 };
    const outcomes = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? a : b).acquire(`w${i}`, [wide], 60_000).catch(() => ({ acquired: false })),
      ),
    );
    const won = outcomes.filter((o) => o.acquired).length;
    const held = await a.leases(wide.key);
    expect(held.length).toBe(won);
    expect(won).toBeLessThanOrEqual(5);
    // Those that lost a race retry later; with everything free again the limit is reached exactly.
    for (const l of held) await b.release(l.holder, [wide.key]);
    for (let i = 0; i < 7; i++) await a.acquire(`v${i}`, [wide], 60_000);
    expect((await b.leases(wide.key)).length).toBe(5);
  });
});
