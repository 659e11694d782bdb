/**
 * Restart order inside a cluster, on the real alpha cluster: a table whose first wave selects the servers
 * (`targets: { names: ["server*"] }`) and whose second wave is the rest of alpha (the clients), gate `healthy`.
 *
 * 1. Through `serve` (its own process): the server is restarted, serve is killed with SIGKILL while the gate waits,
 *    and the next serve on the same queue and state files restarts the client only once the server's rollout is
 *    complete; each restarted exactly once, nothing dead-lettered.
 * 2. Through `apply --wait`: the same order for the next version.
 * 3. A halt: a server whose new pods never become Ready halts the rotation at wave 1, through serve and through
 *    apply; its client is never patched.
 * 4. A message is a claim: one naming the unreleased wave 2 is dead-lettered; one naming no wave restarts only the
 *    server of the new version, never the client.
 *
 * Every order check reads the client first, then the server: a client restarted while its server was not yet
 * complete is seen as such, never the other way round. Lean: one cluster, six one-replica Deployments.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { processBatch, type QueueRecord } from '../../lib/pipeline/worker.ts';
import { rolloutMessages } from '../../lib/queue/rollout-message.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { loadRoutingTable, type RoutingTable } from '../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../lib/sources/secret-change.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { memoryIo } from '../helpers.ts';
import { createNamespace, deleteNamespace, spawnServe, uniqueName, type ServeChild } from './support.ts';
import {
  clustersYaml,
  deployReady,
  deploymentComplete,
  kvWriteAudit,
  replicaSetsFor,
  serveEnv,
  unreadyVersions,
  workerClients,
} from './wave-fixtures.ts';

const NS = uniqueName('vr-order');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-order-'));
const stateDb = join(dir, 'state', 'rotations.sqlite');
const queueFile = join(dir, 'state', 'queue.sqlite');
const routesFile = join(dir, 'routes.yaml');
let table: RoutingTable;

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(['alpha'])}
vault: { mounts: { secret: 2 } }
rotationStore: { sqlite: ${JSON.stringify(stateDb)} }
rollout:
  waves:
    - { clusters: [alpha], targets: { names: ["server*"] } }
    - { clusters: [alpha] }
  gate: { healthy: true, timeout: 60s, pause: 0s }
  onFailure: halt
routes:
  - name: order
    match: { path: "secret/order/db" }
    rollout: { timeout: 60s }
    targets:
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: client }
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: server }
  - name: order-bad
    match: { path: "secret/order-bad/{x}" }
    rollout: { timeout: 5s }
    targets:
      - { clusters: [alpha], namespace: ${NS}, names: ["client-*"], kind: Deployment, name: "client-{x}" }
      - { clusters: [alpha], namespace: ${NS}, names: ["server-*"], kind: Deployment, name: "server-{x}" }
`,
  );
  table = loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile);
  new SqliteRotationStore(stateDb).close();
  await createNamespace('alpha', NS);
  // `server`'s new pods are Ready 10 s after they start: the gate waits that long; server-b and server-c never
  // become Ready at version 2 of their path.
  await deployReady(
    NS,
    Object.fromEntries(['server', 'client', 'server-b', 'client-b', 'server-c', 'client-c'].map((n) => [n, ['alpha']])),
    {
      annotations: (name) =>
        name === 'server'
          ? { 'vault-rollout.test/readiness': 'slow' }
          : name.startsWith('server-')
            ? unreadyVersions({ [`secret/order-bad/${name.slice(-1)}`]: 2 })
            : {},
    },
  );
}, 180_000);

afterAll(async () => {
  await deleteNamespace('alpha', NS);
});

const pathOf = (app: string) => (app.includes('-') ? `secret/order-bad/${app.slice(-1)}` : 'secret/order/db');
const restarts = (app: string, version: number) => replicaSetsFor(NS, 'alpha', app, pathOf(app), version);
const restarted = async (app: string, version: number) => (await restarts(app, version)).length > 0;
const createdAt = async (app: string, version: number) =>
  Date.parse((await restarts(app, version))[0]?.metadata.creationTimestamp ?? '');

/**
 * Watches the order until `until` holds: fails as soon as the client has a ReplicaSet of `version` while the server's
 * rollout of it is not complete (the client read first).
 */
async function watchOrder(client: string, server: string, version: number, until: () => Promise<boolean>) {
  for (const deadline = Date.now() + 90_000; !(await until());) {
    if (Date.now() > deadline) throw new Error(`${client} not restarted at version ${version} in 90 s`);
    const clientRestarted = await restarted(client, version);
    const serverDone = (await restarted(server, version)) && (await deploymentComplete(NS, 'alpha', server));
    expect(!clientRestarted || serverDone, `${client} restarted before ${server} was complete`).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// The two serve children share a compile cache (starting serve is most of a restart); what the killed one had
// received comes back after a 5 s visibility timeout instead of 30 s.
const startServe = () =>
  spawnServe({
    routesFile,
    queueFile,
    env: serveEnv(dir, stateDb, {
      NODE_COMPILE_CACHE: join(dir, 'compile-cache'),
      VAULT_ROLLOUT_VISIBILITY_SECONDS: '5',
    }),
  });
const post = async (serve: ServeChild, path: string, version: number) => {
  const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
    method: 'POST',
    body: kvWriteAudit(`order-${path}-${version}`, path, version),
    headers: { authorization: `Bearer ${BEARER_TOKEN}` },
  });
  expect(res.status).toBe(202);
};
const stop = async ({ child }: ServeChild, signal: NodeJS.Signals) => {
  const exited = (c: ChildProcess) =>
    c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r));
  child.kill(signal);
  await exited(child);
};
const deadLetters = () => {
  const db = new DatabaseSync(queueFile);
  try {
    return (db.prepare('SELECT reason FROM dead_letters').all() as Array<{ reason: string }>).map((r) => r.reason);
  } finally {
    db.close();
  }
};

