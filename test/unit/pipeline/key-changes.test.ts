/**
 * The intake's key comparison on the entries real servers wrote (test/vault/captured): the first write
 * has no baseline (every key), the update is compared with it, the patch carries its keys; what goes on the queue
 * carries key names only; a delete clears the baselines; the baseline store is the rotation store (memory, SQLite).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveChangedKeys } from '../../../lib/plan/changed-keys.ts';
import { intake } from '../../../lib/pipeline/intake.ts';
import type { QueueMessage, RolloutQueue } from '../../../lib/queue/rollout-message.ts';
import type { KeyBaselineStore } from '../../../lib/rotations/key-baselines.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { KeyDigests } from '../../../lib/sources/key-digests.ts';

const captured = new URL('../../vault/captured/', import.meta.url);
const read = (server: string, file: string): string =>
  readFileSync(new URL(`${server}/${file}`, captured), 'utf8').replace(/\n\s*/g, '');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: db
    match: { path: "secret2/payments/api/db", operations: [write, delete, undelete, destroy] }
    targets:
      - { clusters: [a], namespace: ns, kind: Deployment, name: pw, keys: [password] }
`);

/** A queue that keeps what it was sent. */
class SentQueue implements RolloutQueue {
  readonly messages: QueueMessage[] = [];
  send(messages: readonly QueueMessage[]): Promise<void> {
    this.messages.push(...messages);
    return Promise.resolve();
  }
}

const stores: Array<[string, () => KeyBaselineStore]> = [
  ['memory', () => new MemoryRotationStore()],
  ['SQLite', () => new SqliteRotationStore(join(dir, `${Math.random()}.sqlite`))],
];

describe.each(stores)('intake with key baselines in the %s rotation store', (_name, make) => {
  it.each(['openbao-2.7.2', 'vault-1.15.3', 'vault-1.21.1'])(
    '%s: create = every key, update = compared, patch = its keys, delete = every key and clears',
    async (server) => {
      const baselines = make();
      const queue = new SentQueue();
      let now = Date.parse('2026-11-21T10:00:00Z');
      const changedKeys = async (file: string) => {
        const { parsed } = await intake(read(server, file), { table, queue, now: () => (now += 1000), baselines });
        return parsed.changes.map((c) => c.changedKeys ?? 'all');
      };
      expect(await changedKeys('audit-kv2-write-response.json')).toEqual(['all']);
      expect(await changedKeys('audit-kv2-update-response.json')).toEqual([['password']]);
      expect(await changedKeys('audit-kv2-patch-response.json')).toEqual([['user']]);
      // A replay of the update (an older version than the baseline): every key, and the baseline stays.
      expect(await changedKeys('audit-kv2-update-response.json')).toEqual(['all']);
      expect(await changedKeys('audit-kv2-delete-response.json')).toEqual(['all']);
      // What was queued: key names, never an HMAC or a digest.
      const bodies = JSON.stringify(queue.messages);
      expect(bodies).toContain('"changedKeys":["password"]');
      expect(bodies).not.toMatch(/[0-9a-f]{64}/);
    },
  );

  it('a write that changes no value: no key changed; the first write after the store forgot: every key', async () => {
    const baselines = make();
    const queue = new SentQueue();
    const update = read('openbao-2.7.2', 'audit-kv2-update-response.json');
    const v = (version: number) => update.replace(/"version": ?2/, `"version": ${version}`);
    const run = async (text: string) =>
      (
        await intake(text, { table, queue, now: () => Date.parse('2026-11-21T10:00:00Z'), baselines })
      ).parsed.changes.map((c) => c.changedKeys ?? 'all');
    expect(await run(v(2))).toEqual(['all']);
    expect(await run(v(3))).toEqual([[]]);
    await baselines.clearBaselines('secret2/payments/api/db');
    expect(await run(v(4))).toEqual(['all']);
    expect(await run(v(5))).toEqual([[]]);
    // A gap in versions (v6 never seen): every key.
    expect(await run(v(7))).toEqual(['all']);
  });
});

describe('which tables compare keys', () => {
  const with_ = (target: string) =>
    loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: db
    match: { path: "secret2/payments/api/db" }
    targets: [${target}]
`);
  it.each([
    [
      "a sync target without keys (its consumers' keys are found through the ExternalSecret)",
      '{ clusters: [a], namespace: ns, sync: { kind: ExternalSecret, name: db } }',
      [['password']],
    ],
    [
      'a workload target without keys (Vault Agent templates)',
      '{ clusters: [a], namespace: ns, kind: Deployment, name: api }',
      [['password']],
    ],
    [
      'only a resource target without keys: nothing compared or stored',
      '{ clusters: [a], resource: { apiVersion: example.com/v1, kind: Harbor, name: h }, patch: { spec: { v: "1" } } }',
      ['all'],
    ],
  ])('%s', async (_name, target, expected) => {
    const table = with_(target);
    const baselines = new MemoryRotationStore();
    const queue = new SentQueue();
    for (const file of ['audit-kv2-write-response.json'])
      await intake(read('openbao-2.7.2', file), { table, queue, now: () => 0, baselines });
    const { parsed } = await intake(read('openbao-2.7.2', 'audit-kv2-update-response.json'), {
      table,
      queue,
      now: () => 0,
      baselines,
    });
    expect(parsed.changes.map((c) => c.changedKeys ?? 'all')).toEqual(expected);
  });
});

