/**
 * The property of for arbitrary sequences of writes, patches, deletes and undeletes of one path, seen
 * through two audit devices or the event feed, lost, held back and batched, replayed, with the baseline store
 * expiring at random, no workload that uses a changed key is ever skipped. The whole chain runs: real audit entries
 * (HMACs per device salt) through the source parser, the intake's comparison and store, the planner, and the
 * engine's decision (decideRestart, keyLevelSkip). A skip is checked against what the workload runs.
 */
import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { keyLevelSkip } from '../../../lib/plan/changed-keys.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { decideRestart, type RecordedVersions } from '../../../lib/plan/restart-record.ts';
import { resolveKeyChanges } from '../../../lib/pipeline/key-changes.ts';
import { MemoryKeyBaselineStore } from '../../../lib/rotations/key-baselines.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { parseInput } from '../../../lib/sources/parse.ts';

const KEYS = ['a', 'b', 'c', 'd'] as const;
const VALUES = ['x', 'y', 'z'] as const;
const PATH = 'secret/app/db';

const table = loadRoutingTable(`clusters:
  k: { kubeconfig: { env: K } }
vault: { mounts: { secret: 2 } }
routes:
  - name: db
    match: { path: "${PATH}", operations: [write, delete, destroy, undelete] }
    targets:
      - { clusters: [k], namespace: ns, kind: Deployment, name: w-a, keys: [a] }
      - { clusters: [k], namespace: ns, kind: Deployment, name: w-b, keys: [b] }
      - { clusters: [k], namespace: ns, kind: Deployment, name: w-ab, keys: [a, b] }
      - { clusters: [k], namespace: ns, kind: Deployment, name: w-cd, keys: [c, d] }
      - { clusters: [k], namespace: ns, kind: Deployment, name: w-all }
`);
const USES: Record<string, readonly string[]> = {
  'w-a': ['a'],
  'w-b': ['b'],
  'w-ab': ['a', 'b'],
  'w-cd': ['c', 'd'],
  'w-all': KEYS,
};

type Value = (typeof VALUES)[number];
type Delivery = 'A' | 'B' | 'AB' | 'event' | 'lost' | 'held' | 'twice';
type Op =
  | { kind: 'write'; data: Partial<Record<string, Value>> }
  | { kind: 'patch'; set: Partial<Record<string, Value | null>> }
  | { kind: 'delete' }
  | { kind: 'undelete' }
  | { kind: 'expire' };

const valueMap = <V>(value: fc.Arbitrary<V>) =>
  fc.dictionary(fc.constantFrom(...KEYS), value, { maxKeys: 4 }) as fc.Arbitrary<Partial<Record<string, V>>>;
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: valueMap(fc.constantFrom(...VALUES)).map((data) => ({ kind: 'write' as const, data })) },
  {
    weight: 3,
    arbitrary: valueMap(fc.option(fc.constantFrom(...VALUES), { nil: null }))
      .filter((s) => Object.keys(s).length > 0)
      .map((set) => ({ kind: 'patch' as const, set })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'delete' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'undelete' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'expire' as const }) },
);
const step = fc.record({
  op,
  delivery: fc.constantFrom<Delivery>('A', 'A', 'A', 'B', 'AB', 'event', 'lost', 'held', 'twice'),
  heldFirst: fc.boolean(),
});

const SALTS = { A: 'salt-of-device-a', B: 'salt-of-device-b' } as const;
const hmac = (device: keyof typeof SALTS, value: string) =>
  `hmac-sha256:${createHmac('sha256', SALTS[device]).update(value).digest('hex')}`;

/** Vault's side: versions of the path and whether the current one is deleted. */
class Vault {
  version = 0;
  data: Record<string, Value> = {};
  deleted = false;
}

/** What a workload reads of the path now: its keys' values, or that the secret is deleted. */
const readable = (vault: Vault, uses: readonly string[]): string =>
  vault.deleted ? 'DELETED' : uses.map((k) => `${k}=${vault.data[k] ?? '-'}`).join(',');

