/**
 * Rollouts on the three real test clusters: every kind restarted and checked on the object, discovery by
 * selector and annotation, exactly-once per version, dry-run, and failures that stay in their own cluster.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import { waitFor } from '../clusters/kube-http.ts';
import {
  alteredKubeconfig,
  closedPort,
  cluster,
  clusters,
  createNamespace,
  createWorkload,
  deleteNamespace,
  events,
  expectReplicaSets,
  fileAccess,
  getWorkload,
  replicaSetCount,
  routingTable,
  settledWorkload,
  scopedKubeconfig,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-rollouts');
const SLOW = { timeout: 120_000 };
const fast: Partial<ExecutorOptions> = {
  retry: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200, maxRetryAfterMs: 1000 },
};

let seq = 0;
/** An audit response line for a KV v2 write of `secret/<key>` at `version`. */
function write(key: string, version: number, time = '2026-11-20T10:00:00Z'): string {
  seq++;
  return JSON.stringify({
    time,
    type: 'response',
    request: {
      id: `req-${seq}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/${key}`,
    },
    response: { data: { version } },
  });
}

async function apply(
  table: RoutingTable,
  lines: string[],
  options: Partial<ExecutorOptions> = {},
): Promise<RolloutResult[]> {
  const parsed = parseInput(lines.join('\n'), { mounts: table.mounts });
  expect(parsed.rejected).toEqual([]);
  const plan = planRollouts(table, parsed.changes);
  const results = await executeRollouts(table, plan.targets, { access: fileAccess, ...fast, ...options });
  return results.sort((a, b) => `${a.cluster}/${a.kind}/${a.name}`.localeCompare(`${b.cluster}/${b.kind}/${b.name}`));
}

const brief = (r: RolloutResult) => `${r.cluster} ${r.kind}/${r.name}: ${r.outcome}${r.reason ? ` (${r.reason})` : ''}`;

beforeAll(async () => {
  for (const c of clusters) await createNamespace(c.name, NS);
}, SLOW.timeout);
afterAll(async () => {
  for (const c of clusters) await deleteNamespace(c.name, NS);
});

