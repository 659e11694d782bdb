/** The key baseline store's semantics, memory and SQLite (DynamoDB: test/integration/rotation-store.test.ts). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { KeyBaselineStore } from '../../../lib/rotations/key-baselines.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-baselines-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const keyBaselineCases: Array<[string, (store: KeyBaselineStore, other: KeyBaselineStore) => Promise<void>]> = [
  [
    'a baseline per device; versions only move forward while it lives; an expired one is none and is replaced',
    async (a, b) => {
      await a.putBaseline('secret/x', { device: 'A', version: 3, digests: { p: 'd3' } }, 10_000, 0);
      await a.putBaseline('secret/x', { device: 'B', version: 7, digests: { p: 'e7' } }, 10_000, 0);
      expect(await b.baseline('A', 'secret/x', 1)).toEqual({ device: 'A', version: 3, digests: { p: 'd3' } });
      await b.putBaseline('secret/x', { device: 'A', version: 2, digests: { p: 'd2' } }, 10_000, 1);
      expect((await a.baseline('A', 'secret/x', 1))?.version).toBe(3);
      expect(await a.baseline('A', 'secret/x', 10_000)).toBeUndefined();
      await b.putBaseline('secret/x', { device: 'A', version: 1, digests: { p: 'd1' } }, 30_000, 20_000);
      expect((await a.baseline('A', 'secret/x', 20_001))?.version).toBe(1);
    },
  ],
  [
    'forget drops one device, clear every device of the path, and nothing of another path',
    async (a, b) => {
      for (const device of ['A', 'B'])
        for (const path of ['secret/x', 'secret/y'])
          await a.putBaseline(path, { device, version: 1, digests: {} }, 10_000, 0);
      await b.forgetBaseline('A', 'secret/x');
      expect([await a.baseline('A', 'secret/x', 1), (await a.baseline('B', 'secret/x', 1))?.version]).toEqual([
        undefined,
        1,
      ]);
      await b.clearBaselines('secret/x');
      expect(await a.baseline('B', 'secret/x', 1)).toBeUndefined();
      expect((await a.baseline('A', 'secret/y', 1))?.version).toBe(1);
    },
  ],
];

describe('key baselines', () => {
  it.each(keyBaselineCases)('memory: %s', async (_name, check) => {
    const store = new MemoryRotationStore();
    await check(store, store);
  });
  it.each(keyBaselineCases)('SQLite, two handles on one file: %s', async (_name, check) => {
    const file = join(dir, `${Math.random()}.sqlite`);
    const [a, b] = [new SqliteRotationStore(file), new SqliteRotationStore(file)];
    try {
      await check(a, b);
    } finally {
      a.close();
      b.close();
    }
  });
});
