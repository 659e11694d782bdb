/**
 * Progressive rotation on real clusters with nodes: waves gamma -> alpha -> beta with a health gate
 * and a pause between them; a bad secret version whose pods never become Ready halts at wave 1 and a fixed version
 * then goes through every wave; a worker abandoned mid-gate loses nothing and restarts nothing twice; a burst of
 * five changes settles into one restart. The queue is the in-process one `serve` uses, worked by `serve`'s local
 * worker (or, for the abandoned worker, by hand); gates and settle windows wait in it, never in the worker.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haltEventName } from '../../lib/plan/restart-record.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { processBatch, type WorkerDeps } from '../../lib/pipeline/worker.ts';
import { memoryRolloutQueue, type SqliteRolloutQueue } from '../../lib/queue/sqlite-queue.ts';
import { isGateMessage, parseRolloutMessage } from '../../lib/queue/rollout-message.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import { startLocalWorker } from '../../lib/runtime/local-worker.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { admin, createNamespace, deleteNamespace, events, getWorkload, uniqueName } from './support.ts';
import {
  clustersYaml,
  deployReady,
  deploymentComplete,
  kvWriteAudit,
  postToIntake,
  replicaSetsFor as replicaSetsOf,
  unreadyVersions,
  workerClients,
} from './wave-fixtures.ts';
import { MemoryRotationStore } from '../../lib/rotations/rotation-store.ts';

const NS = uniqueName('vr-waves');
const CLUSTERS = ['alpha', 'beta', 'gamma'] as const;
const PAUSE_MS = 3000;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-waves-'));
let table: RoutingTable;

/**
 * Deployments: `good` and `kill` everywhere, `bad` whose version-2 pods never become Ready, `settled` in alpha,
 * `newer` everywhere, 2 replicas whose new pods are Ready 10 s after they start (a wave that takes ~20 s).
 */
const WORKLOADS = { good: CLUSTERS, kill: CLUSTERS, bad: CLUSTERS, settled: ['alpha'], newer: CLUSTERS } as const;
const REPLICAS: Record<string, number> = { newer: 2 };

beforeAll(async () => {
  const routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(CLUSTERS)}
vault: { mounts: { secret: 2 } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }, { clusters: [beta] }]
  gate: { timeout: 60s, pause: ${PAUSE_MS / 1000}s }
  onFailure: halt
routes:
  - name: waves
    match: { path: "secret/waves/{app}" }
    rollout: { timeout: 6s }
    targets: [{ clusters: [alpha, beta, gamma], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: newer
    match: { path: "secret/newer/{app}" }
    rollout: { timeout: 60s }
    targets: [{ clusters: [alpha, beta, gamma], namespace: ${NS}, names: [newer], kind: Deployment, name: "{app}" }]
  - name: settle
    match: { path: "secret/settle/*" }
    rollout: { settle: 3s }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: settled }]
