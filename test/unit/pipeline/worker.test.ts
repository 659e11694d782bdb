/** The worker's batch semantics: FIFO per cluster, partial failures, poison messages, credential refresh. */
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import {
  followFromEnv,
  MAX_CONTINUATION_MS,
  planMessage,
  processBatch,
  watchFromEnv,
  type QueueRecord,
} from '../../../lib/pipeline/worker.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { changesByCluster } from '../../../lib/pipeline/intake.ts';
import {
  deduplicationId,
  followGroupId,
  MAX_FOLLOW_ROUNDS,
  messageGroupId,
  rolloutMessages,
  type QueueMessage,
  type RolloutMessage,
} from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { SqliteSlotStore } from '../../../lib/slots/sqlite-slot-store.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a, b], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);

const change = (key: string, version: number): SecretChange => kvWrite(key, version);

let n = 0;
/** Queue records as the intake would queue them for these changes, one message per cluster. */
function records(...changes: SecretChange[]): QueueRecord[] {
  const plan = planRollouts(table, changes);
  return [...changesByCluster(changes, plan)].flatMap(([cluster, cs]) =>
    rolloutMessages(cluster, cs, '2026-11-20T10:00:01Z').map((m) => ({
      messageId: `m${++n}`,
      body: JSON.stringify(m),
      groupId: cluster,
    })),
  );
}

describe('processBatch', () => {
  it('restarts every message, measures the lag, and reports no failure', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const telemetry = memoryTelemetry();
    const out = await processBatch(records(change('api', 1)), {
      table,
      rotations: new MemoryRotationStore(),
      telemetry,
      executor: options(fake.apiFor),
      now: () => Date.parse('2026-11-20T10:00:02Z'),
    });
    expect(out.failed).toEqual([]);
    expect(out.results.map((r) => `${r.cluster}:${r.outcome}`).sort()).toEqual(['a:restarted', 'b:restarted']);
    expect(telemetry.metrics.filter((m) => m.name === 'VaultToPatchLag').map((m) => m.value)).toEqual([2000, 2000]);
  });

  it('fails the message of a failing cluster and the later messages of its group, not the other cluster', async () => {
    const fake = fakeClusters({ a: ['api', 'web'], b: ['api', 'web'] }, [
      { cluster: 'a', op: 'patch', error: () => new ApiException(503, 'x', {}, {}), times: 99 },
    ]);
    const first = records(change('api', 1));
    const second = records(change('web', 1));
    const batch = [...first, ...second];
    const out = await processBatch(batch, {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor, { retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1, maxRetryAfterMs: 1 } }),
    });
    const ids = (cluster: string) => batch.filter((r) => r.groupId === cluster).map((r) => r.messageId);
    expect(out.failed.sort()).toEqual(ids('a').sort());
    // The second message of group a was not processed: its workload was never patched.
    expect(fake.calls.filter((c) => c.cluster === 'a' && c.name === 'web')).toEqual([]);
    expect(out.results.filter((r) => r.cluster === 'b').map((r) => r.outcome)).toEqual(['restarted', 'restarted']);
  });

  it('refuses an unreadable message without holding its group, and says why', async () => {
    const telemetry = memoryTelemetry();
    const fake = fakeClusters({ a: ['api'] });
    const out = await processBatch(
      [
        { messageId: 'poison', body: '{"v":2,"cluster":"a"}', groupId: 'a' },
        ...records(change('api', 1)).filter((r) => r.groupId === 'a'),
      ],
      { table, rotations: new MemoryRotationStore(), telemetry, executor: options(fake.apiFor) },
    );
    expect(out.failed).toEqual([]);
    expect(out.refused).toEqual([{ messageId: 'poison', reason: expect.stringContaining('changes') }]);
    expect(out.results.map((r) => `${r.cluster}:${r.name}:${r.outcome}`)).toEqual(['a:api:restarted']);
    expect(telemetry.lines.find((l) => l.level === 'error')).toMatchObject({
      message: 'refused rollout message',
      fields: { messageId: 'poison', reason: expect.stringContaining('changes') },
    });
    expect(telemetry.metrics.filter((m) => m.name === 'RefusedMessages').map((m) => m.value)).toEqual([1]);
  });

  it('drops cached credentials of a cluster that refused them', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] }, [
      { cluster: 'a', op: 'read', error: () => new ApiException(401, 'x', {}, {}), times: 1 },
    ]);
    const invalidated: string[] = [];
    const out = await processBatch(records(change('api', 1)), {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      invalidate: (c) => void invalidated.push(c),
    });
    expect(invalidated).toEqual(['a']);
    expect(out.failed).toHaveLength(1);
  });

  it('is safe to redeliver: a message run twice restarts once', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const batch = records(change('api', 3));
    await processBatch(batch, {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
    });
    const again = await processBatch(batch, {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
    });
    expect(again.results.map((r) => r.outcome)).toEqual(['unchanged', 'unchanged']);
  });
});

