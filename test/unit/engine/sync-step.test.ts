/**
 * Sync targets through the executor against an in-memory API, the test playing the operator's status updates (the
 * real ESO and VSO are in test/integration/sync-operators.test.ts): nudge, wait, restart the consumers only after the
 * sync; follow-ups are level-triggered; refusals, failures and deadlines stop the restart.
 */
import { applyJsonPatch } from '../kube/json-patch.ts';
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ClusterAccess } from '../../../lib/kube/cluster-access.ts';
import type { ApiKind, KubeApi } from '../../../lib/kube/kube-api.ts';
import { executeRollouts, type ExecutorOptions } from '../../../lib/engine/rollout-executor.ts';
import { SYNC_ANNOTATIONS } from '../../../lib/workloads/sync-kinds.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { processBatch } from '../../../lib/pipeline/worker.ts';
import {
  messageGroupId,
  rolloutMessages,
  type QueueMessage,
  type RolloutMessage,
} from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: es
    match: { path: "secret/{service}/db" }
    targets:
      - { clusters: [a], namespace: ns, names: ["*"], sync: { kind: ExternalSecret, name: "{service}-db" } }
  - name: vss
    match: { path: "secret/web" }
    targets:
      - { clusters: [a], namespace: ns, sync: { kind: VaultStaticSecret, name: web } }
  - name: plain
    match: { path: "secret/plain" }
    targets:
      - { clusters: [a], namespace: ns, consumers: { secret: plain } }
  - name: csi
    match: { path: "secret/csi" }
    targets:
      - { clusters: [a], namespace: ns, consumers: { secretProviderClass: vault-web } }