`,
  );
  table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
  await Promise.all(CLUSTERS.map((c) => createNamespace(c, NS)));
  await deployReady(NS, WORKLOADS, {
    annotations: (name) =>
      name === 'bad'
        ? unreadyVersions({ 'secret/waves/bad': 2 })
        : name === 'newer'
          ? { 'vault-rollout.test/readiness': 'slow' }
          : {},
    replicas: (name) => REPLICAS[name] ?? 1,
  });
}, 300_000);

afterAll(async () => {
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
});

function workerDeps(queue: SqliteRolloutQueue): WorkerDeps & { telemetry: ReturnType<typeof memoryTelemetry> } {
  const telemetry = memoryTelemetry();
  const clients = workerClients(dir, telemetry);
  return {
    table,
    rotations: new MemoryRotationStore(),
    telemetry,
    executor: { access: (n, c) => clients.get(n, c), logger: telemetry },
    queue,
    follow: { requeue: (m) => queue.send([m]) },
    gate: { recheckMs: 1000 },
  };
}

let request = 0;
/** A KV write of `path` at `version`, through the intake into `queue`, as the audit device reports it. */
const write = (queue: SqliteRolloutQueue, path: string, version: number): Promise<void> =>
  postToIntake(table, queue, kvWriteAudit(`waves-${++request}`, path, version));

/** The ReplicaSets of a Deployment that vault-rollout made for `path` at `version` (by the restart record in their template). */
const replicaSetsFor = (c: string, app: string, path?: string, version?: number) =>
  replicaSetsOf(NS, c, app, path, version);

const complete = (c: string, app: string) => deploymentComplete(NS, c, app);

describe('progressive rotation', () => {
  it('three waves: gamma, then alpha, then beta, each after the previous is complete plus the pause', async () => {
    const queue = memoryRolloutQueue();
    const deps = workerDeps(queue);
    const worker = startLocalWorker(queue, deps, { pollMs: 100, retryDelayMs: 200 });
    try {
      await write(queue, 'secret/waves/good', 2);
      await waitFor(
        async () => (await replicaSetsFor('beta', 'good', 'secret/waves/good', 2)).length === 1 || undefined,
        { timeoutMs: 90_000, what: 'the last wave (beta) restarted' },
      );
      await waitFor(async () => (await complete('beta', 'good')) || undefined, {
        timeoutMs: 30_000,
        what: 'beta complete',
      });
    } finally {
      await worker.stop();
    }
    const created = async (c: string) => {
      const sets = await replicaSetsFor(c, 'good', 'secret/waves/good', 2);
      expect(sets).toHaveLength(1);
      return Date.parse(sets[0]?.metadata.creationTimestamp ?? '');
    };
    const [gamma, alpha, beta] = [await created('gamma'), await created('alpha'), await created('beta')];
    // creationTimestamp has whole seconds: a wave's rollout (~1 s) plus the 3 s pause is at least 3 s apart.
    expect(alpha - gamma).toBeGreaterThanOrEqual(PAUSE_MS);
    expect(beta - alpha).toBeGreaterThanOrEqual(PAUSE_MS);
    const passed = deps.telemetry.lines
      .filter((l) => l.message === 'wave gate passed; next wave queued')
      .map((l) => (l.fields as { next: string[] }).next.join());
    expect(passed).toEqual(['alpha', 'beta']);
    for (const c of CLUSTERS) expect((await replicaSetsFor(c, 'good')).length).toBe(2);
  }, 120_000);

  it('a bad version halts at wave 1 (alpha and beta untouched, the result and an Event say why); the fixed version goes through every wave', async () => {
    const queue = memoryRolloutQueue();
    const deps = workerDeps(queue);
    const worker = startLocalWorker(queue, deps, { pollMs: 100, retryDelayMs: 200 });
    try {
      await write(queue, 'secret/waves/bad', 2);
      await waitFor(async () => deps.telemetry.lines.some((l) => l.message === 'rotation halted') || undefined, {
        timeoutMs: 60_000,
        what: 'the halt',
      });
      await worker.idle();
      const halted = deps.telemetry.lines.find((l) => l.message === 'rotation halted')?.fields as {
        failing: { cluster: string; name: string; state: string };
        why: string;
        wave: number;
        notRestarted: string[];
      };
      expect(halted).toMatchObject({
        wave: 1,
        failing: { cluster: 'gamma', name: 'bad', state: 'timeout' },
        notRestarted: ['alpha', 'beta'],
      });
      expect(halted.why).toContain('new pods not Ready');
      expect(deps.telemetry.metrics.filter((m) => m.name === 'HaltedRotations')).toHaveLength(1);
      expect(await replicaSetsFor('gamma', 'bad', 'secret/waves/bad', 2)).toHaveLength(1);
      for (const c of ['alpha', 'beta']) expect(await replicaSetsFor(c, 'bad')).toHaveLength(1);
      const event = (await events('gamma', NS, 'bad')).find((e) => e.reason === 'RotationHalted');
      expect(event?.message).toContain('halted the rotation of secret/waves/bad version 2 at wave 1 of 3');
      expect(event?.message).toContain('Not restarted: alpha, beta');
      // The mark a reader finds by name from the workload's restart token.
      const token =
        (await getWorkload('gamma', NS, 'Deployment', 'bad')).spec.template?.metadata?.annotations?.[
          'vault-rollout.io/restart-token'
        ] ?? '';
      const mark = await admin('gamma').request(
        'GET',
        `/api/v1/namespaces/${NS}/events/${haltEventName('bad', token)}`,
      );
      expect(mark.status).toBe(200);
      expect(mark.body as { reason: string; type: string }).toMatchObject({
        reason: 'RotationHalted',
        type: 'Warning',
      });

      // What an operator does: write a fixed version. It starts again from wave 1.
      await write(queue, 'secret/waves/bad', 3);
      await waitFor(
        async () => (await replicaSetsFor('beta', 'bad', 'secret/waves/bad', 3)).length === 1 || undefined,
        { timeoutMs: 90_000, what: 'the fix to reach beta' },
      );
      await waitFor(async () => (await complete('beta', 'bad')) || undefined, {
        timeoutMs: 30_000,
        what: 'beta complete',
      });
    } finally {
      await worker.stop();
    }
    for (const c of CLUSTERS) expect(await replicaSetsFor(c, 'bad', 'secret/waves/bad', 3)).toHaveLength(1);
    expect(await complete('gamma', 'bad')).toBe(true);
    expect((await replicaSetsFor('alpha', 'bad')).length).toBe(2);
    expect((await replicaSetsFor('beta', 'bad')).length).toBe(2);
  }, 150_000);

  it('a worker abandoned while a gate waits: the rotation finishes, one new ReplicaSet per workload', async () => {
    // A short visibility timeout (longer than one batch's work: a 3 s follow): what an abandoned worker held comes back after 6 s.
    const queue = memoryRolloutQueue({ visibilityTimeoutMs: 6000 });
    const deps = workerDeps(queue);
    await write(queue, 'secret/waves/kill', 2);
    let abandoned = 0;
    const deadline = Date.now() + 90_000;
    while (
      Date.now() < deadline &&
      !((await replicaSetsFor('beta', 'kill', 'secret/waves/kill', 2)).length === 1 && (await complete('beta', 'kill')))
    ) {
      const batch = await queue.receive({ max: 10, waitMs: 200 });
      if (batch.length === 0) continue;
      const outcome = await processBatch(batch, deps);
      const gateWaits =
        outcome.deferred.length > 0 &&
        batch.some((m) => {
          const parsed = parseRolloutMessage(m.body);
          return !('error' in parsed) && isGateMessage(parsed);
        });
      // The worker dies after its work, before it acknowledges anything: twice, while a gate waits.
      if (gateWaits && abandoned < 2) {
        abandoned++;
        continue;
      }
      const failed = new Set(outcome.failed);
      const delays = new Map(outcome.deferred.map((d) => [d.messageId, d.delayMs]));
      for (const m of batch) {
        const delay = delays.get(m.messageId);
        await (delay !== undefined
          ? queue.defer(m.receiptHandle, delay)
          : failed.has(m.messageId)
            ? queue.release(m.receiptHandle)
            : queue.delete(m.receiptHandle));
      }
    }
    expect(abandoned).toBe(2);
    for (const c of CLUSTERS) {
      expect(await replicaSetsFor(c, 'kill', 'secret/waves/kill', 2)).toHaveLength(1);
      expect(await replicaSetsFor(c, 'kill')).toHaveLength(2);
    }
    expect(queue.deadLetters()).toEqual([]);
  }, 120_000);

  it('settle: five changes to five paths in 2 s, five requests, one new ReplicaSet recording all five versions', async () => {
    const queue = memoryRolloutQueue();
    const deps = workerDeps(queue);
    const worker = startLocalWorker(queue, deps, { pollMs: 100, retryDelayMs: 200 });
    try {
      for (let i = 1; i <= 5; i++) {
        await write(queue, `secret/settle/p${i}`, i + 1);
        if (i < 5) await new Promise((r) => setTimeout(r, 400));
      }
      await waitFor(async () => (await replicaSetsFor('alpha', 'settled')).length >= 2 || undefined, {
        timeoutMs: 60_000,
        what: 'the restart',
      });
      await worker.idle();
      await new Promise((r) => setTimeout(r, 1500));
    } finally {
      await worker.stop();
    }
    const sets = await replicaSetsFor('alpha', 'settled');
    expect(sets).toHaveLength(2);
    const recorded = sets
      .map((rs) => JSON.parse(rs.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '{}'))
      .find((v) => Object.keys(v).length > 0);
    expect(recorded).toEqual({
      'secret/settle/p1': 2,
      'secret/settle/p2': 3,
      'secret/settle/p3': 4,
      'secret/settle/p4': 5,
      'secret/settle/p5': 6,
    });
    expect(deps.telemetry.lines.some((l) => l.message === "settled: one plan for the cluster's burst")).toBe(true);
  }, 90_000);
  it('a newer version while wave 1 still rolls: restarted at once with the newest value; the older rotation is superseded and its later waves never run', async () => {
    const queue = memoryRolloutQueue();
    const deps = workerDeps(queue);
    const worker = startLocalWorker(queue, deps, { pollMs: 100, retryDelayMs: 200 });
    const path = 'secret/newer/newer';
    try {
      await write(queue, path, 2);
      await waitFor(async () => (await replicaSetsFor('gamma', 'newer', path, 2)).length === 1 || undefined, {
        timeoutMs: 30_000,
        what: 'wave 1 (gamma) restarted for version 2',
      });
      // Version 2 still rolls in gamma (its gate waits) when version 3 is written.
      await write(queue, path, 3);
      await waitFor(async () => (await replicaSetsFor('beta', 'newer', path, 3)).length === 1 || undefined, {
        timeoutMs: 150_000,
        what: 'the last wave (beta) restarted for version 3',
      });
      await waitFor(
        async () =>
          deps.telemetry.lines.some(
            (l) => l.message === 'rotation superseded by a newer version; its later waves will not run',
          ) || undefined,
        { timeoutMs: 30_000, what: "version 2's gate to see it superseded" },
      );
      // Nothing left to run: every message worked.
      await waitFor(async () => (queue.counts().available === 0 && queue.counts().inFlight === 0) || undefined, {
        timeoutMs: 60_000,
        what: 'the queue empty',
      });
    } finally {
      await worker.stop();
    }
    // Gamma restarted once per version; alpha and beta only for version 3, never for the superseded version 2.
    expect(await replicaSetsFor('gamma', 'newer', path, 2)).toHaveLength(1);
    expect(await replicaSetsFor('gamma', 'newer', path, 3)).toHaveLength(1);
    for (const c of ['alpha', 'beta']) {
      expect(await replicaSetsFor(c, 'newer', path, 2)).toEqual([]);
      expect(await replicaSetsFor(c, 'newer', path, 3)).toHaveLength(1);
    }
  }, 300_000);
});
