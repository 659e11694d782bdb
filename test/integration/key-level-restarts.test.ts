/**
 * Key-level restarts end to end: a real OpenBao 2.7 and a real Vault 1.21, each with a file audit device
 * followed by the relay into `serve` (with its SQLite rotation store keeping the key baselines), and a real test
 * cluster. One secret with three keys; one Deployment per key and one that uses all of them (no `keys:`). Rotating
 * one key restarts exactly the workloads that use it (a write, then a patch); a write that changes no value restarts
 * none of the keyed targets; the first change after a fresh store (a patch: its keys are honoured only against a
 * baseline) restarts all of them; Vault's event notifications (no keys in them) restart all of them. A skipped
 * workload records the skip as a skip of the new version.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../clusters/kube-http.ts';
import { startRelay, startServe, watchRestarts, type Serve } from '../vault/e2e-stack.ts';
import { startEventFront } from '../vault/event-front.ts';
import { startDevServer, VaultClient } from '../vault/server.ts';
import { cluster, createNamespace, createWorkload, deleteNamespace, getWorkload, uniqueName } from './support.ts';

const NS = uniqueName('vr-keys');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-keys-'));
const routesFile = join(dir, 'routes.yaml');
const WORKLOADS = ['w-username', 'w-password', 'w-api-key', 'w-all'] as const;
type Workload = (typeof WORKLOADS)[number];

let watch: ReturnType<typeof watchRestarts>;

beforeAll(async () => {
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { kv2: 2 } }
routes:
  - name: db
    match: { path: "kv2/{server}/db", operations: [write, delete, destroy, undelete] }
    targets:
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: "{server}-w-username", names: ["*-w-username"], keys: [username] }
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: "{server}-w-password", names: ["*-w-password"], keys: [password] }
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: "{server}-w-api-key", names: ["*-w-api-key"], keys: [api_key] }
      - { clusters: [alpha], namespace: ${NS}, kind: Deployment, name: "{server}-w-all", names: ["*-w-all"] }
`,
  );
  await createNamespace('alpha', NS);
  for (const server of ['openbao', 'vault', 'events'])
    for (const w of WORKLOADS) await createWorkload('alpha', NS, 'Deployment', `${server}-${w}`);
  watch = watchRestarts(cluster('alpha'), NS);
}, 300_000);

afterAll(async () => {
  watch?.stop();
  await deleteNamespace('alpha', NS);
});

const restartCount = (name: string): number => watch.restarts.filter((r) => r.name === name).length;
const counts = (server: string): Record<Workload, number> =>
  Object.fromEntries(WORKLOADS.map((w) => [w, restartCount(`${server}-${w}`)])) as Record<Workload, number>;
/** The version the workload's record holds for the path: its restart record or the one written without a restart. */
async function recordedVersion(server: string, w: Workload): Promise<number | undefined> {
  const o = (await getWorkload('alpha', NS, 'Deployment', `${server}-${w}`)) as unknown as {
    metadata?: { annotations?: Record<string, string> };
    spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
  };
  // A key-level skip is recorded as one (`{ v, skipped }`, on the metadata), not as a version: it counts here as
  // where the workload stands.
  const records = [
    o.spec?.template?.metadata?.annotations?.['vault-rollout.io/versions'],
    o.metadata?.annotations?.['vault-rollout.io/versions'],
  ].map((r) => (r ? (JSON.parse(r) as Record<string, number | { v: number }>)[`kv2/${server}/db`] : undefined));
  const numbers = records
    .map((v) => (typeof v === 'object' ? v.v : v))
    .filter((v): v is number => typeof v === 'number');
  return numbers.length > 0 ? Math.max(...numbers) : undefined;
}

/** The key-level skip the workload records for the path, if any. */
async function skipOf(server: string, w: Workload): Promise<unknown> {
  const o = (await getWorkload('alpha', NS, 'Deployment', `${server}-${w}`)) as unknown as {
    metadata?: { annotations?: Record<string, string> };
  };
  const record = o.metadata?.annotations?.['vault-rollout.io/versions'];
  return record ? (JSON.parse(record) as Record<string, unknown>)[`kv2/${server}/db`] : undefined;
}

/**
 * Runs `op` (which makes version `version`) and waits until every workload records it; then checks that exactly
 * `restarted` restarted once more and the others not at all.
 */
async function step(
  server: string,
  version: number,
  op: () => Promise<unknown>,
  restarted: readonly Workload[],
): Promise<void> {
  const before = counts(server);
  await op();
  await waitFor(
    async () =>
      (await Promise.all(WORKLOADS.map((w) => recordedVersion(server, w)))).every((v) => v === version)
        ? true
        : undefined,
    { timeoutMs: 30_000, intervalMs: 200, what: `every ${server} workload at v${version}` },
  );
  // Late restarts would show up within this.
  await new Promise((r) => setTimeout(r, 1500));
  const expected = Object.fromEntries(WORKLOADS.map((w) => [w, before[w] + (restarted.includes(w) ? 1 : 0)]));
  expect(counts(server), `${server} v${version}`).toEqual(expected);
}

