/**
 * Rollout health on the real clusters with simulated nodes (kube-scheduler + kwok, see test/clusters/README.md):
 * pods are created by the real controllers, scheduled, become Running and Ready (or not, by the test annotation
 * `vault-rollout.test/readiness`), and vault-rollout follows each restart to complete, failed or timeout.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeApiFor, type KubeApi } from '../../lib/kube/kube-api.ts';
import { executeRollouts, type ExecutorOptions, type RolloutResult } from '../../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import type { RoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import { main } from '../../lib/cli/main.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { startFaultProxy, type FaultProxy } from '../faults/fault-proxy.ts';
import {
  admin,
  clusters,
  createNamespace,
  deleteNamespace,
  events,
  fileAccess,
  routingTable,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-health');
const SLOW = { timeout: 180_000 };
const READINESS = 'vault-rollout.test/readiness';

let seq = 0;
function write(key: string, version: number): string {
  seq++;
  return JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `req-h-${seq}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/${key}`,
    },
    response: { data: { version } },
  });
}

/** Every API object the executor used, so requests per workload can be counted. */
const used = new Set<KubeApi>();
const countingOptions: Partial<ExecutorOptions> = {
  apiFor: (a) => {
    const api = kubeApiFor(a);
    used.add(api);
    return api;
  },
};
const requests = () => [...used].reduce((n, a) => n + a.stats.requests, 0);

async function applyAndFollow(
  table: RoutingTable,
  lines: string[],
  budgetMs = 120_000,
  extra: Partial<ExecutorOptions> = {},
): Promise<RolloutResult[]> {
  const parsed = parseInput(lines.join('\n'), { mounts: table.mounts });
  expect(parsed.rejected).toEqual([]);
  const plan = planRollouts(table, parsed.changes);
  const results = await executeRollouts(table, plan.targets, {
    access: fileAccess,
    ...countingOptions,
    follow: { budgetMs },
    ...extra,
  });
  return results.sort((a, b) => `${a.cluster}/${a.kind}/${a.name}`.localeCompare(`${b.cluster}/${b.kind}/${b.name}`));
}

async function ok(clusterName: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await admin(clusterName).request(method, path, { body });
  if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
  return res.body;
}

