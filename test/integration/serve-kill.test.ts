// `serve` killed with SIGKILL right after it answered 202, 100 times, against the real alpha cluster: every accepted
// change still restarts its workload (nothing lost: the SQLite queue had it on disk before the 202), and each
// workload gets exactly one new ReplicaSet (nothing doubled: a redelivered change finds its restart recorded and
// re-sends the identical patch, which writes nothing). Each Deployment's rollout takes about 10 s (one pod, kwok's
// "slow" readiness), so a third of the kills land while the restart's continuation is pending in the queue, and the
// continuations left behind finish without a dead letter. Bounded: 100 rounds in 4 lanes (each its
// own serve child and queue file, 25 workloads), at most 12 minutes; the children share a compile cache, since
// starting serve is most of a round. Never skipped.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BEARER_TOKEN } from '../secrets.ts';
import {
  admin,
  cluster,
  createNamespace,
  deleteNamespace,
  spawnServe,
  uniqueName,
  type ServeChild,
} from './support.ts';

const ROUNDS = 100;
const DEADLINE_MS = 12 * 60_000;
const LANES = 4;
const NS = uniqueName('vr-kill');
const dir = mkdtempSync(join(tmpdir(), 'vr-kill-'));
const routesFile = join(dir, 'routes.yaml');
const queueFile = (lane: number) => join(dir, `state-${lane}`, 'queue.sqlite');
const compileCache = join(dir, 'compile-cache');
const app = (i: number) => `app-${String(i).padStart(3, '0')}`;

/** One audit entry: a write of secret/kill/<app> at version 1 (a fixed time: the record is the same on every retry). */
const change = (i: number) =>
  JSON.stringify({
    time: '2026-11-23T23:00:00Z',
    type: 'response',
    request: {
      id: `kill-${i}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/kill/${app(i)}`,
    },
    response: { data: { version: 1 } },
  });

/** A serve child on any free port, on the lane's queue file; resolves once it listens. */
const startServe = (lane: number): Promise<ServeChild> =>
  spawnServe({
    routesFile,
    queueFile: queueFile(lane),
    listenTimeoutMs: 180_000,
    env: {
      HOME: dir,
      NODE_COMPILE_CACHE: compileCache,
      VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
  });

/** Messages waiting in a lane's queue file (read while no serve holds it): continuations, and dead letters. */
function queued(lane: number): { continuations: number; messages: number; deadLetters: number } {
  const db = new DatabaseSync(queueFile(lane));
  try {
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    return {
      continuations: count("SELECT COUNT(*) AS n FROM messages WHERE group_id LIKE 'follow-%'"),
      messages: count('SELECT COUNT(*) AS n FROM messages'),
      deadLetters: count('SELECT COUNT(*) AS n FROM dead_letters'),
    };
  } finally {
    db.close();
  }
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once('exit', () => r()));

interface DeploymentList {
  items: Array<{
    metadata: { name: string };
    spec: { template: { metadata?: { annotations?: Record<string, string> } } };
  }>;
}
interface ReplicaSetList {
  items: Array<{ metadata: { ownerReferences?: Array<{ name: string }> } }>;
}

async function recorded(): Promise<Map<string, string | undefined>> {
  const list = (await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/deployments`))
    .body as DeploymentList;
  return new Map(
    list.items.map((d) => [d.metadata.name, d.spec.template.metadata?.annotations?.['vault-rollout.io/versions']]),
  );
}

async function replicaSetsPerDeployment(): Promise<Map<string, number>> {
  const list = (await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/replicasets`))
    .body as ReplicaSetList;
  const counts = new Map<string, number>();
  for (const rs of list.items)
    for (const o of rs.metadata.ownerReferences ?? []) counts.set(o.name, (counts.get(o.name) ?? 0) + 1);
  return counts;
}

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: kill
    match: { path: "secret/kill/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  await createNamespace('alpha', NS);
  // One pod each, Ready 10 s after it starts: each restart's rollout takes about 10 s, followed by a continuation.
  for (let i = 0; i < ROUNDS; i++) {
    const name = app(i);
    const res = await admin('alpha').request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name, namespace: NS },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name }, annotations: { 'vault-rollout.test/readiness': 'slow' } },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
          },
        },
      },
    });
    if (res.status >= 300) throw new Error(`create ${name}: HTTP ${res.status}`);
  }
  // Each Deployment's first ReplicaSet.
  const deadline = Date.now() + 60_000;
  while ([...(await replicaSetsPerDeployment()).values()].filter((n) => n === 1).length < ROUNDS) {
    if (Date.now() > deadline) throw new Error('the first ReplicaSets did not appear in 60 s');
    await new Promise((r) => setTimeout(r, 500));
  }
}, 180_000);
afterAll(async () => {
  await deleteNamespace('alpha', NS);
});