describe('every kind, restarted and checked on the object', () => {
  const kinds = ['Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Rollout'] as const;
  const table = () =>
    routingTable(
      kinds
        .map(
          (kind) => `  - name: ${kind.toLowerCase()}
    match: { path: "secret/kinds/${kind.toLowerCase()}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: ${kind}, name: ${kind.toLowerCase()}-app }]`,
        )
        .join('\n'),
    );

  beforeAll(async () => {
    for (const kind of kinds) await createWorkload('alpha', NS, kind, `${kind.toLowerCase()}-app`);
  }, SLOW.timeout);

  it('restarts each with the change time and records the version', async () => {
    const results = await apply(
      table(),
      kinds.map((k) => write(`kinds/${k.toLowerCase()}`, 3, '2026-11-20T10:00:00Z')),
    );
    expect(results.map(brief)).toEqual([
      'alpha CronJob/cronjob-app: restarted',
      'alpha DaemonSet/daemonset-app: restarted',
      'alpha Deployment/deployment-app: restarted',
      'alpha Rollout/rollout-app: restarted',
      'alpha StatefulSet/statefulset-app: restarted',
    ]);
    for (const kind of ['Deployment', 'StatefulSet', 'DaemonSet'] as const) {
      const annotations =
        (await getWorkload('alpha', NS, kind, `${kind.toLowerCase()}-app`)).spec.template?.metadata?.annotations ?? {};
      expect(annotations).toMatchObject({
        'kubectl.kubernetes.io/restartedAt': '2026-11-20T10:00:00Z',
        'vault-rollout.io/versions': `{"secret/kinds/${kind.toLowerCase()}":3}`,
      });
    }
    const cron = (await getWorkload('alpha', NS, 'CronJob', 'cronjob-app')).spec as {
      jobTemplate: { spec: { template: { metadata: { annotations: Record<string, string> } } } };
    };
    expect(cron.jobTemplate.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']).toBe(
      '2026-11-20T10:00:00Z',
    );
    const rollout = await getWorkload('alpha', NS, 'Rollout', 'rollout-app');
    expect(rollout.spec.restartAt).toBe('2026-11-20T10:00:00Z');
    expect(rollout.metadata.annotations?.['vault-rollout.io/versions']).toBe('{"secret/kinds/rollout":3}');
    expect(rollout.spec.template?.metadata?.annotations).toBeUndefined();
    await expectReplicaSets('alpha', NS, 'deployment-app', 2);
  });

  it('records a SecretRotated event naming the path and version, never a value', async () => {
    const found = await waitFor(
      async () => (await events('alpha', NS, 'deployment-app')).find((e) => e.reason === 'SecretRotated'),
      { timeoutMs: 10_000, what: 'SecretRotated event' },
    );
    expect(found.message).toBe(
      'Restarted by vault-rollout for Vault secret secret/kinds/deployment version 3 (routes: deployment)',
    );
  });

  it('is unchanged on a replay: same resourceVersion, no new ReplicaSet', async () => {
    const before = await settledWorkload('alpha', NS, 'Deployment', 'deployment-app');
    const results = await apply(table(), [write('kinds/deployment', 3, '2026-11-20T10:00:00Z')]);
    expect(results.map(brief)).toEqual([
      'alpha Deployment/deployment-app: unchanged (already restarted for this version)',
    ]);
    expect((await getWorkload('alpha', NS, 'Deployment', 'deployment-app')).metadata.resourceVersion).toBe(
      before.metadata.resourceVersion,
    );
    await expectReplicaSets('alpha', NS, 'deployment-app', 2);
  });

  it('skips an older version', async () => {
    const results = await apply(table(), [write('kinds/deployment', 2)]);
    expect(results.map(brief)).toEqual(['alpha Deployment/deployment-app: skipped (older version)']);
    expect(results[0]?.detail).toBe('older than recorded: secret/kinds/deployment is at 3, newer than 2');
  });

  it('persists nothing in dry-run', async () => {
    const before = await getWorkload('alpha', NS, 'Deployment', 'deployment-app');
    const results = await apply(table(), [write('kinds/deployment', 4)], { dryRun: true });
    expect(results.map(brief)).toEqual(['alpha Deployment/deployment-app: dry-run']);
    const after = await getWorkload('alpha', NS, 'Deployment', 'deployment-app');
    expect(after.metadata.generation).toBe(before.metadata.generation);
    expect(after.spec.template?.metadata?.annotations).toEqual(before.spec.template?.metadata?.annotations);
    expect(await replicaSetCount('alpha', NS, 'deployment-app')).toBe(2);
  });

  it('restarts again for a newer version, once', async () => {
    const results = await apply(table(), [
      write('kinds/deployment', 5, '2026-11-20T11:00:00Z'),
      write('kinds/deployment', 4, '2026-11-20T10:30:00Z'),
      write('kinds/deployment', 5, '2026-11-20T11:00:00Z'),
    ]);
    expect(results.map(brief)).toEqual(['alpha Deployment/deployment-app: restarted']);
    await expectReplicaSets('alpha', NS, 'deployment-app', 3);
    const annotations =
      (await getWorkload('alpha', NS, 'Deployment', 'deployment-app')).spec.template?.metadata?.annotations ?? {};
    expect(annotations['vault-rollout.io/versions']).toBe('{"secret/kinds/deployment":5}');
  });

  it('skips a paused Deployment and says why', async () => {
    await createWorkload('alpha', NS, 'Deployment', 'paused-app', {}, { paused: true });
    const t = routingTable(`  - name: paused
    match: { path: "secret/paused" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: paused-app }]`);
    const results = await apply(t, [write('paused', 1)]);
    expect(results.map(brief)).toEqual(['alpha Deployment/paused-app: skipped (paused)']);
  });
});

