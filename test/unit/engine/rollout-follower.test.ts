import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeApi } from '../../../lib/kube/kube-api.ts';
import { ANNOTATIONS } from '../../../lib/plan/restart-record.ts';
import {
  describeRollout,
  followRollouts,
  startFollower,
  type FollowedRollout,
  type FollowTarget,
} from '../../../lib/engine/rollout-follower.ts';
import { newestVersion } from '../../../lib/engine/shared-watch.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { fakeClusters } from '../kube/fake-kube.ts';

const access = (server: string) => ({ kubeConfig: {} as never, server, insecureSkipTLSVerify: false });
const NOW = Date.parse('2026-11-21T00:00:00Z');
const clock = { now: () => NOW };

function target(api: KubeApi, name: string, extra: Partial<FollowTarget> = {}): FollowTarget {
  return {
    id: name,
    cluster: 'a',
    api,
    descriptor: WORKLOAD_KINDS.Deployment,
    namespace: 'ns',
    name,
    restartToken: 'tok',
    startedAt: NOW,
    timeoutMs: 600_000,
    ...extra,
  };
}

/** A Deployment at generation 2 whose controller reports these counts. */
const deployment =
  (status: Record<string, unknown>, replicas = 3) =>
  (o: KubeObject): KubeObject => ({
    ...o,
    metadata: { ...o.metadata, generation: 2 },
    spec: { replicas, template: { metadata: { annotations: { [ANNOTATIONS.restartToken]: 'tok' } } } },
    status: { observedGeneration: 2, ...status },
  });

const rolling = { replicas: 4, updatedReplicas: 1, availableReplicas: 3 };
const done = { replicas: 3, updatedReplicas: 3, availableReplicas: 3 };

/** Resolves once every id has reported a progressing state through onProgress (the watch is open then). */
function progressSpy(ids: string[]) {
  const seen = new Map<string, FollowedRollout>();
  let release!: () => void;
  const ready = new Promise<void>((r) => (release = r));
  return {
    seen,
    ready,
    onProgress: (id: string, s: FollowedRollout) => {
      seen.set(id, s);
      if (ids.every((i) => seen.has(i))) release();
    },
  };
}