/** A message as a sender with sqs:SendMessage could forge it. */
const body = (over: Record<string, unknown>) =>
  JSON.stringify({ v: 2, cluster: 'a', changes: [queued('api', 1)], acceptedAt: '2026-11-20T10:00:01Z', ...over });
const queued = (key: string, version: number, mount = 'secret') => ({
  namespace: '',
  mount,
  key,
  operation: 'write',
  version,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id: `id-${key}`,
  time: '2026-11-20T10:00:00Z',
});

describe('processBatch: several clusters in one batch (a batch of up to 10, with settle)', () => {
  it('hands each group back as soon as it is worked: a hanging cluster holds only its own messages', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    let release = (): void => undefined;
    const hanging = new Promise<void>((resolve) => (release = resolve));
    // Cluster a answers nothing until released; b answers at once.
    const apiFor: typeof fake.apiFor = (access) => {
      const api = fake.apiFor(access);
      if (access.server !== 'a') return api;
      return new Proxy(api, {
        get: (target, key) => {
          const value = Reflect.get(target, key) as unknown;
          return typeof value === 'function'
            ? async (...args: unknown[]) => (await hanging, (value as (...a: unknown[]) => unknown).apply(target, args))
            : value;
        },
      });
    };
    const batch = records(change('api', 1));
    const done: Array<{ group: string; failed: string[]; deferred: number }> = [];
    let bDone = (): void => undefined;
    const bWorked = new Promise<void>((resolve) => (bDone = resolve));
    const working = processBatch(batch, {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(apiFor),
      onGroupDone: async (g) => {
        const group = batch.find((r) => r.messageId === g.messageIds[0])?.groupId ?? '?';
        done.push({ group, failed: g.failed, deferred: g.deferred.length });
        if (group === 'b') bDone();
      },
    });
    await bWorked;
    // b is handed back while a still hangs.
    expect(done).toEqual([{ group: 'b', failed: [], deferred: 0 }]);
    release();
    const out = await working;
    expect(done.map((d) => d.group)).toEqual(['b', 'a']);
    expect(out.results.map((r) => `${r.cluster}:${r.outcome}`).sort()).toEqual(['a:restarted', 'b:restarted']);
  });
});