describe('discovery', () => {
  it('restarts every workload a label selector finds, in every cluster', async () => {
    for (const c of ['alpha', 'beta']) {
      await createWorkload(c, NS, 'Deployment', 'tls-a', { labels: { 'vault-rollout.io/tls': 'shared' } });
      await createWorkload(c, NS, 'Deployment', 'tls-b', { labels: { 'vault-rollout.io/tls': 'shared' } });
      await createWorkload(c, NS, 'Deployment', 'other', { labels: { 'vault-rollout.io/tls': 'own' } });
    }
    const t = routingTable(`  - name: tls
    match: { path: "secret/shared/tls" }
    targets: [{ clusters: [alpha, beta], namespace: ${NS}, kind: Deployment, selector: "vault-rollout.io/tls=shared" }]`);
    const results = await apply(t, [write('shared/tls', 1)]);
    expect(results.map(brief)).toEqual([
      'alpha Deployment/tls-a: restarted',
      'alpha Deployment/tls-b: restarted',
      'beta Deployment/tls-a: restarted',
      'beta Deployment/tls-b: restarted',
    ]);
  });

  it('restarts the workloads that opt in with vault-rollout.io/watch, and only those', async () => {
    await createWorkload('gamma', NS, 'Deployment', 'watcher', {
      annotations: { 'vault-rollout.io/watch': 'legacy/batch/*, secret/unrelated' },
    });
    await createWorkload('gamma', NS, 'Deployment', 'not-watching', {
      annotations: { 'vault-rollout.io/watch': 'legacy/other/**' },
    });
    await createWorkload('gamma', NS, 'Deployment', 'no-annotation');
    const t = routingTable(`  - name: batch
    match: { path: "legacy/batch/*" }
    targets: [{ clusters: [gamma], namespace: ${NS}, kind: Deployment, annotated: true }]`);
    const line = JSON.stringify({
      time: '2026-11-20T10:00:00Z',
      type: 'response',
      request: {
        id: 'v1-write',
        operation: 'create',
        mount_type: 'kv',
        mount_point: 'legacy/',
        path: 'legacy/batch/reports',
      },
    });
    const results = await apply(t, [line]);
    expect(results.map(brief)).toEqual(['gamma Deployment/watcher: restarted']);
    // A KV v1 change has no version: the same entry again is a replay.
    expect((await apply(t, [line])).map(brief)).toEqual([
      'gamma Deployment/watcher: unchanged (already restarted for this version)',
    ]);
  });
});

describe('failures stay in their own cluster', () => {
  it('forbidden, unreachable and wrong-CA clusters fail with their reason while the others restart', async () => {
    const scopedNs = uniqueName('vr-scoped');
    await createNamespace('beta', scopedNs);
    const scoped = await scopedKubeconfig('beta', uniqueName('vault-rollout-scoped'), scopedNs);
    const stopped = alteredKubeconfig(cluster('alpha').vaultRolloutKubeconfig, {
      server: `https://127.0.0.1:${await closedPort()}`,
    });
    const wrongCa = alteredKubeconfig(cluster('alpha').vaultRolloutKubeconfig, { caFile: cluster('gamma').caFile });
    for (const c of clusters) await createWorkload(c.name, NS, 'Deployment', 'isolated');
    const t = routingTable(
      `  - name: isolated
    match: { path: "secret/isolated" }
    targets: [{ clusters: [alpha, beta, gamma, scoped, stopped, wrong-ca], namespace: ${NS}, kind: Deployment, name: isolated }]`,
      { scoped, stopped, 'wrong-ca': wrongCa },
    );
    const started = performance.now();
    const results = await apply(t, [write('isolated', 1)]);
    const elapsed = performance.now() - started;
    expect(results.map(brief)).toEqual([
      'alpha Deployment/isolated: restarted',
      'beta Deployment/isolated: restarted',
      'gamma Deployment/isolated: restarted',
      'scoped Deployment/isolated: failed (forbidden)',
      'stopped Deployment/isolated: failed (unreachable)',
      'wrong-ca Deployment/isolated: failed (tls)',
    ]);
    expect(results.find((r) => r.cluster === 'stopped')?.attempts).toBe(3);
    // Bounded: three attempts with short backoff, not a hang.
    expect(elapsed).toBeLessThan(60_000);
    await deleteNamespace('beta', scopedNs);
  });

  it('says not found for a workload that does not exist', async () => {
    const t = routingTable(`  - name: missing
    match: { path: "secret/missing" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: StatefulSet, name: nope }]`);
    expect((await apply(t, [write('missing', 1)])).map(brief)).toEqual(['alpha StatefulSet/nope: failed (not found)']);
  });
});