describe('key-level restarts: no workload that uses a changed key is ever skipped', () => {
  it('holds for arbitrary sequences of writes, patches, deletes and undeletes', async () => {
    // Skips and restarts seen over all runs: the property is not vacuous.
    let skips = 0;
    let restarts = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 30 }), async (steps) => {
        const vault = new Vault();
        const store = new MemoryKeyBaselineStore();
        const records = new Map<string, RecordedVersions>(Object.keys(USES).map((w) => [w, {}]));
        // What each workload runs: what it read when it last started (all start before the first version).
        const running = new Map<string, string>(
          Object.keys(USES).map((w) => [w, readable(vault, USES[w] as readonly string[])]),
        );
        let held: string[] = [];
        let clock = Date.parse('2026-11-20T10:00:00Z');

        const deliver = async (lines: readonly string[]) => {
          const parsed = parseInput(`${lines.join('\n')}\n`, { mounts: table.mounts });
          expect(parsed.rejected).toEqual([]);
          const routed = planRollouts(table, parsed.changes).routed;
          const { changes } = await resolveKeyChanges(parsed.changes, routed, store, clock);
          for (const target of planRollouts(table, changes).targets) {
            if (target.type !== 'workload' || target.name === undefined) continue;
            const name = target.name;
            const recorded = records.get(name) ?? {};
            const decision = decideRestart(recorded, target);
            if (decision.action !== 'restart') continue;
            const skip = keyLevelSkip(target, recorded);
            if (skip !== undefined) {
              // The property: a skipped workload already runs what it would read if restarted now.
              expect([name, skip, running.get(name)]).toEqual([
                name,
                skip,
                readable(vault, USES[name] as readonly string[]),
              ]);
              skips++;
            } else {
              running.set(name, readable(vault, USES[name] as readonly string[]));
              restarts++;
            }
            records.set(name, decision.versions);
          }
        };

        for (const [i, { op: o, delivery, heldFirst }] of steps.entries()) {
          clock += 1000;
          if (o.kind === 'expire') {
            store.clearAll();
            continue;
          }
          const time = new Date(clock).toISOString();
          const entries: Partial<Record<'A' | 'B' | 'event', string>> = {};
          if (o.kind === 'write' || (o.kind === 'patch' && (vault.version === 0 || vault.deleted))) {
            const data =
              o.kind === 'write'
                ? o.data
                : (Object.fromEntries(Object.entries(o.set).filter(([, v]) => v !== null)) as Record<string, Value>);
            vault.version++;
            vault.data = { ...data } as Record<string, Value>;
            vault.deleted = false;
            for (const d of ['A', 'B'] as const) {
              entries[d] = JSON.stringify({
                type: 'response',
                time,
                request: {
                  id: `r${i}`,
                  operation: vault.version === 1 ? 'create' : 'update',
                  path: `secret/data/app/db`,
                  mount_point: 'secret/',
                  mount_type: 'kv',
                  data: { data: Object.fromEntries(Object.entries(vault.data).map(([k, v]) => [k, hmac(d, v)])) },
                },
                response: { data: { version: vault.version, deletion_time: hmac(d, '') } },
              });
            }
            entries.event = JSON.stringify({
              id: `e${i}`,
              time,
              data: {
                event_type: 'kv-v2/data-write',
                plugin_info: { mount_path: 'secret/', plugin: 'kv' },
                event: {
                  metadata: { modified: 'true', path: 'secret/data/app/db', current_version: String(vault.version) },
                },
              },
            });
          } else if (o.kind === 'patch') {
            vault.version++;
            const next = { ...vault.data };
            for (const [k, v] of Object.entries(o.set)) {
              if (v === null || v === undefined) delete next[k];
              else next[k] = v;
            }
            vault.data = next;
            for (const d of ['A', 'B'] as const) {
              entries[d] = JSON.stringify({
                type: 'response',
                time,
                request: {
                  id: `r${i}`,
                  operation: 'patch',
                  path: `secret/data/app/db`,
                  mount_point: 'secret/',
                  mount_type: 'kv',
                  data: {
                    data: Object.fromEntries(
                      Object.entries(o.set).map(([k, v]) => [k, v === null || v === undefined ? null : hmac(d, v)]),
                    ),
                  },
                },
                response: { data: { version: vault.version, deletion_time: hmac(d, '') } },
              });
            }
            entries.event = JSON.stringify({
              id: `e${i}`,
              time,
              data: {
                event_type: 'kv-v2/data-patch',
                plugin_info: { mount_path: 'secret/', plugin: 'kv' },
                event: {
                  metadata: { modified: 'true', path: 'secret/data/app/db', current_version: String(vault.version) },
                },
              },
            });
          } else {
            if (vault.version === 0 || vault.deleted === (o.kind === 'delete')) continue;
            vault.deleted = o.kind === 'delete';
            const path = o.kind === 'delete' ? 'secret/data/app/db' : 'secret/undelete/app/db';
            for (const d of ['A', 'B'] as const)
              entries[d] = JSON.stringify({
                type: 'response',
                time,
                request: {
                  id: `r${i}`,
                  operation: o.kind === 'delete' ? 'delete' : 'update',
                  path,
                  mount_point: 'secret/',
                  mount_type: 'kv',
                },
                response: { mount_type: 'kv' },
              });
            entries.event = JSON.stringify({
              id: `e${i}`,
              time,
              data: {
                event_type: o.kind === 'delete' ? 'kv-v2/data-delete' : 'kv-v2/undelete',
                plugin_info: { mount_path: 'secret/', plugin: 'kv' },
                event: { metadata: { modified: 'true', path, current_version: String(vault.version) } },
              },
            });
          }
          const now: string[] =
            delivery === 'lost'
              ? []
              : delivery === 'held'
                ? []
                : delivery === 'AB'
                  ? [entries.A as string, entries.B as string]
                  : delivery === 'twice'
                    ? [entries.A as string, entries.A as string]
                    : [entries[delivery] as string];
          if (delivery === 'held') {
            held.push(entries.A as string);
            continue;
          }
          if (now.length === 0) continue;
          const batch = heldFirst ? [...held, ...now] : [...now, ...held];
          held = [];
          // One batch per entry (two intakes, two messages), except what was held: it comes together with this one.
          if (delivery === 'AB' || delivery === 'twice') {
            await deliver(batch.slice(0, batch.length - 1));
            await deliver(batch.slice(-1));
          } else await deliver(batch);
        }
      }),
      { numRuns: 300 },
    );
    expect(skips).toBeGreaterThan(50);
    expect(restarts).toBeGreaterThan(skips);
  });
});