describe('followRollouts', () => {
  it('shares one LIST and one WATCH per namespace and kind, and answers complete when the controller says so', async () => {
    const fake = fakeClusters({ a: ['x', 'y'] });
    fake.update('a/x', deployment(rolling));
    fake.update('a/y', deployment(rolling));
    const api = fake.apiFor(access('a'));
    const spy = progressSpy(['x', 'y']);
    const following = followRollouts([target(api, 'x'), target(api, 'y')], {
      budgetMs: 60_000,
      clock,
      onProgress: spy.onProgress,
    });
    await spy.ready;
    await vitestWaitFor(() => fake.watchers.size === 1);
    fake.update('a/x', deployment(done));
    fake.update('a/y', deployment(done));
    const results = await following;
    expect(results.get('x')).toEqual({
      rollout: 'complete',
      rolloutMs: 0,
      pods: { desired: 3, updated: 3, ready: 3 },
      message: '3 new pods available',
    });
    expect(results.get('y')?.rollout).toBe('complete');
    expect(fake.calls.filter((c) => c.op === 'listForWatch' || c.op === 'watch').map((c) => c.op)).toEqual([
      'listForWatch',
      'watch',
    ]);
    expect(api.stats.requests).toBe(2);
    expect(fake.watchers.size).toBe(0);
  });

  it('reports failed with counts and the controller reason', async () => {
    const fake = fakeClusters({ a: ['x'] });
    fake.update(
      'a/x',
      deployment({
        replicas: 3,
        updatedReplicas: 3,
        availableReplicas: 1,
        conditions: [
          {
            type: 'Progressing',
            status: 'False',
            reason: 'ProgressDeadlineExceeded',
            message: 'ReplicaSet "x-2" has timed out progressing.',
          },
        ],
      }),
    );
    const api = fake.apiFor(access('a'));
    const results = await followRollouts([target(api, 'x', { startedAt: NOW - 600_000 })], { budgetMs: 60_000, clock });
    expect(results.get('x')).toEqual({
      rollout: 'failed',
      pods: { desired: 3, updated: 3, ready: 1 },
      message:
        '2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded (ReplicaSet "x-2" has timed out progressing.)',
    });
  });

  it('answers progressing when the budget ends first, and timeout when the deadline has passed', async () => {
    const fake = fakeClusters({ a: ['x', 'y'] });
    fake.update('a/x', deployment(rolling));
    fake.update('a/y', deployment(rolling));
    const api = fake.apiFor(access('a'));
    const results = await followRollouts([target(api, 'x'), target(api, 'y', { startedAt: NOW - 700_000 })], {
      budgetMs: 0,
      clock,
    });
    expect(results.get('x')?.rollout).toBe('progressing');
    expect(results.get('x')?.message).toContain('1 of 3 new pods created');
    expect(results.get('y')).toMatchObject({
      rollout: 'timeout',
      message: '3 of 3 new pods not Ready after 700 s (deadline): 1 of 3 new pods created',
    });
  });

  it('one look asks for a state no older than the newest of its restarts, not for a consistent read', async () => {
    const fake = fakeClusters({ a: ['x', 'y'] });
    fake.update('a/x', deployment(rolling));
    fake.update('a/y', deployment(rolling));
    const api = fake.apiFor(access('a'));
    const asked: unknown[] = [];
    const spied: KubeApi = { ...api, listForWatch: (k, ns, o) => (asked.push(o), api.listForWatch(k, ns, o)) };
    const look = (targets: FollowTarget[]) => followRollouts(targets, { budgetMs: 0, once: true, clock });
    await look([target(spied, 'x', { resourceVersion: '97' }), target(spied, 'y', { resourceVersion: '120' })]);
    await look([target(spied, 'x', { resourceVersion: '97' }), target(spied, 'y')]);
    expect(asked).toEqual([{ notOlderThan: '120' }, {}]);
  });

  it.each([
    [['5', '12', '9'], '12'],
    [['9223372036854775806', '9223372036854775807'], '9223372036854775807'],
    [['100000000000000000000'], undefined],
    [['7'], '7'],
    [['7', undefined], undefined],
    [['7', 'abc'], undefined],
    [['007'], undefined],
    [[], undefined],
  ])('the newest of %j is %s', (versions, newest) => {
    expect(newestVersion(versions)).toBe(newest);
  });

  it('relists after 410 Gone and keeps following', async () => {
    const fake = fakeClusters({ a: ['x'] });
    fake.update('a/x', deployment(rolling));
    const api = fake.apiFor(access('a'));
    const following = followRollouts([target(api, 'x')], { budgetMs: 60_000, clock });
    await vitestWaitFor(() => fake.watchers.size === 1);
    fake.breakWatches('a', new ApiException(410, 'HTTP 410', { code: 410, reason: 'Expired' }, {}));
    await vitestWaitFor(() => fake.calls.filter((c) => c.op === 'watch').length === 2 && fake.watchers.size === 1);
    fake.update('a/x', deployment(done));
    expect((await following).get('x')?.rollout).toBe('complete');
    expect(fake.calls.filter((c) => c.op === 'listForWatch').length).toBe(2);
  });

  it('a deleted workload is failed; a CronJob has nothing to wait for', async () => {
    const fake = fakeClusters({ a: ['x', 'cron'] });
    fake.update('a/x', deployment(rolling));
    const api = fake.apiFor(access('a'));
    const following = followRollouts([target(api, 'x'), target(api, 'cron', { descriptor: WORKLOAD_KINDS.CronJob })], {
      budgetMs: 60_000,
      clock,
    });
    await vitestWaitFor(() => fake.watchers.size === 1);
    fake.update('a/x', (o) => o, 'DELETED');
    const results = await following;
    expect(results.get('x')).toEqual({ rollout: 'failed', message: 'Deployment ns/x no longer exists' });
    expect(results.get('cron')?.rollout).toBe('none');
  });

  it('an unreachable cluster ends in timeout naming the last error, and does not touch other clusters', async () => {
    const fake = fakeClusters({ a: ['x'], b: ['x'] }, [
      {
        cluster: 'a',
        op: 'listForWatch',
        error: () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
        times: 1000,
      },
    ]);
    fake.update('b/x', deployment(done));
    const a = fake.apiFor(access('a'));
    const b = fake.apiFor(access('b'));
    let now = NOW;
    const results = await followRollouts(
      [target(a, 'x', { id: 'ax', timeoutMs: 50 }), target(b, 'x', { id: 'bx', cluster: 'b' })],
      { budgetMs: 60_000, clock: { now: () => (now += 10) } },
    );
    expect(results.get('ax')?.rollout).toBe('timeout');
    expect(results.get('ax')?.message).toContain('last error: unreachable');
    expect(results.get('bx')?.rollout).toBe('complete');
  });

  it('notes a later restart of the same workload', async () => {
    const fake = fakeClusters({ a: ['x'] });
    fake.update('a/x', deployment(done));
    const api = fake.apiFor(access('a'));
    const results = await followRollouts([target(api, 'x', { restartToken: 'older' })], { budgetMs: 60_000, clock });
    expect(results.get('x')?.message).toContain('restarted again since');
  });
});

