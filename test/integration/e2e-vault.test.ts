/**
 * End to end with a real Vault-compatible server and a real test cluster, through each path: OpenBao's file audit
 * device followed by the relay, its socket audit device into the relay, its http audit device straight to the
 * function; Vault's event notifications (Enterprise since 1.16: the frames Vault documents, made from a real Vault
 * 1.21's own KV changes by test/vault/event-front.ts) through the relay. KV v1 and v2 create, update, patch, delete,
 * undelete, destroy and metadata operations end in exactly the expected restarts; reads, lists and failed writes
 * restart nothing. And a loss test: the function is down for 30 s while 100 writes happen.
 */
import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { startRelay, startServe, watchRestarts, type Restart, type Serve } from '../vault/e2e-stack.ts';
import { startEventFront } from '../vault/event-front.ts';
import { startDevServer, VaultClient, type DevServer } from '../vault/server.ts';
import { cluster, createNamespace, createWorkload, deleteNamespace, uniqueName } from './support.ts';

const NS = uniqueName('vr-e2e-vault');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-e2e-vault-'));
const routesFile = join(dir, 'routes.yaml');
const PATHS = ['file', 'socket', 'http', 'events'] as const;
type Path = (typeof PATHS)[number];

let serve: Serve;
let watch: ReturnType<typeof watchRestarts>;

beforeAll(async () => {
  // serve's Powertools metrics read the process environment: keep EMF documents out of the test output.
  process.env.POWERTOOLS_METRICS_DISABLED = 'true';
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { kv2: 2, kv1: 1 } }
routes:
  - name: v2
    match: { path: "kv2/{app}/db", operations: [write, delete, destroy, undelete] }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: v1
    match: { path: "kv1/{app}/db", operations: [write, delete] }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  await createNamespace('alpha', NS);
  for (const p of PATHS) for (const v of ['v1', 'v2']) await createWorkload('alpha', NS, 'Deployment', `${p}-${v}`);
  for (let i = 0; i < 10; i++) await createWorkload('alpha', NS, 'Deployment', `loss-${i}`);
  watch = watchRestarts(cluster('alpha'), NS);
  serve = await startServe(routesFile);
}, 300_000);

afterAll(async () => {
  watch?.stop();
  await serve?.stop();
  await deleteNamespace('alpha', NS);
});

const restartsOf = (name: string): Restart[] => watch.restarts.filter((r) => r.name === name);

/** Runs an operation that must restart `name` once more, and waits for that restart. */
async function restarts(name: string, op: () => Promise<unknown>): Promise<Restart> {
  const before = restartsOf(name).length;
  await op();
  return waitFor(async () => restartsOf(name)[before], {
    timeoutMs: 30_000,
    intervalMs: 100,
    what: `a restart of ${name}`,
  });
}

/** Runs operations that must restart nothing: after them, one that restarts, and only that one shows up. */
async function restartsNothing(
  name: string,
  ops: () => Promise<unknown>,
  then: () => Promise<unknown>,
): Promise<Restart> {
  const before = restartsOf(name).length;
  await ops();
  const next = await restarts(name, then);
  await new Promise((r) => setTimeout(r, 1500));
  expect(restartsOf(name).length, `restarts of ${name} after operations that change nothing`).toBe(before + 1);
  return next;
}