describe("planMessage: a message is changes, and only the worker's own table decides what they restart", () => {
  it.each([
    [
      'a format-1 message carrying a target and a patch',
      JSON.stringify({
        v: 1,
        cluster: 'a',
        targets: [
          {
            type: 'resource',
            cluster: 'b',
            namespace: 'kube-system',
            apiVersion: 'apps/v1',
            kind: 'Deployment',
            name: 'coredns',
            patch: { spec: { template: { spec: { containers: [{ name: 'coredns', image: 'evil' }] } } } },
          },
        ],
        changeIds: [],
        acceptedAt: 'x',
      }),
      'a',
      'format 1',
    ],
    ['a patch smuggled beside the changes', body({ patch: { spec: { replicas: 0 } } }), 'a', 'patch'],
    [
      'a target smuggled into a change',
      body({ changes: [{ ...queued('api', 1), target: { name: 'coredns' } }] }),
      'a',
      'target',
    ],
    ['a cluster that is not the message group', body({ cluster: 'b' }), 'a', 'sent to group "a"'],
    ['a group that is not in the routing table', body({ cluster: 'gamma' }), 'gamma', 'not in the routing table'],
    [
      'a path no route matches',
      body({ changes: [queued('nothing/here', 1, 'other')] }),
      'a',
      'plan nothing in cluster "a"',
    ],
    [
      'a delete the route does not restart for',
      body({ changes: [{ ...queued('api', 1), operation: 'delete' }] }),
      'a',
      'plan nothing',
    ],
    ['no changes at all', body({ changes: [] }), 'a', 'changes'],
    [
      'more changes than a message may carry',
      body({ changes: Array.from({ length: 1001 }, (_, i) => queued(`k${i}`, 1)) }),
      'a',
      'changes',
    ],
    ['a key longer than any change may carry', body({ changes: [queued('k'.repeat(5000), 1)] }), 'a', 'key'],
    ['a body larger than SQS allows', body({ pad: 'x'.repeat(300 * 1024) }), 'a', 'larger than'],
    ['not JSON', 'restart everything', 'a', 'not JSON'],
  ])('refuses %s', (_name, messageBody, groupId, reason) => {
    const planned = planMessage(table, { messageId: 'm', body: messageBody, groupId });
    expect(planned).toEqual({ refused: expect.stringContaining(reason) });
  });

  it("plans a real change in the group's cluster only, whatever other clusters the route reaches", () => {
    const planned = planMessage(table, { messageId: 'm', body: body({}), groupId: 'a' });
    if ('refused' in planned) throw new Error(planned.refused);
    expect(planned.targets.map((t) => `${t.cluster}/${t.namespace}/${t.type === 'workload' ? t.name : ''}`)).toEqual([
      'a/ns/api',
    ]);
    expect(planned.ignoredElsewhere).toBe(1);
  });

  it('never executes a refused message, and a real one behind it in the same group still runs', async () => {
    const fake = fakeClusters({ a: ['api', 'coredns'], b: ['api'] });
    const forged = [
      { messageId: 'f1', body: body({ cluster: 'b' }), groupId: 'a' },
      { messageId: 'f2', body: body({ changes: [queued('coredns/../x', 1, 'other')] }), groupId: 'a' },
    ];
    const out = await processBatch([...forged, ...records(change('api', 2)).filter((r) => r.groupId === 'a')], {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
    });
    expect(out.refused.map((r) => r.messageId)).toEqual(['f1', 'f2']);
    expect(fake.calls.filter((c) => c.op === 'patch').map((c) => `${c.cluster}/${c.name}`)).toEqual(['a/api']);
  });
});