describe('startFollower (targets that join while it runs)', () => {
  /** x, y and z rolling, a follower, and the fake's API recording the fieldSelector of every LIST and WATCH. */
  function threeRolling() {
    const fake = fakeClusters({ a: ['x', 'y', 'z'] });
    for (const n of ['x', 'y', 'z']) fake.update(`a/${n}`, deployment(rolling));
    const api = fake.apiFor(access('a'));
    const requests: string[] = [];
    const wrapped: KubeApi = {
      ...api,
      stats: api.stats,
      listForWatch: (k, n, o) => (requests.push(`list ${o?.fieldSelector ?? '*'}`), api.listForWatch(k, n, o)),
      watch: (k, n, o) => (requests.push(`watch ${o.fieldSelector ?? '*'}`), api.watch(k, n, o)),
    };
    return { fake, api: wrapped, requests, follower: startFollower({ budgetMs: 60_000, clock }) };
  }

  it('a target that joins an open watch is answered from it: no LIST or WATCH of its own', async () => {
    const { fake, api, requests, follower } = threeRolling();
    const x = follower.follow(target(api, 'x'));
    const y = follower.follow(target(api, 'y'));
    await vitestWaitFor(() => fake.watchers.size === 1);
    fake.update('a/x', deployment(done));
    expect((await x).rollout).toBe('complete');
    // y still rolls; z joins the open watch, and its status is known already.
    fake.update('a/z', deployment(done));
    expect((await follower.follow(target(api, 'z'))).rollout).toBe('complete');
    fake.update('a/y', deployment(done));
    expect((await y).rollout).toBe('complete');
    expect(requests).toEqual(['list *', 'watch *']);
    // Not sealed: the watch stays open for the next target; sealed with nothing pending, it ends.
    expect(fake.watchers.size).toBe(1);
    follower.seal();
    await vitestWaitFor(() => fake.watchers.size === 0);
  });

  it('stop() ends every watch at once, answering what still rolls `progressing` (a process shutting down)', async () => {
    const { fake, api, follower } = threeRolling();
    const x = follower.follow(target(api, 'x'));
    const y = follower.follow(target(api, 'y'));
    await vitestWaitFor(() => fake.watchers.size === 1);
    follower.stop();
    expect((await Promise.all([x, y])).map((f) => f.rollout)).toEqual(['progressing', 'progressing']);
    expect((await x).message).toContain('no longer followed');
    await vitestWaitFor(() => fake.watchers.size === 0);
  });

  it('a single workload is watched by name until a second one joins; then the namespace, once', async () => {
    const { fake, api, requests, follower } = threeRolling();
    const x = follower.follow(target(api, 'x'));
    await vitestWaitFor(() => fake.watchers.size === 1);
    const y = follower.follow(target(api, 'y'));
    await vitestWaitFor(() => requests.length === 4 && fake.watchers.size === 1);
    const z = follower.follow(target(api, 'z'));
    for (const n of ['x', 'y', 'z']) fake.update(`a/${n}`, deployment(done));
    expect((await Promise.all([x, y, z])).map((f) => f.rollout)).toEqual(['complete', 'complete', 'complete']);
    expect(requests).toEqual(['list metadata.name=x', 'watch metadata.name=x', 'list *', 'watch *']);
    follower.seal();
  });

  it('what the watch saw of an older generation of the restarted object is not its answer', async () => {
    const fake = fakeClusters({ a: ['x', 'y'] });
    fake.update('a/x', deployment(rolling));
    // y: complete at generation 2 as the watch last saw it; this restart made generation 3.
    fake.update('a/y', deployment(done));
    const api = fake.apiFor(access('a'));
    const follower = startFollower({ budgetMs: 60_000, clock });
    const x = follower.follow(target(api, 'x'));
    await vitestWaitFor(() => fake.watchers.size === 1);
    const states: string[] = [];
    const y = follower.follow(target(api, 'y', { uid: 'uid-y', generation: 3 }));
    void y.then((f) => states.push(f.rollout));
    await new Promise((r) => setImmediate(r));
    expect(states).toEqual([]);
    // The controller's status of generation 3 follows on the same stream.
    fake.update('a/y', (o) => ({
      ...deployment(done)(o),
      metadata: { ...o.metadata, generation: 3 },
      status: { observedGeneration: 3, ...done },
    }));
    expect((await y).rollout).toBe('complete');
    // Another object under the same name (deleted and created again) is judged as it is, as before.
    const other = follower.follow(target(api, 'x', { id: 'x2', uid: 'uid-other', generation: 9 }));
    fake.update('a/x', deployment(done));
    expect((await other).rollout).toBe('complete');
    expect((await x).rollout).toBe('complete');
    follower.seal();
  });
});