const podTemplate = (app: string, readiness?: string) => ({
  metadata: { labels: { app }, ...(readiness ? { annotations: { [READINESS]: readiness } } : {}) },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

async function createDeployment(
  clusterName: string,
  name: string,
  replicas: number,
  readiness?: string,
  spec: Record<string, unknown> = {},
): Promise<void> {
  await ok(clusterName, 'POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, selector: { matchLabels: { app: name } }, template: podTemplate(name, readiness), ...spec },
  });
}

interface Pod {
  metadata: { name: string; annotations?: Record<string, string>; deletionTimestamp?: string };
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }> };
}
const pods = async (clusterName: string, app: string): Promise<Pod[]> =>
  ((await ok(clusterName, 'GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3D${app}`)) as { items: Pod[] })
    .items;
const isReady = (p: Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** Waits until the controller reports the first rollout done, so the restart is the only rollout in flight. */
async function settled(
  clusterName: string,
  kind: 'deployments' | 'statefulsets' | 'daemonsets',
  name: string,
): Promise<void> {
  await waitFor(
    async () => {
      const o = (await ok(clusterName, 'GET', `/apis/apps/v1/namespaces/${NS}/${kind}/${name}`)) as {
        metadata: { generation: number };
        status?: Record<string, number>;
      };
      const s = o.status ?? {};
      if ((s.observedGeneration ?? 0) < o.metadata.generation) return false;
      if (kind === 'daemonsets')
        return (s.numberAvailable ?? 0) === (s.desiredNumberScheduled ?? -1) && (s.desiredNumberScheduled ?? 0) > 0;
      return (s.readyReplicas ?? 0) === (s.replicas ?? -1);
    },
    { timeoutMs: 60_000, what: `${kind} ${name} to be ready before the restart` },
  );
}

beforeAll(async () => {
  for (const c of clusters) await createNamespace(c.name, NS);
}, SLOW.timeout);
afterAll(async () => {
  for (const c of clusters) await deleteNamespace(c.name, NS);
});

describe('rollout health on clusters with nodes', () => {
  const table = () =>
    routingTable(`  - name: web
    match: { path: "secret/web" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: web }]
  - name: slow
    match: { path: "secret/slow" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: slow }]
  - name: never
    match: { path: "secret/never" }
    rollout: { timeout: 2m }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: never }]
  - name: kinds
    match: { path: "secret/kinds" }
    targets:
      - { clusters: [beta], namespace: ${NS}, kind: StatefulSet, name: db }
      - { clusters: [beta], namespace: ${NS}, kind: DaemonSet, name: agent }
      - { clusters: [beta], namespace: ${NS}, kind: CronJob, name: nightly }`);

  it('a 3-replica Deployment rolls to 3 new Ready pods and no old ones', SLOW, async () => {
    await createDeployment('alpha', 'web', 3);
    await settled('alpha', 'deployments', 'web');
    const before = requests();
    const [result] = await applyAndFollow(table(), [write('web', 1)]);
    expect(result).toMatchObject({
      outcome: 'restarted',
      rollout: 'complete',
      pods: { desired: 3, updated: 3, ready: 3 },
    });
    expect(result?.rolloutMs).toBeGreaterThan(0);
    // List, watch, plus read, patch and the two Events: a handful of requests, not a poll loop.
    expect(requests() - before).toBeLessThanOrEqual(8);
    process.stderr.write(
      `[rollout-health] web: complete in ${result?.rolloutMs} ms, ${requests() - before} API requests\n`,
    );
    const token = result?.restartToken;
    const live = (await pods('alpha', 'web')).filter((p) => !p.metadata.deletionTimestamp);
    expect(live).toHaveLength(3);
    for (const p of live) {
      expect(p.metadata.annotations?.['vault-rollout.io/restart-token']).toBe(token);
      expect(isReady(p)).toBe(true);
    }
    // The old pods are on their way out once the rollout is complete; none remains for long.
    await waitFor(
      async () =>
        (await pods('alpha', 'web')).every((p) => p.metadata.annotations?.['vault-rollout.io/restart-token'] === token),
      { timeoutMs: 30_000, what: 'old pods gone' },
    );
    const found = await waitFor(
      async () => (await events('alpha', NS, 'web')).find((e) => e.reason === 'RolloutComplete'),
      { timeoutMs: 10_000, what: 'RolloutComplete event' },
    );
    expect(found.message).toMatch(
      /^Rollout complete after \d+ s \(3\/3 new pods Ready\) for Vault secret secret\/web version 1$/,
    );
    // A re-delivered message: unchanged, its rollout read back as complete, and no second event.
    const [again] = await applyAndFollow(table(), [write('web', 1)]);
    expect(again).toMatchObject({ outcome: 'unchanged', rollout: 'complete' });
    expect((await events('alpha', NS, 'web')).filter((e) => e.reason === 'RolloutComplete')).toHaveLength(1);
  });

  it('slow readiness completes after about 10 s', SLOW, async () => {
    await createDeployment('alpha', 'slow', 1, 'slow');
    await settled('alpha', 'deployments', 'slow');
    const [result] = await applyAndFollow(table(), [write('slow', 1)]);
    expect(result).toMatchObject({
      outcome: 'restarted',
      rollout: 'complete',
      pods: { desired: 1, updated: 1, ready: 1 },
    });
    process.stderr.write(`[rollout-health] slow: complete in ${result?.rolloutMs} ms\n`);
    expect(result?.rolloutMs).toBeGreaterThanOrEqual(9_000);
    expect(result?.rolloutMs).toBeLessThan(60_000);
  });

  it('never-Ready pods fail with the controller reason (ProgressDeadlineExceeded)', SLOW, async () => {
    // Its pods are Running but never Ready; the restart's new ReplicaSet fares no better, and the Deployment
    // controller declares ProgressDeadlineExceeded 10 s after the last progress.
    await createDeployment('alpha', 'never', 2, 'never', { progressDeadlineSeconds: 10 });
    const [result] = await applyAndFollow(table(), [write('never', 1)]);
    expect(result?.outcome).toBe('restarted');
    process.stderr.write(`[rollout-health] never: ${result?.rollout}: ${result?.rolloutReason}\n`);
    expect(result?.rollout).toBe('failed');
    expect(result?.rolloutReason).toMatch(
      /^\d of 2 new pods not Ready after \d+ s: ProgressDeadlineExceeded \(ReplicaSet "never-[a-z0-9]+" has timed out progressing\.\)$/,
    );
    const found = await waitFor(
      async () => (await events('alpha', NS, 'never')).find((e) => e.reason === 'RolloutFailed'),
      { timeoutMs: 10_000, what: 'RolloutFailed event' },
    );
    expect(found.message).toContain('Rollout failed for Vault secret secret/never version 1: ');
  });

  it('StatefulSet and DaemonSet complete on every node, a CronJob has nothing to wait for', SLOW, async () => {
    await ok('beta', 'POST', `/apis/apps/v1/namespaces/${NS}/statefulsets`, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'db' },
      spec: { replicas: 2, serviceName: 'db', selector: { matchLabels: { app: 'db' } }, template: podTemplate('db') },
    });
    await ok('beta', 'POST', `/apis/apps/v1/namespaces/${NS}/daemonsets`, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'agent' },
      spec: { selector: { matchLabels: { app: 'agent' } }, template: podTemplate('agent') },
    });
    await ok('beta', 'POST', `/apis/batch/v1/namespaces/${NS}/cronjobs`, {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { name: 'nightly' },
      spec: {
        schedule: '0 0 1 1 *',
        jobTemplate: {
          spec: {
            template: { spec: { containers: [{ name: 'c', image: 'registry.invalid/c:1' }], restartPolicy: 'Never' } },
          },
        },
      },
    });
    await settled('beta', 'statefulsets', 'db');
    await settled('beta', 'daemonsets', 'agent');
    const results = await applyAndFollow(table(), [write('kinds', 1)]);
    expect(results.map((r) => [r.kind, r.outcome, r.rollout, r.pods])).toEqual([
      ['CronJob', 'restarted', 'none', undefined],
      ['DaemonSet', 'restarted', 'complete', { desired: 3, updated: 3, ready: 3 }],
      ['StatefulSet', 'restarted', 'complete', { desired: 2, updated: 2, ready: 2 }],
    ]);
    expect(results[0]?.rolloutReason).toContain('next Job');
  });

  it(
    'apply --wait: exit 4 and rollout timeout past --timeout, then 0 and complete once the pods are Ready',
    SLOW,
    async () => {
      await createDeployment('alpha', 'cli', 2, 'slow');
      await settled('alpha', 'deployments', 'cli');
      const routes = `clusters:\n  alpha: { kubeconfig: { file: ${JSON.stringify(clusters.find((c) => c.name === 'alpha')?.vaultRolloutKubeconfig)} } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: cli\n    match: { path: "secret/cli" }\n    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: cli }]\n`;
      const record = write('cli', 1);
      let io = memoryIo({ 'routes.yaml': routes, '-': record });
      expect(await main(['apply', '--routes', 'routes.yaml', '--wait', '--timeout', '3s', '--json'], io)).toBe(4);
      const first = JSON.parse(io.out).results[0];
      expect(first).toMatchObject({ outcome: 'restarted', rollout: 'timeout', pods: { desired: 2 } });
      expect(first.rolloutReason).toMatch(/^\d of 2 new pods not Ready after 3 s \(deadline\)/);
      // Not a terminal: one plain line per change of state on stderr.
      expect(io.err).toMatch(/^alpha .*\/Deployment\/cli: restarted\n/);
      io = memoryIo({ 'routes.yaml': routes, '-': record });
      expect(await main(['apply', '--routes', 'routes.yaml', '--wait'], io)).toBe(0);
      expect(io.out).toContain('Results: 1 unchanged');
      expect(io.out).toContain('Rollouts: 1 complete');
      expect(io.out).toMatch(/cli +unchanged +complete +2\/2/);
    },
  );

  describe('a cluster that goes away mid-rollout', () => {
    let proxy: FaultProxy;
    beforeAll(async () => {
      proxy = await startFaultProxy(clusters.find((c) => c.name === 'gamma') ?? clusters[2]!);
    });
    afterAll(async () => {
      await proxy.stop().catch(() => {});
    });

    it('gives timeout for its own workloads only', SLOW, async () => {
      await createDeployment('alpha', 'steady', 1, 'slow');
      await createDeployment('gamma', 'steady', 1, 'slow');
      await settled('alpha', 'deployments', 'steady');
      await settled('gamma', 'deployments', 'steady');
      const table = routingTable(
        `  - name: steady
    match: { path: "secret/steady" }
    targets: [{ clusters: [alpha, flaky], namespace: ${NS}, kind: Deployment, name: steady }]`,
        { flaky: proxy.kubeconfig },
      );
      // The flaky cluster's deadline is short; alpha keeps the default.
      const flakyTable: RoutingTable = {
        ...table,
        clusters: new Map([...table.clusters].map(([n, c]) => [n, n === 'flaky' ? { ...c, rolloutTimeout: '6s' } : c])),
      };
      let stopped = false;
      const results = await applyAndFollow(flakyTable, [write('steady', 1)], 120_000, {
        follow: {
          budgetMs: 120_000,
          onProgress: (r) => {
            if (r.cluster === 'flaky' && r.rollout === 'progressing' && !stopped) {
              stopped = true;
              void proxy.stop();
            }
          },
        },
      });
      expect(stopped).toBe(true);
      const seen = JSON.stringify(results.map((r) => [r.cluster, r.outcome, r.rollout, r.rolloutReason]));
      expect(
        results.map((r) => [r.cluster, r.outcome, r.rollout]),
        seen,
      ).toEqual([
        ['alpha', 'restarted', 'complete'],
        ['flaky', 'restarted', 'timeout'],
      ]);
      process.stderr.write(`[rollout-health] flaky: ${results[1]?.rollout}: ${results[1]?.rolloutReason}\n`);
      // The last error is the reconnect being refused (or, if the deadline came first, the cut stream).
      expect(results[1]?.rolloutReason, seen).toMatch(/\(deadline\): .*last error: (unreachable|error|timeout)/);
    });
  });
});