/** The KV v2 and v1 script of one path, checking each restart's record. */
async function exercise(client: VaultClient, path: Path): Promise<void> {
  const v2 = `${path}-v2`;
  const v2Key = `kv2/${v2}/db`;
  expect((await restarts(v2, () => client.kv2Write('kv2', `${v2}/db`, { password: 'one' }))).versions).toEqual({
    [v2Key]: 1,
  });
  expect((await restarts(v2, () => client.kv2Write('kv2', `${v2}/db`, { password: 'two' }))).versions).toEqual({
    [v2Key]: 2,
  });
  const patched = await restartsNothing(
    v2,
    async () => {
      await client.kv2Read('kv2', `${v2}/db`);
      await client.kv2List('kv2', '');
      await client.kv2MetadataWrite('kv2', `${v2}/db`, { max_versions: 20 });
      await client.kv2Write('kv2', `${v2}/db`, { password: 'refused' }, { cas: 1 }).then(
        () => Promise.reject(new Error('the check-and-set write should have failed')),
        () => undefined,
      );
      // The relay batches for up to a second: let these go through on their own.
      await new Promise((r) => setTimeout(r, 2500));
    },
    () => client.kv2Patch('kv2', `${v2}/db`, { user: 'app' }),
  );
  expect(patched.versions[v2Key]).toBe(3);
  const deleted = await restarts(v2, () => client.kv2Delete('kv2', `${v2}/db`));
  expect(Object.keys(deleted.versions).sort()).toEqual([v2Key, `${v2Key}#delete`]);
  const undeleted = await restarts(v2, () => client.kv2Undelete('kv2', `${v2}/db`, [3]));
  expect(Object.keys(undeleted.versions)).toContain(`${v2Key}#undelete`);
  const destroyed = await restarts(v2, () => client.kv2Destroy('kv2', `${v2}/db`, [1]));
  expect(Object.keys(destroyed.versions)).toContain(`${v2Key}#destroy`);
  const gone = await restarts(v2, () => client.kv2MetadataDelete('kv2', `${v2}/db`));
  expect(gone.versions[`${v2Key}#destroy`]).not.toEqual(destroyed.versions[`${v2Key}#destroy`]);
  // Seven restarts, each for one change, none twice.
  expect(restartsOf(v2)).toHaveLength(7);

  const v1 = `${path}-v1`;
  const v1Key = `kv1/${v1}/db`;
  const first = await restarts(v1, () => client.kv1Write('kv1', `${v1}/db`, { password: 'one' }));
  expect(Object.keys(first.versions)).toEqual([v1Key]);
  await restartsNothing(
    v1,
    async () => {
      await client.kv1Read('kv1', `${v1}/db`);
      await client.kv1List('kv1', '');
      await new Promise((r) => setTimeout(r, 2500));
    },
    () => client.kv1Write('kv1', `${v1}/db`, { password: 'two' }),
  );
  const v1Deleted = await restarts(v1, () => client.kv1Delete('kv1', `${v1}/db`));
  expect(Object.keys(v1Deleted.versions).sort()).toEqual([v1Key, `${v1Key}#delete`]);
  expect(restartsOf(v1)).toHaveLength(3);
}

async function withServer(
  kind: 'openbao' | 'vault',
  options: Parameters<typeof startDevServer>[0],
  mounts = true,
): Promise<DevServer> {
  const server = await startDevServer({ ...options, kind });
  if (mounts) {
    await server.client.enableKv('kv2', 2);
    await server.client.enableKv('kv1', 1);
  }
  return server;
}