describe('describeRollout', () => {
  it.each([
    [
      'complete',
      { state: 'complete', message: '3 new pods available', pods: { desired: 3, updated: 3, ready: 3 } },
      '3 new pods available',
    ],
    [
      'failed',
      { state: 'failed', message: 'ProgressDeadlineExceeded', pods: { desired: 3, updated: 3, ready: 1 } },
      '2 of 3 new pods not Ready after 600 s: ProgressDeadlineExceeded',
    ],
    [
      'timeout',
      { state: 'progressing', message: '1 of 3 new pods not available', pods: { desired: 3, updated: 3, ready: 2 } },
      '1 of 3 new pods not Ready after 600 s (deadline): 1 of 3 new pods not available',
    ],
    ['timeout', undefined, 'not complete after 600 s (deadline): no status read'],
  ] as const)('%s', (state, health, text) => {
    expect(describeRollout(state, health as never, 600_000)).toBe(text);
  });
});

async function vitestWaitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setImmediate(r));
  if (!check()) throw new Error('condition never held');
}

describe('followRollouts without watch permission', () => {
  it('falls back to a LIST every pollMs when the watch is forbidden', async () => {
    const fake = fakeClusters({ a: ['x'] }, [
      {
        cluster: 'a',
        op: 'watch',
        error: () => new ApiException(403, 'HTTP 403', { reason: 'Forbidden' }, {}),
        times: 1,
      },
    ]);
    fake.update('a/x', deployment(rolling));
    const api = fake.apiFor(access('a'));
    let lists = 0;
    const following = followRollouts([target(api, 'x')], {
      budgetMs: 60_000,
      clock,
      pollMs: 1,
      onProgress: () => {
        if (++lists === 2) fake.update('a/x', deployment(done));
      },
    });
    expect((await following).get('x')?.rollout).toBe('complete');
    expect(fake.calls.filter((c) => c.op === 'watch')).toHaveLength(1);
    expect(fake.calls.filter((c) => c.op === 'listForWatch').length).toBeGreaterThanOrEqual(2);
  });
});