describe('processBatch: following rollouts without waiting them out', () => {
  it('patches, looks once and hands what still rolls to a continuation in a group of its own; each look holds it or re-sends it', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const requeued: RolloutMessage[] = [];
    const follow = { requeue: async (m: RolloutMessage) => void requeued.push(m) };
    const first = records(change('api', 5)).filter((r) => r.groupId === 'a');
    const t0 = Date.now();
    const out = await processBatch(first, {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      follow,
      now: () => t0,
    });
    expect(out.failed).toEqual([]);
    expect(out.deferred).toEqual([]);
    expect(out.results.map((r) => `${r.outcome}:${r.rollout}`)).toEqual(['restarted:progressing']);
    expect(requeued).toHaveLength(1);
    const firstMessage = JSON.parse(first[0]?.body ?? '') as RolloutMessage;
    const continuation = requeued[0] as RolloutMessage;
    expect(continuation).toEqual({
      ...firstMessage,
      follow: {
        since: new Date(t0).toISOString(),
        round: 1,
        until: new Date(t0 + MAX_CONTINUATION_MS).toISOString(),
        pending: ['ns/Deployment/api'],
        lookAt: new Date(t0 + 1000).toISOString(),
      },
    });
    expect(messageGroupId(continuation)).toBe(followGroupId('a', continuation.changes));
    expect(messageGroupId(continuation)).not.toBe('a');
    expect(deduplicationId(continuation)).not.toBe(deduplicationId(firstMessage));
    const group = messageGroupId(continuation);

    // Received before its time: held until then, nothing read, and watched (a rollout that ends earlier wakes it).
    const reads = fake.calls.length;
    const early = await processBatch([{ messageId: 'c0', body: JSON.stringify(continuation), groupId: group }], {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      follow,
      now: () => t0 + 200,
    });
    expect(early.deferred).toEqual([
      {
        messageId: 'c0',
        delayMs: 800,
        watch: [
          {
            cluster: 'a',
            namespace: 'ns',
            kind: 'Deployment',
            name: 'api',
            restartToken: out.results[0]?.restartToken,
          },
        ],
      },
    ]);
    expect(fake.calls.length).toBe(reads);
    // Received again before its time, it was woken (a watch saw a rollout it waits on end): it looks now.
    const woken = await processBatch(
      [{ messageId: 'c0', body: JSON.stringify(continuation), groupId: group, receiveCount: 2 }],
      {
        table,
        rotations: new MemoryRotationStore(),
        telemetry: memoryTelemetry(),
        executor: options(fake.apiFor),
        follow,
        now: () => t0 + 300,
      },
    );
    expect(woken.results.map((r) => `${r.outcome}:${r.rollout}`)).toEqual(['unchanged:progressing']);
    expect(fake.calls.length).toBeGreaterThan(reads);

    // A look restarts nothing again; still rolling: held (a hold is a receive) with the workload to watch.
    const look = await processBatch(
      [{ messageId: 'c1', body: JSON.stringify(continuation), groupId: group, receiveCount: 2 }],
      {
        table,
        rotations: new MemoryRotationStore(),
        telemetry: memoryTelemetry(),
        executor: options(fake.apiFor),
        follow,
        now: () => t0 + 60_000,
      },
    );
    expect(look.results.map((r) => `${r.outcome}:${r.rollout}`)).toEqual(['unchanged:progressing']);
    expect(look.deferred).toEqual([
      {
        messageId: 'c1',
        delayMs: 15_000,
        watch: [
          {
            cluster: 'a',
            namespace: 'ns',
            kind: 'Deployment',
            name: 'api',
            restartToken: look.results[0]?.restartToken,
          },
        ],
      },
    ]);
    // Held twice already: a fresh copy one round later (a new deduplication id), to look at after the delay.
    const queue = { send: async (ms: readonly QueueMessage[]) => void requeued.push(...(ms as RolloutMessage[])) };
    const third = await processBatch(
      [{ messageId: 'c2', body: JSON.stringify(continuation), groupId: group, receiveCount: 3 }],
      {
        table,
        rotations: new MemoryRotationStore(),
        telemetry: memoryTelemetry(),
        executor: options(fake.apiFor),
        follow,
        queue,
        now: () => t0 + 60_000,
      },
    );
    expect(third.deferred).toEqual([]);
    expect(requeued[1]?.follow).toEqual({
      ...continuation.follow,
      round: 2,
      lookAt: new Date(t0 + 75_000).toISOString(),
    });
    expect(fake.calls.filter((c) => c.op === 'patch' && c.cluster === 'a')).toHaveLength(1);

    // Complete: the continuation finishes.
    fake.update('a/api', (o) => ({
      ...o,
      status: { observedGeneration: 99, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
    }));
    const done = await processBatch([{ messageId: 'c3', body: JSON.stringify(requeued[1]), groupId: group }], {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      follow,
      queue,
      now: () => t0 + 80_000,
    });
    expect(done.results.map((r) => `${r.outcome}:${r.rollout}`)).toEqual(['unchanged:complete']);
    expect(done.deferred).toEqual([]);
    expect(requeued).toHaveLength(2);
  });

  it('hands deferred targets (rollout.maxUnavailable, no slot) back as a follow-up; without following, redelivers the message', async () => {
    const bounded = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
rollout: { maxUnavailable: { perCluster: 1 } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);
    const fake = fakeClusters({ a: ['api', 'web'] });
    const plan = planRollouts(bounded, [change('api', 1), change('web', 1)]);
    const batch = [...changesByCluster([change('api', 1), change('web', 1)], plan)].flatMap(([cluster, cs]) =>
      rolloutMessages(cluster, cs, '2026-11-20T10:00:01Z').map((m) => ({
        messageId: `d${++n}`,
        body: JSON.stringify(m),
        groupId: cluster,
      })),
    );
    const requeued: RolloutMessage[] = [];
    const telemetry = memoryTelemetry();
    const executor = options(fake.apiFor, { slots: new SqliteSlotStore(':memory:') });
    const out = await processBatch(batch, {
      table: bounded,
      rotations: new MemoryRotationStore(),
      telemetry,
      executor,
      follow: { requeue: async (m) => void requeued.push(m) },
    });
    expect(out.results.map((r) => r.outcome).sort()).toEqual(['deferred', 'restarted']);
    expect(out.failed).toEqual([]);
    expect(requeued).toHaveLength(1);
    expect(telemetry.lines.find((l) => l.message === 'restarts under way; continuation queued')?.fields).toMatchObject({
      progressing: 1,
      deferred: 1,
    });
    const noFollow = await processBatch(batch, {
      table: bounded,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor,
    });
    expect(noFollow.results.map((r) => r.outcome).sort()).toEqual(['deferred', 'unchanged']);
    expect(noFollow.failed).toEqual(batch.map((r) => r.messageId));
  });

  it('redelivers the message when the follow-up cannot be queued, and stops handing back after the last round', async () => {
    const fake = fakeClusters({ a: ['api'] });
    const failing = { requeue: async () => Promise.reject(new Error('queue down')) };
    const batch = records(change('api', 6)).filter((r) => r.groupId === 'a');
    expect(
      (
        await processBatch(batch, {
          table,
          rotations: new MemoryRotationStore(),
          telemetry: memoryTelemetry(),
          executor: options(fake.apiFor),
          follow: failing,
        })
      ).failed,
    ).toEqual(batch.map((r) => r.messageId));

    const requeued: RolloutMessage[] = [];
    const last = {
      ...(JSON.parse(batch[0]?.body ?? '') as RolloutMessage),
      follow: { since: '2026-11-20T10:00:00Z', round: MAX_FOLLOW_ROUNDS },
    };
    const out = await processBatch([{ messageId: 'last', body: JSON.stringify(last), groupId: 'a', receiveCount: 3 }], {
      table,
      rotations: new MemoryRotationStore(),
      telemetry: memoryTelemetry(),
      executor: options(fake.apiFor),
      follow: { requeue: async (m) => void requeued.push(m) },
    });
    expect(out.failed).toEqual([]);
    expect(requeued).toEqual([]);
  });

  it.each([
    ['a negative round', { since: '2026-11-20T10:00:00Z', round: -1 }],
    ['a round past the last', { since: '2026-11-20T10:00:00Z', round: MAX_FOLLOW_ROUNDS + 1 }],
    ['no time', { since: 'soon', round: 1 }],
    ['a command', { since: '2026-11-20T10:00:00Z', round: 1, restart: 'everything' }],
  ])('refuses a follow-up with %s', (_name, followField) => {
    expect(planMessage(table, { messageId: 'm', body: body({ follow: followField }), groupId: 'a' })).toEqual({
      refused: expect.stringContaining('follow'),
    });
  });
});