`);

const change = (key: string, version: number): SecretChange => kvWrite(key, version);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const merge = (base: unknown, patch: unknown): unknown => {
  if (!isObj(patch) || !isObj(base)) return patch;
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(patch)) out[k] = v === null ? undefined : merge(base[k], v);
  return out;
};

const podWith = (spec: Obj) => ({ template: { metadata: {}, spec } });
const envFrom = (secret: string) => ({ containers: [{ name: 'app', envFrom: [{ secretRef: { name: secret } }] }] });

/** An in-memory namespace: objects by kind and name, merge patches with resourceVersion checks, no watch events. */
function fakeCluster(objects: Array<KubeObject & { kind: string }>) {
  const store = new Map<string, KubeObject>();
  const key = (kind: string, name: string) => `${kind}/${name}`;
  for (const o of objects)
    store.set(key(o.kind, o.metadata?.name ?? ''), {
      ...o,
      metadata: { namespace: 'ns', resourceVersion: '1', ...o.metadata },
    });
  const patches: string[] = [];
  const api: KubeApi = {
    stats: { requests: 0, watches: 0, watchEvents: 0 },
    read: async (kind, _ns, name) => {
      const o = store.get(key(kind.kind, name));
      if (!o) throw new ApiException(404, 'x', { message: 'not found' }, {});
      return structuredClone(o);
    },
    list: async (kind: ApiKind) =>
      [...store.entries()].filter(([k]) => k.startsWith(`${kind.kind}/`)).map(([, o]) => structuredClone(o)),
    patch: async (kind, _ns, name, body, _s, dryRun) => {
      const o = store.get(key(kind.kind, name));
      if (!o) throw new ApiException(404, 'x', {}, {});
      if (
        !Array.isArray(body) &&
        (body.metadata as { resourceVersion?: string }).resourceVersion !== o.metadata?.resourceVersion
      )
        throw new ApiException(409, 'x', { message: 'conflict' }, {});
      if (dryRun) return structuredClone(o);
      const next = (Array.isArray(body) ? applyJsonPatch(o, body) : merge(o, body)) as KubeObject;
      const changed =
        JSON.stringify({ ...next, metadata: { ...next.metadata, resourceVersion: '' } }) !==
        JSON.stringify({ ...o, metadata: { ...o.metadata, resourceVersion: '' } });
      next.metadata = {
        ...next.metadata,
        resourceVersion: changed ? String(Number(o.metadata?.resourceVersion) + 1) : o.metadata?.resourceVersion,
      };
      if (changed) patches.push(key(kind.kind, name));
      store.set(key(kind.kind, name), next);
      return structuredClone(next);
    },
    create: async (body) => body,
    resource: async () => ({ plural: 'x', namespaced: true }),
    request: async () => ({}),
    listForWatch: async (kind) => ({
      items: [...store.entries()].filter(([k]) => k.startsWith(`${kind.kind}/`)).map(([, o]) => structuredClone(o)),
      resourceVersion: '1',
    }),
    watch: (_k, _ns, options) =>
      new Promise<void>((resolve) => options.signal?.addEventListener('abort', () => resolve(), { once: true })),
  };
  /** The operator's status update (what ESO or VSO would write). */
  const operator = (kind: string, name: string, status: Obj) => {
    const o = store.get(key(kind, name));
    if (!o) throw new Error(`no ${kind}/${name}`);
    store.set(key(kind, name), {
      ...o,
      status: { ...o.status, ...status },
      metadata: { ...o.metadata, resourceVersion: String(Number(o.metadata?.resourceVersion) + 1) },
    });
  };
  return { store, api, patches, operator, get: (kind: string, name: string) => store.get(key(kind, name)) };
}

let now = Date.parse('2026-11-21T00:00:00Z');
const optionsFor = (api: KubeApi, extra: Partial<ExecutorOptions> = {}): ExecutorOptions => ({
  access: async (name) => ({ kubeConfig: {} as never, server: name, insecureSkipTLSVerify: false }) as ClusterAccess,
  apiFor: () => api,
  retryEnv: { sleep: async () => {}, random: () => 0, now: () => 0 },
  clock: { now: () => now, monotonic: () => 0 },
  ...extra,
});
const run = (api: KubeApi, changes: SecretChange[], extra: Partial<ExecutorOptions> = {}) =>
  executeRollouts(table, planRollouts(table, changes).targets, optionsFor(api, extra));
const brief = (results: Awaited<ReturnType<typeof run>>) =>
  results.map(
    (r) => `${r.kind}/${r.name} ${r.outcome}${r.reason ? ` (${r.reason})` : ''}${r.rollout ? ` ${r.rollout}` : ''}`,
  );

const workloads = (): Array<KubeObject & { kind: string }> => [
  { kind: 'Deployment', metadata: { name: 'orders' }, spec: podWith(envFrom('orders-db')) },
  { kind: 'Deployment', metadata: { name: 'unrelated' }, spec: podWith(envFrom('other')) },
  {
    kind: 'CronJob',
    metadata: { name: 'report' },
    spec: {
      jobTemplate: {
        spec: podWith({ containers: [{ name: 'c' }], volumes: [{ name: 'v', secret: { secretName: 'orders-db' } }] }),
      },
    },
  },
];
const synced = (at: string, version = 'after') => ({
  refreshTime: at,
  syncedResourceVersion: version,
  conditions: [{ type: 'Ready', status: 'True', reason: 'SecretSynced', lastTransitionTime: '2026-11-01T00:00:00Z' }],
});

describe('sync targets', () => {
  it('nudges the ExternalSecret, restarts nothing until ESO has synced, then restarts only its consumers; a replay restarts nothing', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([
      {
        kind: 'ExternalSecret',
        metadata: { name: 'orders-db' },
        spec: { target: { name: 'orders-db' } },
        status: synced('2026-11-20T23:00:00Z', 'before'),
      },
      ...workloads(),
    ]);
    const first = await run(fake.api, [change('orders/db', 3)]);
    expect(brief(first)).toEqual(['ExternalSecret/orders-db restarted (sync requested) progressing']);
    expect(fake.patches).toEqual(['ExternalSecret/orders-db']);
    expect(fake.get('ExternalSecret', 'orders-db')?.metadata?.annotations).toMatchObject({
      [SYNC_ANNOTATIONS.requestedAt]: '2026-11-21T00:00:00.000Z',
      [SYNC_ANNOTATIONS.observed]: 'before',
    });

    // A follow-up before ESO synced: the same token, so no second nudge; still waiting.
    const waiting = await run(fake.api, [change('orders/db', 3)]);
    expect(brief(waiting)).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) progressing',
    ]);
    expect(fake.patches).toHaveLength(1);

    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:02Z'));
    now += 3000;
    const done = await run(fake.api, [change('orders/db', 3)]);
    expect(brief(done)).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/orders restarted',
      'CronJob/report restarted',
    ]);
    expect(done[0]?.detail).toBe('restarting the consumers of Secret orders-db: Deployment/orders, CronJob/report');
    expect(done[1]?.detail).toBe('consumes Secret orders-db: envFrom of container app (secretRef)');
    expect(fake.patches).toEqual(['ExternalSecret/orders-db', 'Deployment/orders', 'CronJob/report']);

    const replay = await run(fake.api, [change('orders/db', 3)]);
    expect(brief(replay)).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/orders unchanged (already restarted for this version)',
      'CronJob/report unchanged (already restarted for this version)',
    ]);
    expect(fake.patches).toHaveLength(3);

    // A newer version nudges again.
    await run(fake.api, [change('orders/db', 4)]);
    expect(fake.patches).toHaveLength(4);
  });

  it.each([
    ['refreshPolicy CreatedOnce', { refreshPolicy: 'CreatedOnce' }, /CreatedOnce/],
    [
      'Periodic with refreshInterval 0',
      { refreshPolicy: 'Periodic', refreshInterval: '0s' },
      /use refreshPolicy: OnChange/,
    ],
  ])('refuses an ExternalSecret with %s, and patches nothing', async (_name, spec, why) => {
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec }, ...workloads()]);
    const [result, ...rest] = await run(fake.api, [change('orders/db', 3)]);
    expect(rest).toEqual([]);
    expect(result).toMatchObject({ kind: 'ExternalSecret', outcome: 'skipped', reason: 'sync refused' });
    expect(result?.detail).toMatch(why);
    expect(fake.patches).toEqual([]);
  });

  it("SecretSyncedError fails the target with ESO's message and restarts nothing", async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec: {} }, ...workloads()]);
    await run(fake.api, [change('orders/db', 3)]);
    fake.operator('ExternalSecret', 'orders-db', {
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'SecretSyncedError',
          message: 'could not get secret data from provider',
          lastTransitionTime: '2026-11-21T00:00:01Z',
        },
      ],
    });
    const [result, ...rest] = await run(fake.api, [change('orders/db', 3)]);
    expect(rest).toEqual([]);
    expect(result).toMatchObject({ outcome: 'failed', reason: 'sync failed', rollout: 'failed' });
    expect(result?.detail).toBe(
      'ESO reports SecretSyncedError: could not get secret data from provider; its consumers were not restarted',
    );
    expect(fake.patches).toEqual(['ExternalSecret/orders-db']);
  });

  it('a sync not done within its timeout (from the nudge recorded on the resource) fails the target', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec: {} }, ...workloads()]);
    await run(fake.api, [change('orders/db', 3)]);
    now += 5 * 60_000;
    const [result] = await run(fake.api, [change('orders/db', 3)]);
    expect(result).toMatchObject({ outcome: 'failed', reason: 'sync timeout', rollout: 'timeout' });
    expect(result?.detail).toMatch(
      /^External Secrets Operator did not sync within 300 s of the nudge: waiting for ESO to refresh/,
    );
  });

  it('within a follow budget the sync is followed, and what is not done by then comes back progressing (a follow-up)', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec: {} }, ...workloads()]);
    const results = await run(fake.api, [change('orders/db', 3)], { follow: { budgetMs: 30 } });
    expect(brief(results)).toEqual(['ExternalSecret/orders-db restarted (sync requested) progressing']);
    expect(results[0]?.detail).toMatch(/a follow-up checks again/);
  });

  it('VaultStaticSecret: VSO restarts its rolloutRestartTargets itself; vault-rollout restarts only the other consumers, and says so', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([
      {
        kind: 'VaultStaticSecret',
        metadata: { name: 'web' },
        spec: { destination: { name: 'web-db' }, rolloutRestartTargets: [{ kind: 'Deployment', name: 'web' }] },
        status: { secretMAC: 'mac-1' },
      },
      { kind: 'Deployment', metadata: { name: 'web' }, spec: podWith(envFrom('web-db')) },
      {
        kind: 'StatefulSet',
        metadata: { name: 'cache' },
        spec: podWith({
          containers: [{ name: 'c', env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'web-db', key: 'p' } } }] }],
        }),
      },
    ]);
    await run(fake.api, [change('web', 2)]);
    fake.operator('VaultStaticSecret', 'web', { secretMAC: 'mac-2' });
    const results = await run(fake.api, [change('web', 2)]);
    expect(brief(results)).toEqual([
      'VaultStaticSecret/web unchanged (already requested for this version) complete',
      'StatefulSet/cache restarted',
    ]);
    expect(results[0]?.detail).toBe(
      'restarting the consumers of Secret web-db: StatefulSet/cache; Vault Secrets Operator restarts Deployment/web itself (rolloutRestartTargets): not restarted again',
    );
    expect(fake.patches).toEqual(['VaultStaticSecret/web', 'StatefulSet/cache']);
  });

  it('consumers of a Secret or a SecretProviderClass restart without a sync step; none found is said, not silent', async () => {
    const fake = fakeCluster([
      { kind: 'Deployment', metadata: { name: 'api' }, spec: podWith(envFrom('plain')) },
      {
        kind: 'DaemonSet',
        metadata: { name: 'agent' },
        spec: podWith({
          containers: [{ name: 'c' }],
          volumes: [
            {
              name: 's',
              csi: { driver: 'secrets-store.csi.k8s.io', volumeAttributes: { secretProviderClass: 'vault-web' } },
            },
          ],
        }),
      },
    ]);
    expect(brief(await run(fake.api, [change('plain', 1), change('csi', 1)]))).toEqual([
      'Deployment/api restarted',
      'DaemonSet/agent restarted',
    ]);
    const none = fakeCluster([]);
    const [result] = await run(none.api, [change('plain', 1)]);
    expect(result).toMatchObject({
      kind: 'Secret',
      name: 'plain',
      outcome: 'skipped',
      reason: 'no workload matched',
      detail: 'no workload in ns references Secret plain',
    });
  });

  it('a missing ExternalSecret fails the target, naming the operator', async () => {
    const fake = fakeCluster(workloads());
    const [result] = await run(fake.api, [change('orders/db', 3)]);
    expect(result).toMatchObject({ outcome: 'failed', reason: 'not found' });
    expect(result?.detail).toMatch(/does not exist \(or the External Secrets Operator CRD is not installed\)/);
  });

  it('a dry run nudges nothing and lists the consumers that would restart', async () => {
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec: {} }, ...workloads()]);
    expect(brief(await run(fake.api, [change('orders/db', 3)], { dryRun: true }))).toEqual([
      'ExternalSecret/orders-db dry-run',
      'Deployment/orders dry-run',
      'CronJob/report dry-run',
    ]);
    expect(fake.patches).toEqual([]);
  });

  it('the worker hands a sync still in progress back to the queue, and the follow-up restarts the consumers once ESO has synced', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const fake = fakeCluster([{ kind: 'ExternalSecret', metadata: { name: 'orders-db' }, spec: {} }, ...workloads()]);
    const requeued: RolloutMessage[] = [];
    const deps = {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: optionsFor(fake.api),
      follow: { requeue: async (m: RolloutMessage) => void requeued.push(m) },
      now: () => now,
    };
    const [message] = rolloutMessages('a', [change('orders/db', 3)], '2026-11-21T00:00:00Z');
    const first = await processBatch([{ messageId: 'm1', body: JSON.stringify(message), groupId: 'a' }], deps);
    expect(first.failed).toEqual([]);
    expect(brief(first.results)).toEqual(['ExternalSecret/orders-db restarted (sync requested) progressing']);
    expect(requeued).toHaveLength(1);

    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:01Z'));
    now += 2000;
    const followUp = await processBatch(
      [{ messageId: 'm2', body: JSON.stringify(requeued[0]), groupId: messageGroupId(requeued[0] as RolloutMessage) }],
      {
        ...deps,
        queue: { send: async (ms: readonly QueueMessage[]) => void requeued.push(...(ms as RolloutMessage[])) },
      },
    );
    // The consumers' rollouts are followed like any other: still progressing, so one more follow-up.
    expect(brief(followUp.results)).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/orders restarted progressing',
      'CronJob/report restarted none',
    ]);
    expect(fake.patches).toEqual(['ExternalSecret/orders-db', 'Deployment/orders', 'CronJob/report']);
    // It restarted a consumer the continuation did not name: a fresh copy names it for the next look.
    expect(requeued.map((m) => m.follow)).toMatchObject([
      { since: '2026-11-21T00:00:00.000Z', round: 1, pending: ['ns/ExternalSecret/orders-db'] },
      { since: '2026-11-21T00:00:00.000Z', round: 2, pending: ['ns/Deployment/orders'] },
    ]);
  });
});

describe("key-level restarts of a sync target's consumers: keys found without a keys: line", () => {
  it("maps the Secret keys a pod reads (secretKeyRef, volume items) back through the ExternalSecret's remoteRef.property", async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const es = {
      kind: 'ExternalSecret',
      metadata: { name: 'orders-db' },
      spec: {
        target: { name: 'orders-db' },
        data: [
          { secretKey: 'DB_PASSWORD', remoteRef: { key: 'orders/db', property: 'password' } },
          { secretKey: 'API', remoteRef: { key: 'orders/db', property: 'api_key' } },
        ],
      },
      status: synced('2026-11-20T23:00:00Z', 'before'),
    };
    const fake = fakeCluster([
      es,
      {
        kind: 'Deployment',
        metadata: { name: 'pw' },
        spec: podWith({
          containers: [
            { name: 'c', env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'orders-db', key: 'DB_PASSWORD' } } }] },
          ],
        }),
      },
      {
        kind: 'Deployment',
        metadata: { name: 'api' },
        spec: podWith({
          containers: [{ name: 'c' }],
          volumes: [{ name: 'v', secret: { secretName: 'orders-db', items: [{ key: 'API', path: 'api' }] } }],
        }),
      },
      { kind: 'Deployment', metadata: { name: 'all' }, spec: podWith(envFrom('orders-db')) },
    ]);
    const keyed = (version: number, changedKeys?: string[]) => ({
      ...change('orders/db', version),
      id: `id-${version}`,
      ...(changedKeys ? { changedKeys } : {}),
    });
    await run(fake.api, [keyed(1)]);
    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:02Z', 'v1'));
    now += 3000;
    expect(brief(await run(fake.api, [keyed(1)]))).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/all restarted',
      'Deployment/api restarted',
      'Deployment/pw restarted',
    ]);
    await run(fake.api, [keyed(2, ['password'])]);
    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:05Z', 'v2'));
    now += 3000;
    const second = await run(fake.api, [keyed(2, ['password'])]);
    expect(brief(second)).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/all restarted',
      'Deployment/api skipped (keys unchanged)',
      'Deployment/pw restarted',
    ]);
    expect(second.find((r) => r.name === 'api')?.detail).toBe(
      'keys api_key unchanged in v2; consumes Secret orders-db: secret volume v',
    );
  });

  it('declared keys on a sync target: the ExternalSecret is nudged all the same, its consumers are skipped when none of their keys changed', async () => {
    now = Date.parse('2026-11-21T00:00:00Z');
    const keyedTable = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: es
    match: { path: "secret/orders/db" }
    targets:
      - { clusters: [a], namespace: ns, sync: { kind: ExternalSecret, name: orders-db }, keys: [password] }
`);
    const fake = fakeCluster([
      {
        kind: 'ExternalSecret',
        metadata: { name: 'orders-db' },
        spec: { target: { name: 'orders-db' } },
        status: synced('2026-11-20T23:00:00Z', 'before'),
      },
      { kind: 'Deployment', metadata: { name: 'orders' }, spec: podWith(envFrom('orders-db')) },
    ]);
    const go = (c: SecretChange) =>
      executeRollouts(keyedTable, planRollouts(keyedTable, [c]).targets, optionsFor(fake.api));
    await go({ ...change('orders/db', 1), id: 'id-1' });
    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:02Z', 'v1'));
    now += 3000;
    await go({ ...change('orders/db', 1), id: 'id-1' });
    const nudge = await go({ ...change('orders/db', 2), id: 'id-2', changedKeys: ['api_key'] });
    expect(brief(nudge)).toEqual(['ExternalSecret/orders-db restarted (sync requested) progressing']);
    fake.operator('ExternalSecret', 'orders-db', synced('2026-11-21T00:00:05Z', 'v2'));
    now += 3000;
    expect(brief(await go({ ...change('orders/db', 2), id: 'id-2', changedKeys: ['api_key'] }))).toEqual([
      'ExternalSecret/orders-db unchanged (already requested for this version) complete',
      'Deployment/orders skipped (keys unchanged)',
    ]);
  });
});