describe('serve killed with SIGKILL between the 202 and the restart', () => {
  it(
    `loses nothing and doubles nothing over ${ROUNDS} kills`,
    async () => {
      // Warm the compile cache once, so the lanes do not all compile the same modules at the same time.
      const warm = await startServe(0);
      warm.child.kill('SIGKILL');
      await exited(warm.child);
      const started = Date.now();
      const accepted = new Set<number>();
      let killedBeforeRestart = 0;
      let killedWithContinuation = 0;
      const lane = async (l: number): Promise<void> => {
        for (let i = l; i < ROUNDS && Date.now() - started < DEADLINE_MS; i += LANES) {
          const serve = await startServe(l);
          const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
            method: 'POST',
            body: change(i),
            headers: { authorization: `Bearer ${BEARER_TOKEN}` },
          });
          expect(res.status).toBe(202);
          accepted.add(i);
          // Three kinds of kill, in turn: within ~150 ms of the 202 (before the restart: the change must come back
          // from disk); the moment the restart shows on the workload (before or after its message is deleted: a
          // redelivery must not restart it again); 0.5-2.5 s after it shows (its rollout still under way: its
          // continuation pending in the queue, to be looked at by the next serve).
          const kind = Math.floor(i / LANES) % 3;
          if (kind === 0) await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 150)));
          else
            for (const until = Date.now() + 30_000; Date.now() < until && (await recorded()).get(app(i)) === undefined;)
              await new Promise((r) => setTimeout(r, 20));
          if (kind === 2) await new Promise((r) => setTimeout(r, 500 + Math.floor(Math.random() * 2000)));
          serve.child.kill('SIGKILL');
          await exited(serve.child);
          if ((await recorded()).get(app(i)) === undefined) killedBeforeRestart++;
          if (queued(l).continuations > 0) killedWithContinuation++;
        }
      };
      await Promise.all(Array.from({ length: LANES }, (_, l) => lane(l)));
      const killedMs = Date.now() - started;

      // One last serve per lane, left to finish: whatever the kills left in the queue is worked now.
      const last = await Promise.all(Array.from({ length: LANES }, (_, l) => startServe(l)));
      const deadline = Date.now() + 120_000;
      let versions = await recorded();
      while ([...accepted].some((i) => versions.get(app(i)) === undefined) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 500));
        versions = await recorded();
      }
      // And every rollout followed to its end: the continuations the kills left are looked at (and woken by serve's
      // watch) until nothing is left in the queues.
      const rolledOut = async () => {
        const list = (await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/deployments`)).body as {
          items: Array<{
            metadata: { generation?: number };
            status?: {
              observedGeneration?: number;
              updatedReplicas?: number;
              availableReplicas?: number;
              replicas?: number;
            };
          }>;
        };
        return list.items.every(
          (d) =>
            d.status?.observedGeneration === d.metadata.generation &&
            d.status?.updatedReplicas === 1 &&
            d.status?.availableReplicas === 1 &&
            d.status?.replicas === 1,
        );
      };
      while (!(await rolledOut()) && Date.now() < deadline + 60_000) await new Promise((r) => setTimeout(r, 500));
      // A continuation held by a killed serve comes back at its delay (at most 15 s), then sees its rollout complete.
      await new Promise((r) => setTimeout(r, 20_000));
      for (const serve of last) serve.child.kill('SIGTERM');
      await Promise.all(last.map((serve) => exited(serve.child)));
      const left = Array.from({ length: LANES }, (_, l) => queued(l));
      expect(
        left.map((q) => q.deadLetters),
        'dead letters per lane',
      ).toEqual(Array.from({ length: LANES }, () => 0));
      expect(
        left.map((q) => q.messages),
        'messages left per lane',
      ).toEqual(Array.from({ length: LANES }, () => 0));

      const lost = [...accepted].filter(
        (i) => versions.get(app(i)) !== JSON.stringify({ [`secret/kill/${app(i)}`]: 1 }),
      );
      expect(lost, 'accepted changes whose workload never restarted').toEqual([]);
      // Let the Deployment controller make any ReplicaSet it still would, then count: exactly two per Deployment.
      await new Promise((r) => setTimeout(r, 2000));
      const counts = await replicaSetsPerDeployment();
      const doubled = [...accepted]
        .filter((i) => counts.get(app(i)) !== 2)
        .map((i) => `${app(i)}: ${counts.get(app(i))} ReplicaSets`);
      expect(doubled, 'workloads restarted other than once').toEqual([]);
      // The figures, for the docs: how many kills landed before their change's restart.
      console.log(
        `serve-kill: ${accepted.size} kills in ${Math.round(killedMs / 1000)} s (${LANES} lanes); ${killedBeforeRestart} landed before the change's restart (redelivered from disk), ${killedWithContinuation} while a continuation was pending, 0 lost, 0 doubled, 0 dead letters`,
      );
      expect(killedBeforeRestart, 'no kill landed between the 202 and the restart').toBeGreaterThan(0);
      expect(killedWithContinuation, 'no kill landed while a continuation was pending').toBeGreaterThan(0);
      expect(killedBeforeRestart, 'no kill landed after a restart').toBeLessThan(accepted.size);
      expect(accepted.size, `only ${accepted.size} rounds in ${DEADLINE_MS / 60_000} minutes`).toBe(ROUNDS);
    },
    DEADLINE_MS + 240_000,
  );
});