describe('OpenBao', () => {
  it('file audit device -> relay --audit-file -> function -> restarts', async () => {
    const auditFile = join(dir, 'openbao-audit.log');
    writeFileSync(auditFile, '');
    const relay = await startRelay(['--audit-file', auditFile, '--to', serve.url, '--spool', join(dir, 'spool-file')]);
    const server = await withServer('openbao', { kind: 'openbao', auditFile });
    try {
      await exercise(server.client, 'file');
    } finally {
      await server.stop();
      await relay.stop();
    }
  });

  it('socket audit device -> relay --audit-listen (an owner-only unix socket) -> function -> restarts', async () => {
    const socketPath = join(dir, 'audit.sock');
    const relay = await startRelay([
      '--audit-listen',
      `unix://${socketPath}`,
      '--to',
      serve.url,
      '--spool',
      join(dir, 'spool-socket'),
    ]);
    expect(statSync(socketPath).mode & 0o777).toBe(0o600);
    // The socket device is never Vault's only audit device: a file device beside it. OpenBao runs as our user here.
    const server = await withServer('openbao', {
      kind: 'openbao',
      auditFile: join(dir, 'openbao-socket-side.log'),
      audit: [
        { type: 'socket', path: 'socket', options: { address: socketPath, socket_type: 'unix', format: 'json' } },
      ],
    });
    try {
      await exercise(server.client, 'socket');
    } finally {
      await server.stop();
      await relay.stop();
    }
  });

  it('http audit device -> function (bearer token) -> restarts', async () => {
    const server = await withServer('openbao', {
      kind: 'openbao',
      auditFile: join(dir, 'openbao-http-side.log'),
      audit: [
        {
          type: 'http',
          path: 'http',
          options: {
            uri: `${serve.url}/v1/vault/audit`,
            headers: JSON.stringify({ Authorization: [`Bearer ${BEARER_TOKEN}`] }),
          },
        },
      ],
    });
    try {
      await exercise(server.client, 'http');
    } finally {
      await server.stop();
    }
  });

  it('loses nothing while the function is down for 30 s during 100 writes, and restarts nothing twice', async () => {
    const auditFile = join(dir, 'openbao-loss.log');
    writeFileSync(auditFile, '');
    const relay = await startRelay(['--audit-file', auditFile, '--to', serve.url, '--spool', join(dir, 'spool-loss')]);
    const server = await withServer('openbao', { kind: 'openbao', auditFile });
    try {
      const port = serve.port;
      await serve.stop();
      const downAt = Date.now();
      for (let round = 1; round <= 10; round++)
        for (let i = 0; i < 10; i++) await server.client.kv2Write('kv2', `loss-${i}/db`, { n: round });
      await new Promise((r) => setTimeout(r, Math.max(0, 30_000 - (Date.now() - downAt))));
      serve = await startServe(routesFile, port);
      await waitFor(
        async () =>
          Array.from({ length: 10 }, (_, i) => restartsOf(`loss-${i}`).at(-1)?.versions[`kv2/loss-${i}/db`]).every(
            (v) => v === 10,
          ),
        { timeoutMs: 120_000, intervalMs: 500, what: 'every write reflected after the outage' },
      );
      await new Promise((r) => setTimeout(r, 2000));
      for (let i = 0; i < 10; i++) {
        const versions = restartsOf(`loss-${i}`).map((r) => r.versions[`kv2/loss-${i}/db`]);
        // Each restart for a newer version than the one before: no duplicate rollout.
        expect(versions, `loss-${i}`).toEqual([...new Set(versions)].sort((a, b) => Number(a) - Number(b)));
        expect(versions.at(-1)).toBe(10);
      }
    } finally {
      await server.stop();
      await relay.stop();
    }
  });
});

describe('Vault 1.21', () => {
  it('event notifications (the documented frames, from the event front) -> relay --events -> function -> restarts', async () => {
    const server = await withServer('vault', { kind: 'vault', auditFile: join(dir, 'vault-audit.log') });
    const front = await startEventFront({ addr: server.addr, token: server.token });
    const relay = await startRelay(
      [
        '--vault-addr',
        front.addr,
        '--events',
        'kv-v1/*,kv-v2/*',
        '--to',
        serve.url,
        '--spool',
        join(dir, 'spool-events'),
      ],
      { VAULT_TOKEN: server.token },
    );
    try {
      await waitFor(async () => front.subscribers() === 2, {
        timeoutMs: 30_000,
        what: 'the relay subscribed to kv-v1/* and kv-v2/*',
      });
      // Every write goes through the front, as it would reach an Enterprise server.
      await exercise(new VaultClient(front.addr, server.token), 'events');
      expect(new Set(front.frames.map((f) => (f.data as { event_type: string }).event_type))).toEqual(
        new Set([
          'kv-v2/data-write',
          'kv-v2/data-patch',
          'kv-v2/metadata-write',
          'kv-v2/data-delete',
          'kv-v2/undelete',
          'kv-v2/destroy',
          'kv-v2/metadata-delete',
          'kv-v1/write',
          'kv-v1/delete',
        ]),
      );
    } finally {
      await relay.stop();
      await front.stop();
      await server.stop();
    }
  });

  it('relay --events pointed at community Vault itself says the server has no event notifications and what to use', async () => {
    const server = await withServer('vault', { kind: 'vault' }, false);
    const relay = await startRelay(
      ['--vault-addr', server.addr, '--events', 'kv-v2/*', '--to', serve.url, '--spool', join(dir, 'spool-no-events')],
      { VAULT_TOKEN: server.token },
    );
    try {
      await waitFor(async () => relay.log().includes('has no event notifications'), {
        timeoutMs: 30_000,
        what: 'the relay to say the server has no events',
      });
      expect(relay.log()).toContain('--audit-file or --audit-listen');
      expect(relay.log()).not.toContain(server.token);
    } finally {
      await relay.stop();
      await server.stop();
    }
  });
});