async function exercise(client: VaultClient, server: string, restartServe: () => Promise<void>): Promise<void> {
  const path = `${server}/db`;
  const ALL = WORKLOADS;
  // The first write: no baseline, every key.
  await step(server, 1, () => client.kv2Write('kv2', path, { username: 'app', password: 'one', api_key: 'k1' }), ALL);
  // One key rotated by a write: its workload and the one that uses every key.
  await step(server, 2, () => client.kv2Write('kv2', path, { username: 'app', password: 'two', api_key: 'k1' }), [
    'w-password',
    'w-all',
  ]);
  // The skip is recorded as a skip of v2, naming the keys the workload uses; its restart record stays at v1.
  expect(await skipOf(server, 'w-username')).toEqual({ v: 2, skipped: ['username'] });
  // One key rotated by a patch.
  await step(server, 3, () => client.kv2Patch('kv2', path, { api_key: 'k2' }), ['w-api-key', 'w-all']);
  // A write that changes no value: none of the keyed targets.
  await step(server, 4, () => client.kv2Write('kv2', path, { username: 'app', password: 'two', api_key: 'k2' }), [
    'w-all',
  ]);
  // A fresh store: the first change after it restarts all of them — a patch too, whose key names nothing checked
  // (no baseline of v-1 from this device).
  await restartServe();
  await step(server, 5, () => client.kv2Patch('kv2', path, { password: 'three' }), ALL);
  await step(server, 6, () => client.kv2Write('kv2', path, { username: 'app', password: 'three', api_key: 'k2' }), ALL);
  await step(server, 7, () => client.kv2Write('kv2', path, { username: 'app2', password: 'three', api_key: 'k2' }), [
    'w-username',
    'w-all',
  ]);
}

describe.each(['openbao', 'vault'] as const)('%s file audit device -> relay -> serve', (kind) => {
  it('restarts exactly the workloads whose keys changed', async () => {
    let stateFile = join(dir, `${kind}-state-1.sqlite`);
    let serve: Serve = await startServe(routesFile, 0, { VAULT_ROLLOUT_STATE_DB: stateFile });
    const auditFile = join(dir, `${kind}-audit.log`);
    writeFileSync(auditFile, '');
    const relays = [
      await startRelay(['--audit-file', auditFile, '--to', serve.url, '--spool', join(dir, `spool-${kind}`)]),
    ];
    const server = await startDevServer({ kind, auditFile });
    await server.client.enableKv('kv2', 2);
    try {
      await exercise(server.client, kind, async () => {
        // A new serve with an empty state file (the relay resumes the same audit file where its spool says it stood).
        await relays[0]?.stop();
        await serve.stop();
        stateFile = join(dir, `${kind}-state-2.sqlite`);
        serve = await startServe(routesFile, 0, { VAULT_ROLLOUT_STATE_DB: stateFile });
        relays[0] = await startRelay([
          '--audit-file',
          auditFile,
          '--to',
          serve.url,
          '--spool',
          join(dir, `spool-${kind}`),
        ]);
      });
    } finally {
      await server.stop();
      for (const r of relays) await r?.stop();
      await serve.stop();
    }
  });
});

describe('Vault event notifications (no keys in them; the documented frames, from the event front on Vault 1.21)', () => {
  it('restart every workload, keyed or not', async () => {
    const serve = await startServe(routesFile, 0, { VAULT_ROLLOUT_STATE_DB: join(dir, 'events-state.sqlite') });
    const server = await startDevServer({ kind: 'vault', auditFile: join(dir, 'vault-events-audit.log') });
    await server.client.enableKv('kv2', 2);
    const front = await startEventFront({ addr: server.addr, token: server.token });
    const client = new VaultClient(front.addr, server.token);
    const relay = await startRelay(
      ['--vault-addr', front.addr, '--events', 'kv-v2/*', '--to', serve.url, '--spool', join(dir, 'spool-events')],
      { VAULT_TOKEN: server.token },
    );
    try {
      await waitFor(async () => front.subscribers() === 1, {
        timeoutMs: 30_000,
        what: 'the relay subscribed to kv-v2/*',
      });
      await step(
        'events',
        1,
        () => client.kv2Write('kv2', 'events/db', { username: 'app', password: 'one', api_key: 'k1' }),
        WORKLOADS,
      );
      await step(
        'events',
        2,
        () => client.kv2Write('kv2', 'events/db', { username: 'app', password: 'two', api_key: 'k1' }),
        WORKLOADS,
      );
      await step('events', 3, () => client.kv2Patch('kv2', 'events/db', { api_key: 'k2' }), WORKLOADS);
    } finally {
      await relay.stop();
      await front.stop();
      await server.stop();
      await serve.stop();
    }
  });
});
