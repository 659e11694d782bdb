/**
 * The executor's decisions and retries against an in-memory API (the real clusters are in
 * test/integration/rollouts.test.ts): conflicts, throttling, credentials, grouping of reads.
 */
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { executeRollouts, type ExecutorOptions } from '../../../lib/engine/rollout-executor.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { kvWrite } from '../../secret-changes.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B }, concurrency: 2 }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets:
      - { clusters: [a, b], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }
  - name: harbor
    match: { path: "secret/registry" }
    targets:
      - { clusters: [a], resource: { apiVersion: example.com/v1, kind: Harbor, namespace: ns, name: main }, patch: { spec: { v: "{version}" } } }
`);

const change = (key: string, version: number): SecretChange => kvWrite(key, version);

const run = (fake: ReturnType<typeof fakeClusters>, changes: SecretChange[], extra: Partial<ExecutorOptions> = {}) =>
  executeRollouts(table, planRollouts(table, changes).targets, options(fake.apiFor, extra));

describe('executeRollouts', () => {
  it('restarts, then is unchanged on a replay, and records one event per restart', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const first = await run(fake, [change('api', 2)]);
    expect(first.map((r) => [r.cluster, r.outcome, r.attempts])).toEqual([
      ['a', 'restarted', 1],
      ['b', 'restarted', 1],
    ]);
    expect(fake.calls.filter((c) => c.op === 'create').map((c) => c.name)).toEqual([
      expect.stringMatching(/^api\.vr-[0-9a-f]{16}$/),
      expect.stringMatching(/^api\.vr-/),
    ]);
    const replay = await run(fake, [change('api', 2)]);
    expect(replay.map((r) => r.outcome)).toEqual(['unchanged', 'unchanged']);
  });

  it('reads several named targets of one namespace and kind with one LIST', async () => {
    const fake = fakeClusters({ a: ['x', 'y', 'z'] });
    const results = await run(fake, [change('x', 1), change('y', 1), change('nope', 1)]);
    expect(
      fake.calls.filter((c) => c.cluster === 'a' && c.op !== 'patch' && c.op !== 'create').map((c) => c.op),
    ).toEqual(['list']);
    expect(results.filter((r) => r.cluster === 'a').map((r) => [r.name, r.outcome, r.reason])).toEqual([
      ['nope', 'failed', 'not found'],
      ['x', 'restarted', ''],
      ['y', 'restarted', ''],
    ]);
  });

  it('reads again and decides again after a conflict', async () => {
    const fake = fakeClusters({ a: ['api'] }, [
      { cluster: 'a', op: 'patch', error: () => new ApiException(409, 'x', { message: 'conflict' }, {}), times: 1 },
    ]);
    const [result] = await run(fake, [change('api', 2)]);
    expect(result).toMatchObject({ cluster: 'a', outcome: 'restarted', attempts: 2 });
    expect(fake.calls.filter((c) => c.cluster === 'a').map((c) => c.op)).toEqual([
      'read',
      'patch',
      'read',
      'patch',
      'create',
    ]);
  });

  it('skips when the workload was restarted for a newer version meanwhile', async () => {
    const fake = fakeClusters({ a: ['api'] });
    await run(fake, [change('api', 5)]);
    const [older] = await run(fake, [change('api', 4)]);
    expect(older).toMatchObject({ outcome: 'skipped', reason: 'older version' });
  });

  describe('a Deployment is patched with a JSON Patch guarded by its record as read, not by its resourceVersion', () => {
    const withTemplate = (fake: ReturnType<typeof fakeClusters>, annotations?: Record<string, string>) => {
      const o = fake.store.get('a/api') as KubeObject;
      o.spec = { template: { metadata: { labels: { app: 'api' }, ...(annotations ? { annotations } : {}) } } };
    };
    /** The fake's API, with another writer's change landing between the executor's read and its first patch. */
    const writeBeforePatch = (fake: ReturnType<typeof fakeClusters>, write: (o: KubeObject) => void) => {
      let written = false;
      return (access: Parameters<typeof fake.apiFor>[0]) => {
        const api = fake.apiFor(access);
        return {
          ...api,
          patch: (async (...args) => {
            if (!written && args[2] === 'api') {
              written = true;
              fake.update('a/api', (o) => (write(o), o));
            }
            return api.patch(...args);
          }) as typeof api.patch,
        };
      };
    };
    const planA = (version: number) =>
      planRollouts(table, [change('api', version)]).targets.filter((t) => t.cluster === 'a');

    it("a controller's status write between the read and the patch is no conflict: one attempt", async () => {
      const fake = fakeClusters({ a: ['api'] });
      withTemplate(fake, { team: 'x' });
      const apiFor = writeBeforePatch(fake, (o) => (o.status = { observedGeneration: 9 }));
      const [result] = await executeRollouts(table, planA(2), options(apiFor));
      expect(result).toMatchObject({ outcome: 'restarted', attempts: 1 });
      const body = fake.calls.find((c) => c.op === 'patch')?.body;
      expect(Array.isArray(body) && body[0]).toEqual({
        op: 'test',
        path: '/spec/template/metadata/annotations',
        value: { team: 'x' },
      });
      expect(Array.isArray(body) && body.slice(1).map((op) => op.path)).toContain(
        '/spec/template/metadata/annotations/vault-rollout.io~1versions',
      );
      expect(
        (fake.store.get('a/api')?.spec?.template as { metadata: { annotations: Record<string, string> } }).metadata
          .annotations,
      ).toMatchObject({ team: 'x', 'vault-rollout.io/versions': '{"secret/api":2}' });
    });

    it('a restart by someone else fails the test (422): read again, decide again', async () => {
      const fake = fakeClusters({ a: ['api'] });
      withTemplate(fake, { team: 'x' });
      const apiFor = writeBeforePatch(
        fake,
        (o) => (
          ((o.spec?.template as { metadata: { annotations: Record<string, string> } }).metadata.annotations[
            'vault-rollout.io/versions'
          ] = '{"secret/api":3}'),
          o
        ),
      );
      const [result] = await executeRollouts(table, planA(2), options(apiFor));
      expect(result).toMatchObject({ outcome: 'skipped', reason: 'older version', attempts: 2 });
      expect(fake.calls.filter((c) => c.op === 'patch')).toHaveLength(1);
    });

    it('a template without annotations: its metadata as read guards the new map', async () => {
      const fake = fakeClusters({ a: ['api'] });
      withTemplate(fake);
      const [result] = await executeRollouts(table, planA(2), options(fake.apiFor));
      expect(result).toMatchObject({ outcome: 'restarted', attempts: 1 });
      const body = fake.calls.find((c) => c.op === 'patch')?.body;
      expect(Array.isArray(body) && body.map((op) => [op.op, op.path])).toEqual([
        ['test', '/spec/template/metadata'],
        ['add', '/spec/template/metadata/annotations'],
      ]);
    });
  });

  it('gives up on conflicts after the attempt budget', async () => {
    const fake = fakeClusters({ a: ['api'] }, [
      { cluster: 'a', op: 'patch', error: () => new ApiException(409, 'x', {}, {}), times: 99 },
    ]);
    const [result] = await run(fake, [change('api', 2)], {
      retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1, maxRetryAfterMs: 1 },
    });
    expect(result).toMatchObject({ outcome: 'failed', reason: 'conflict', attempts: 3 });
  });

  it('retries throttling and server errors, and reports the attempts', async () => {
    const fake = fakeClusters({ a: ['api'] }, [
      { cluster: 'a', op: 'read', error: () => new ApiException(429, 'x', {}, { 'retry-after': '1' }), times: 1 },
      { cluster: 'a', op: 'patch', error: () => new ApiException(503, 'x', {}, {}), times: 2 },
    ]);
    const [result] = await run(fake, [change('api', 2)]);
    expect(result).toMatchObject({ outcome: 'restarted', attempts: 3 });
  });

  it('fails every target of a cluster whose credentials cannot be resolved, and only those', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const results = await run(fake, [change('api', 2)], {
      access: async (name) => {
        if (name === 'b') throw new Error('cluster b: env B is not set');
        return { kubeConfig: {} as never, server: name, insecureSkipTLSVerify: false };
      },
    });
    expect(results.map((r) => [r.cluster, r.outcome, r.reason, r.detail ?? ''])).toEqual([
      ['a', 'restarted', '', ''],
      ['b', 'failed', 'credentials', 'cluster b: env B is not set'],
    ]);
  });

  it('does not write in dry-run and records no event', async () => {
    const fake = fakeClusters({ a: ['api'] });
    const [result] = await run(fake, [change('api', 2)], { dryRun: true });
    expect(result?.outcome).toBe('dry-run');
    expect(fake.calls.find((c) => c.op === 'patch')?.dryRun).toBe(true);
    expect(fake.calls.some((c) => c.op === 'create')).toBe(false);
  });

  it('logs, and does not fail the restart, when the event cannot be recorded', async () => {
    const warnings: string[] = [];
    const fake = fakeClusters({ a: ['api'] }, [
      { cluster: 'a', op: 'create', error: () => new ApiException(403, 'x', {}, {}), times: 1 },
    ]);
    const [result] = await run(fake, [change('api', 2)], { logger: { warn: (m) => void warnings.push(m) } });
    expect(result?.outcome).toBe('restarted');
    expect(warnings).toEqual(['could not record the SecretRotated event']);
  });

  it('patches custom resources with the rendered template and the record in metadata', async () => {
    const fake = fakeClusters({ a: ['main'] });
    const result = (await run(fake, [change('registry', 7)])).find((r) => r.kind === 'Harbor');
    expect(result).toMatchObject({ kind: 'Harbor', name: 'main', outcome: 'restarted' });
    const body = fake.calls.find((c) => c.op === 'patch')?.body;
    expect(body).toMatchObject({
      spec: { v: '7' },
      metadata: { resourceVersion: '1', annotations: { 'vault-rollout.io/versions': '{"secret/registry":7}' } },
    });
    expect(
      ((body as { metadata?: unknown } | undefined)?.metadata as { annotations: Record<string, string> }).annotations[
        'kubectl.kubernetes.io/restartedAt'
      ],
    ).toBeUndefined();
  });

  it('reports unchanged when the server finds nothing to change', async () => {
    const fake = fakeClusters({ a: ['api'] });
    const api = fake.apiFor;
    const results = await run(fake, [change('api', 2)], {
      apiFor: (access) => ({
        ...api(access),
        patch: async (_k, _n, name) => ({ metadata: { name, resourceVersion: '1' } }),
      }),
    });
    expect(results[0]).toMatchObject({ outcome: 'unchanged', reason: 'the server found nothing to change' });
  });
});

describe('executeRollouts with follow', () => {
  const complete = (o: KubeObject) => ({
    ...o,
    metadata: { ...o.metadata, generation: 2 },
    spec: { ...o.spec, replicas: 2 },
    status: { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 },
  });

  it('follows restarted workloads to complete, records one RolloutComplete event each, and a replay follows the unchanged ones', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const seen: string[] = [];
    const following = run(fake, [change('api', 2)], {
      follow: {
        budgetMs: 60_000,
        onProgress: (r) => {
          seen.push(`${r.cluster}:${r.outcome}:${r.rollout ?? '-'}`);
          if (r.rollout === 'progressing') fake.update(`${r.cluster}/api`, complete);
        },
      },
    });
    const results = await following;
    expect(results.map((r) => [r.cluster, r.outcome, r.rollout, r.pods, r.rolloutReason])).toEqual([
      ['a', 'restarted', 'complete', { desired: 2, updated: 2, ready: 2 }, '2 new pods available'],
      ['b', 'restarted', 'complete', { desired: 2, updated: 2, ready: 2 }, '2 new pods available'],
    ]);
    expect(seen).toContain('a:restarted:-');
    expect(seen).toContain('a:restarted:complete');
    const events = fake.calls.filter((c) => c.op === 'create').map((c) => c.name);
    expect(events.filter((n) => n?.endsWith('.rollout'))).toEqual([
      expect.stringMatching(/^api\.vr-[0-9a-f]{16}\.rollout$/),
      expect.stringMatching(/^api\.vr-[0-9a-f]{16}\.rollout$/),
    ]);

    const replay = await run(fake, [change('api', 2)], {
      follow: { budgetMs: 60_000, since: Date.parse('2026-11-20T23:59:00Z') },
    });
    expect(replay.map((r) => [r.outcome, r.rollout, r.rolloutMs])).toEqual([
      ['unchanged', 'complete', 60_000],
      ['unchanged', 'complete', 60_000],
    ]);
    // The same event names again: the API server keeps the first (409), nothing is duplicated.
    expect(fake.calls.filter((c) => c.op === 'create' && c.name?.endsWith('.rollout')).map((c) => c.name)).toEqual([
      ...events.filter((n) => n?.endsWith('.rollout')),
      ...events.filter((n) => n?.endsWith('.rollout')),
    ]);
  });

  it('leaves failed, skipped and dry-run results without a rollout, and answers progressing when the budget is spent', async () => {
    const fake = fakeClusters({ a: ['api'] });
    const results = await run(fake, [change('api', 2), change('missing', 1)], { follow: { budgetMs: 0 } });
    const byName = Object.fromEntries(results.filter((r) => r.cluster === 'a').map((r) => [r.name, r]));
    expect(byName.api?.rollout).toBe('progressing');
    expect(byName.missing?.outcome).toBe('failed');
    expect(byName.missing?.rollout).toBeUndefined();
    const dry = await run(fakeClusters({ a: ['api'], b: ['api'] }), [change('api', 3)], {
      dryRun: true,
      follow: { budgetMs: 0 },
    });
    expect(dry.every((r) => r.rollout === undefined)).toBe(true);
  });
});

describe('the watch annotation', () => {
  const annotatedTable = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: batch
    match: { path: "secret/batch/*" }
    targets:
      - { clusters: [a], namespace: ns, kind: Deployment, annotated: true }
`);
  const watching = (fake: ReturnType<typeof fakeClusters>, name: string, value: string) => {
    const object = fake.store.get(`a/${name}`);
    if (object?.metadata) object.metadata.annotations = { 'vault-rollout.io/watch': value };
  };
  const runAnnotated = (
    fake: ReturnType<typeof fakeClusters>,
    warnings: Array<[string, Record<string, unknown> | undefined]>,
  ) =>
    executeRollouts(
      annotatedTable,
      planRollouts(annotatedTable, [change('batch/x', 1)]).targets,
      options(fake.apiFor, { logger: { warn: (m, f) => void warnings.push([m, f]) } }),
    );

  it('ignores a pattern over its bounds, or an annotation over its bounds, and logs why, naming the workload', async () => {
    const fake = fakeClusters({ a: ['good', 'mixed', 'many', 'bad'] });
    watching(fake, 'good', 'secret/batch/*');
    watching(fake, 'mixed', '*a*a*a*a*a*a*a*b, secret/batch/x');
    watching(fake, 'many', Array.from({ length: 40 }, (_, i) => `secret/batch/${i === 39 ? 'x' : i}`).join(','));
    watching(fake, 'bad', 'secret/{x');
    const warnings: Array<[string, Record<string, unknown> | undefined]> = [];
    const results = await runAnnotated(fake, warnings);
    expect(results.map((r) => [r.name, r.outcome])).toEqual([
      ['good', 'restarted'],
      ['mixed', 'restarted'],
    ]);
    expect(warnings).toEqual([
      [
        'ignoring vault-rollout.io/watch patterns of a workload',
        {
          cluster: 'a',
          namespace: 'ns',
          kind: 'Deployment',
          name: 'mixed',
          problems: [
            'pattern "*a*a*a*a*a*a*a*b" ignored: "*a*a*a*a*a*a*a*b" has 8 wildcards and captures; at most 4 per segment',
          ],
        },
      ],
      [
        'ignoring vault-rollout.io/watch patterns of a workload',
        {
          cluster: 'a',
          namespace: 'ns',
          kind: 'Deployment',
          name: 'many',
          problems: ['vault-rollout.io/watch lists 40 patterns; at most 32: it watches nothing'],
        },
      ],
      [
        'ignoring vault-rollout.io/watch patterns of a workload',
        {
          cluster: 'a',
          namespace: 'ns',
          kind: 'Deployment',
          name: 'bad',
          problems: ['pattern "secret/{x" ignored: unclosed "{" in "{x"'],
        },
      ],
    ]);
  });

  it('says in the result which workloads were ignored when none matched', async () => {
    const fake = fakeClusters({ a: ['long'] });
    watching(fake, 'long', `secret/batch/x,${'s/'.repeat(2100)}`);
    const [result] = await runAnnotated(fake, []);
    expect(result).toMatchObject({ outcome: 'skipped', reason: 'no workload matched' });
    expect(result?.detail).toMatch(
      /; ignored: Deployment ns\/long: vault-rollout.io\/watch is 4215 characters long; at most 4096: it watches nothing$/,
    );
  });
});