describe('following and watching, from the environment', () => {
  it.each([
    [{}, true],
    [{ VAULT_ROLLOUT_FOLLOW: 'on' }, true],
    [{ VAULT_ROLLOUT_FOLLOW: 'off' }, false],
    [{ VAULT_ROLLOUT_FOLLOW: 'false' }, false],
    // The in-line budget of earlier releases: 0 is off, any other number on (nothing follows in line any more).
    [{ VAULT_ROLLOUT_FOLLOW_SECONDS: '0' }, false],
    [{ VAULT_ROLLOUT_FOLLOW_SECONDS: '60' }, true],
    [{ VAULT_ROLLOUT_FOLLOW: 'on', VAULT_ROLLOUT_FOLLOW_SECONDS: '0' }, true],
  ])('followFromEnv(%j) = %s', (env, expected) => {
    expect(followFromEnv(env)).toBe(expected);
  });

  it('refuses what it cannot read, naming the variable', () => {
    expect(() => followFromEnv({ VAULT_ROLLOUT_FOLLOW: 'maybe' })).toThrow(
      'VAULT_ROLLOUT_FOLLOW=maybe must be on or off',
    );
    expect(() => followFromEnv({ VAULT_ROLLOUT_FOLLOW_SECONDS: '-1' })).toThrow(
      /VAULT_ROLLOUT_FOLLOW_SECONDS=-1 must be a number of seconds/,
    );
    expect(() => watchFromEnv({ VAULT_ROLLOUT_WATCH: 'sometimes' })).toThrow(
      'VAULT_ROLLOUT_WATCH=sometimes must be on or off',
    );
  });

  it('watches by default; VAULT_ROLLOUT_WATCH=off does not', () => {
    expect(watchFromEnv({})).toBe(true);
    expect(watchFromEnv({ VAULT_ROLLOUT_WATCH: 'off' })).toBe(false);
  });
});