async function cli(args: string[], input: string): Promise<{ code: number; err: string }> {
  const io = memoryIo({ 'in.ndjson': input }, { VAULT_ROLLOUT_STATE_DB: stateDb });
  io.readText = async (f) => (f === 'in.ndjson' ? input : readFileSync(f, 'utf8'));
  const code = await main(args, io);
  return { code, err: io.err };
}
const apply = (path: string, version: number) =>
  cli(
    ['apply', '--routes', routesFile, '--input', 'in.ndjson', '--wait', '--json'],
    `${kvWriteAudit(`apply-${version}`, path, version)}\n`,
  );

describe('restart order inside a cluster', () => {
  it('serve: the server, then (serve killed with SIGKILL while the gate waits) the client once it is complete', async () => {
    let serve = await startServe();
    await post(serve, 'secret/order/db', 2);
    for (const until = Date.now() + 30_000; !(await restarted('server', 2));)
      if (Date.now() > until) throw new Error('server not restarted in 30 s');
    await stop(serve, 'SIGKILL');
    expect(await restarted('client', 2), 'client restarted with the server').toBe(false);
    serve = await startServe();
    // The bad server of the same table, through serve: its gate halts the rotation at wave 1.
    await post(serve, 'secret/order-bad/b', 2);
    await watchOrder('client', 'server', 2, () => restarted('client', 2));
    expect((await createdAt('client', 2)) - (await createdAt('server', 2))).toBeGreaterThanOrEqual(5000);
    const store = new SqliteRotationStore(stateDb);
    for (const until = Date.now() + 30_000; (await store.halts()).length === 0 && Date.now() < until;)
      await new Promise((r) => setTimeout(r, 200));
    const halts = await store.halts();
    store.close();
    await new Promise((r) => setTimeout(r, 2000));
    await stop(serve, 'SIGTERM');
    expect(halts.map((h) => [h.secrets, h.wave, h.waves, h.failing.name, h.notRestarted])).toEqual([
      [['secret/order-bad/b version 2'], 1, 2, 'server-b', ['alpha']],
    ]);
    expect((await restarts('server', 2)).length, 'server restarts').toBe(1);
    expect((await restarts('client', 2)).length, 'client restarts').toBe(1);
    expect(await restarted('client-b', 2), 'client-b restarted past the halt').toBe(false);
    expect(deadLetters()).toEqual([]);
  }, 150_000);

  it('apply --wait: the server, then the client once it is complete; a bad server halts before its client', async () => {
    const [result] = await Promise.all([
      apply('secret/order/db', 3),
      watchOrder('client', 'server', 3, () => restarted('client', 3)),
    ]);
    expect(result.code).toBe(0);
    expect((await createdAt('client', 3)) - (await createdAt('server', 3))).toBeGreaterThanOrEqual(5000);
    const bad = await apply('secret/order-bad/c', 2);
    expect(bad.code).toBe(4);
    expect(bad.err).toMatch(/HALTED rotation [0-9a-f]+ \(secret\/order-bad\/c version 2\) at wave 1 of 2/);
    expect(await restarted('server-c', 2)).toBe(true);
    expect(await restarted('client-c', 2)).toBe(false);
  }, 120_000);

  it('a message is a claim: wave 2 unreleased is refused; a message naming no wave restarts the server only', async () => {
    const change: SecretChange = {
      namespace: '',
      mount: 'secret',
      key: 'order/db',
      path: 'secret/order/db',
      operation: 'write',
      version: 4,
      kvVersion: 2,
      kvVersionFrom: 'routes',
      source: 'audit',
      via: 'direct',
      id: 'forged',
      time: new Date().toISOString(),
      record: 'forged',
    };
    const record = (wave: number | undefined, id: string): QueueRecord => ({
      messageId: id,
      body: JSON.stringify(rolloutMessages('alpha', [change], new Date().toISOString(), wave)[0]),
      groupId: 'alpha',
    });
    const telemetry = memoryTelemetry();
    const clients = workerClients(dir, telemetry);
    const rotations = new SqliteRotationStore(stateDb);
    const dead: string[] = [];
    const out = await processBatch([record(1, 'claims-wave-2'), record(undefined, 'no-wave')], {
      table,
      rotations,
      telemetry,
      executor: { access: (n, c) => clients.get(n, c), logger: telemetry },
      deadLetter: async (r, reason) => void dead.push(`${r.messageId}: ${reason}`),
    });
    rotations.close();
    expect(dead).toEqual([expect.stringMatching(/^claims-wave-2: the message claims wave 2 of 2 of rotation \w+/)]);
    expect(out.results.map((r) => [r.name, r.outcome])).toEqual([['server', 'restarted']]);
    expect(await restarted('client', 4)).toBe(false);
  }, 60_000);
});
