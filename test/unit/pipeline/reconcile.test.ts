import { describe, expect, it } from 'vitest';
import { currentChange, DEFAULT_RECONCILE_LIMITS, selects } from '../../../lib/pipeline/reconcile.ts';
import { reconcileCluster } from '../../../lib/pipeline/reconcile-cluster.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { readRecord, recordedSkips } from '../../../lib/plan/restart-record.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import type { KvMetadata } from '../../../lib/vault/metadata-client.ts';

const NOW = Date.parse('2026-11-23T12:00:00Z');
const meta = (
  versions: KvMetadata['versions'],
  current = Math.max(...Object.keys(versions).map(Number)),
): KvMetadata => ({
  namespace: '',
  mount: 'secret',
  key: 'app/db',
  currentVersion: current,
  oldestVersion: 1,
  createdTime: '2026-11-01T00:00:00Z',
  updatedTime: '2026-11-23T11:00:00.123456789Z',
  versions,
});
const v = (createdTime: string, deletionTime: string | null = null, destroyed = false) => ({
  createdTime,
  deletionTime,
  destroyed,
});

describe("currentChange: the change that stands for a path's current state", () => {
  it.each([
    [
      'a written version',
      meta({ 1: v('2026-11-01T00:00:00Z'), 2: v('2026-11-20T00:00:00.5Z') }),
      { operation: 'write', version: 2, time: '2026-11-20T00:00:00.5Z' },
    ],
    [
      'a deleted current version',
      meta({ 3: v('2026-11-20T00:00:00Z', '2026-11-21T00:00:00Z') }),
      { operation: 'delete', version: 3, time: '2026-11-21T00:00:00Z' },
    ],
    [
      'a deletion scheduled later (delete_version_after) is still a write',
      meta({ 3: v('2026-11-20T00:00:00Z', '2026-12-21T00:00:00Z') }),
      { operation: 'write', version: 3 },
    ],
    [
      'a destroyed current version',
      meta({ 4: v('2026-11-20T00:00:00Z', null, true) }),
      { operation: 'destroy', version: 4, time: '2026-11-23T11:00:00.123456789Z' },
    ],
  ])('%s', (_what, metadata, expected) => {
    expect(currentChange(metadata, 'routes', NOW)).toMatchObject({
      ...expected,
      path: 'secret/app/db',
      source: 'reconcile',
      kvVersion: 2,
    });
  });

  it('nothing for a key without versions', () => {
    expect(currentChange({ ...meta({}), currentVersion: 0 }, 'routes', NOW)).toBeUndefined();
  });

  it("the same restart identity as the feed's change of that version", () => {
    expect(currentChange(meta({ 2: v('2026-11-20T00:00:00Z') }), 'routes', NOW)?.id).toBe(
      'reconcile:secret/app/db@2:write',
    );
  });
});

describe('selects: a workload selector against pod labels', () => {
  it.each([
    [{ matchLabels: { app: 'a' } }, { app: 'a', x: '1' }, true],
    [{ matchLabels: { app: 'a' } }, { app: 'b' }, false],
    [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['web', 'api'] }] }, { tier: 'api' }, true],
    [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['web'] }] }, { tier: 'web' }, false],
    [{ matchExpressions: [{ key: 'canary', operator: 'DoesNotExist' }] }, { app: 'a' }, true],
    [{ matchExpressions: [{ key: 'canary', operator: 'Exists' }] }, { app: 'a' }, false],
    [undefined, { app: 'a' }, false],
  ])('%j on %j -> %s', (selector, labels, expected) => expect(selects(selector, labels)).toBe(expected));
});

describe('reconcile confirms a key-level skip with Vault', () => {
  const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: db
    match: { path: "secret/app/db" }
    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: pw, keys: [password] }]
`);
  /** pw restarted for v3, then skipped by keys at `skippedAt` (as the engine records it), beside a skip of another path. */
  function world(skippedAt: number) {
    const fake = fakeClusters({ a: ['pw'] });
    const o = fake.store.get('a/pw') as KubeObject;
    o.spec = { template: { metadata: { annotations: { 'vault-rollout.io/versions': '{"secret/app/db":3}' } } } };
    o.metadata = {
      ...o.metadata,
      annotations: {
        'vault-rollout.io/versions': JSON.stringify({
          'secret/app/db': { v: skippedAt, skipped: ['password'] },
          'secret/other': { v: 2, skipped: ['x'] },
        }),
      },
    };
    const deps = {
      table,
      vault: { readMetadata: async () => undefined, listMetadata: async () => [] } as never,
      access: options(fake.apiFor).access,
      apiFor: fake.apiFor,
      queue: { send: async () => {} },
      now: () => NOW,
    };
    return { fake, deps, stored: () => fake.store.get('a/pw') as KubeObject };
  }
  const vaultCurrent = (version: number) =>
    planRollouts(table, [
      currentChange(meta({ [version]: v('2026-11-20T00:00:00Z') }), 'routes', NOW) as NonNullable<
        ReturnType<typeof currentChange>
      >,
    ]).targets;

  it('a skip of the version Vault says is current is recorded as that version; other skips stay', async () => {
    const w = world(4);
    const [verdict] = await reconcileCluster(w.deps, DEFAULT_RECONCILE_LIMITS, 'a', vaultCurrent(4));
    expect(verdict?.report).toMatchObject({ state: 'recorded', detail: 'a key-level skip confirmed with Vault' });
    expect(readRecord(WORKLOAD_KINDS.Deployment, w.stored())['secret/app/db']).toBe(4);
    expect(recordedSkips(w.stored())).toEqual({ 'secret/other': { v: 2, skipped: ['x'] } });
  });

  it('a skip of another version confirms nothing: the workload is judged on its record and pods as before', async () => {
    const w = world(5);
    const [verdict] = await reconcileCluster(w.deps, DEFAULT_RECONCILE_LIMITS, 'a', vaultCurrent(4));
    expect(verdict?.report.detail).not.toBe('a key-level skip confirmed with Vault');
    expect(verdict?.report.paths).toEqual(['secret/app/db']);
  });
});