describe('resolveChangedKeys', () => {
  const digests = (mode: 'write' | 'patch', device: string | undefined, entries: Record<string, string | null>) =>
    new KeyDigests(mode, new Map(Object.entries(entries)), device);
  const base = { device: 'A', version: 4, digests: { user: 'u1', password: 'p1', old: 'o1' } };
  it.each([
    [
      'a write compared with v-1 of the same device: changed, added and removed keys',
      base,
      {
        operation: 'write',
        version: 5,
        keyDigests: digests('write', 'A', { user: 'u1', password: 'p2', api_key: 'k1' }),
      },
      ['api_key', 'old', 'password'],
    ],
    [
      'no baseline',
      undefined,
      { operation: 'write', version: 5, keyDigests: digests('write', 'A', { user: 'u1' }) },
      'all',
    ],
    [
      'another device',
      base,
      { operation: 'write', version: 5, keyDigests: digests('write', 'B', { user: 'u1', password: 'p1', old: 'o1' }) },
      'all',
    ],
    [
      'an unknown device',
      base,
      {
        operation: 'write',
        version: 5,
        keyDigests: digests('write', undefined, { user: 'u1', password: 'p1', old: 'o1' }),
      },
      'all',
    ],
    [
      'a gap in versions',
      base,
      { operation: 'write', version: 6, keyDigests: digests('write', 'A', { user: 'u1', password: 'p1', old: 'o1' }) },
      'all',
    ],
    [
      'an older version',
      base,
      { operation: 'write', version: 4, keyDigests: digests('write', 'A', { user: 'u1', password: 'p1', old: 'o1' }) },
      'all',
    ],
    ['an event (no keys)', base, { operation: 'write', version: 5 }, 'all'],
    ['a delete', base, { operation: 'delete', version: null }, 'all'],
    ['an undelete', base, { operation: 'undelete', version: 4 }, 'all'],
    // A patch's names are honoured only against a baseline of v-1 from the same device: any entry can claim any key.
    [
      'a patch without a baseline: every key',
      undefined,
      { operation: 'write', version: 9, keyDigests: digests('patch', 'A', { password: 'p9', old: null }) },
      'all',
    ],
    [
      "a patch whose baseline is another device's: every key",
      base,
      { operation: 'write', version: 5, keyDigests: digests('patch', 'B', { api_key: 'k2' }) },
      'all',
    ],
    [
      'a patch whose baseline is not v-1: every key',
      base,
      { operation: 'write', version: 6, keyDigests: digests('patch', 'A', { api_key: 'k2' }) },
      'all',
    ],
    [
      'a patch of an unknown device: every key',
      base,
      { operation: 'write', version: 5, keyDigests: digests('patch', undefined, { api_key: 'k2' }) },
      'all',
    ],
    [
      'a patch compared with v-1: set to another value, removed; one set to its own value is unchanged',
      base,
      {
        operation: 'write',
        version: 5,
        keyDigests: digests('patch', 'A', { password: 'p2', old: null, user: 'u1', gone: null }),
      },
      ['old', 'password'],
    ],
  ] as const)('%s', (_name, previous, change, expected) => {
    expect(resolveChangedKeys(previous, change).changed).toEqual(expected);
  });

  it('what the store keeps next: a patch extends a baseline of v-1, a delete clears, an event keeps', () => {
    expect(
      resolveChangedKeys(base, {
        operation: 'write',
        version: 5,
        keyDigests: digests('patch', 'A', { password: 'p2', old: null }),
      }).next,
    ).toEqual({ device: 'A', version: 5, digests: { user: 'u1', password: 'p2' } });
    expect(
      resolveChangedKeys(undefined, {
        operation: 'write',
        version: 5,
        keyDigests: digests('patch', 'A', { password: 'p2' }),
      }).next,
    ).toBe('forget');
    expect(resolveChangedKeys(base, { operation: 'destroy', version: 4 }).next).toBe('clear');
    expect(resolveChangedKeys(base, { operation: 'write', version: 5 }).next).toBe('keep');
  });
});
