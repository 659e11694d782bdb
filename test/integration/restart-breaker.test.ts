/**
 * The restart breaker (`rollout.breaker: { restarts: 2, within: 1h }`) on the real alpha cluster, through `serve`
 * and through `apply`, with the rotation store in one SQLite file:
 *
 * 1. serve: versions 1 and 2 of `served` restart it (one new ReplicaSet each); version 3 is refused as a halt — the
 *    halt is in the store with the breaker's reason, a `halted` notification reaches the webhook sink, a
 *    RotationHalted Event is on the workload, and no ReplicaSet is made.
 * 2. serve killed with SIGKILL and started again on the same files: version 4 is refused too (a halt of its own),
 *    nothing restarts; `halts clear` of that halt resets the breaker, and version 5 restarts `served` once.
 * 3. apply: versions 1 and 2 of `applied` restart it; version 3 exits 4 with the halt printed and nothing patched;
 *    `halts` lists it; after `halts clear` version 4 restarts it.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { memoryIo } from '../helpers.ts';
import { createNamespace, deleteNamespace, events, spawnServe, uniqueName, type ServeChild } from './support.ts';
import { clustersYaml, deployReady, kvWriteAudit, replicaSetsFor, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-breaker');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-breaker-'));
const stateDb = join(dir, 'state', 'rotations.sqlite');
const queueFile = join(dir, 'queue.sqlite');
const routesFile = join(dir, 'routes.yaml');
const received: Array<Record<string, unknown>> = [];
let hook: Server;
let serve: ServeChild | undefined;

beforeAll(async () => {
  hook = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(['alpha'])}
vault: { mounts: { secret: 2 } }
rotationStore: { sqlite: ${JSON.stringify(stateDb)} }
notifications:
  sinks: { hook: { type: webhook, urlFromEnv: BREAKER_HOOK_URL, secretFromEnv: BREAKER_HOOK_KEY } }
  events: [halted]
routes:
  - name: breaker
    match: { path: "secret/breaker/{app}" }
    rollout: { timeout: 20s, breaker: { restarts: 2, within: 1h } }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: [served, applied], kind: Deployment, name: "{app}" }]
`,
  );
  new SqliteRotationStore(stateDb).close();
  await createNamespace('alpha', NS);
  await deployReady(NS, { served: ['alpha'], applied: ['alpha'] });
}, 180_000);

afterAll(async () => {
  serve?.child.kill('SIGKILL');
  await new Promise<void>((r) => hook.close(() => r()));
  await deleteNamespace('alpha', NS);
});

const startServe = (): Promise<ServeChild> =>
  spawnServe({
    routesFile,
    queueFile,
    listenTimeoutMs: 180_000,
    env: serveEnv(dir, stateDb, {
      VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1',
      BREAKER_HOOK_URL: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`,
      BREAKER_HOOK_KEY: 'breaker-test-hmac-key-51d0',
    }),
  });

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once('exit', () => r()));

async function post(app: string, version: number): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${serve?.port}/v1/vault/audit`, {
    method: 'POST',
    body: kvWriteAudit(`breaker-${app}-${version}`, `secret/breaker/${app}`, version),
    headers: { authorization: `Bearer ${BEARER_TOKEN}` },
  });
  expect(res.status).toBe(202);
}

async function cli(args: string[], input?: string): Promise<{ code: number; out: string; err: string }> {
  const io = memoryIo(input === undefined ? {} : { 'in.ndjson': input }, { VAULT_ROLLOUT_STATE_DB: stateDb });
  io.readText = async (f) => (f === 'in.ndjson' ? (input ?? '') : readFileSync(f, 'utf8'));
  const code = await main(args, io);
  return { code, out: io.out, err: io.err };
}

const restartsOf = async (app: string) =>
  (await replicaSetsFor(NS, 'alpha', app)).filter(
    (rs) => rs.spec.template.metadata?.annotations?.['vault-rollout.io/versions'],
  ).length;

async function haltOf(secret: string) {
  const store = new SqliteRotationStore(stateDb);
  try {
    return (await store.halts()).find((h) => h.secrets.includes(secret));
  } finally {
    store.close();
  }
}

const waitHalt = (secret: string) =>
  waitFor(async () => await haltOf(secret), { timeoutMs: 30_000, what: `the halt of ${secret}` });
const waitRestarts = (app: string, n: number) =>
  waitFor(async () => (await restartsOf(app)) === n || undefined, {
    timeoutMs: 30_000,
    what: `${n} restarts of ${app}`,
  });

describe('the restart breaker', () => {
  it('serve restarts twice within the window, then refuses the third as a halt with its reason', async () => {
    serve = await startServe();
    await post('served', 1);
    await waitRestarts('served', 1);
    await post('served', 2);
    await waitRestarts('served', 2);
    await post('served', 3);
    const halt = await waitHalt('secret/breaker/served version 3');
    expect(halt.failing).toMatchObject({ cluster: 'alpha', namespace: NS, kind: 'Deployment', name: 'served' });
    expect(halt.failing.state).toBe('breaker');
    expect(halt.why).toMatch(/restart breaker: 2 restarts within 1h \(rollout\.breaker allows 2\)/);
    await waitFor(async () => received.find((e) => e.kind === 'halted'), {
      timeoutMs: 30_000,
      what: 'the halted notification',
    });
    expect(String(received.find((e) => e.kind === 'halted')?.reason)).toContain('restart breaker');
    const halted = await events('alpha', NS, 'served');
    expect(halted.some((e) => e.reason === 'RotationHalted' && e.message.includes('restart breaker'))).toBe(true);
    expect(await restartsOf('served')).toBe(2);
  }, 120_000);

  it('the halt survives kill -9 of serve: no restart beyond 2 until halts clear resets the breaker', async () => {
    serve?.child.kill('SIGKILL');
    if (serve) await exited(serve.child);
    serve = await startServe();
    await post('served', 3);
    await post('served', 4);
    const halt = await waitHalt('secret/breaker/served version 4');
    expect(halt.why).toContain('restart breaker');
    expect(await restartsOf('served')).toBe(2);
    const cleared = await cli(['halts', 'clear', halt.rotation]);
    expect(cleared.code).toBe(0);
    expect(cleared.out).toContain(`Reset the restart breaker of Deployment ${NS}/served in alpha`);
    await post('served', 5);
    await waitRestarts('served', 3);
    // Still 3 a moment later: version 5 restarted once, and nothing else went through.
    await new Promise((r) => setTimeout(r, 2000));
    expect(await restartsOf('served')).toBe(3);
    serve?.child.kill('SIGKILL');
    if (serve) await exited(serve.child);
    serve = undefined;
  }, 180_000);

  it('apply honours it: the third restart exits 4 with the halt, nothing patched; halts clear lets the next through', async () => {
    const apply = (v: number) =>
      cli(
        ['apply', '--routes', routesFile, '--input', 'in.ndjson', '--no-wait', '--json'],
        `${kvWriteAudit(`apply-${v}`, 'secret/breaker/applied', v)}\n`,
      );
    expect((await apply(1)).code).toBe(0);
    expect((await apply(2)).code).toBe(0);
    await waitRestarts('applied', 2);
    const third = await apply(3);
    expect(third.code).toBe(4);
    expect(third.err).toMatch(/HALTED rotation [0-9a-f]+ \(secret\/breaker\/applied version 3\)/);
    expect(third.out).toContain('restart breaker');
    expect(await restartsOf('applied')).toBe(2);
    const listed = await cli(['halts']);
    expect(listed.out).toContain('secret/breaker/applied version 3');
    const halt = await haltOf('secret/breaker/applied version 3');
    expect((await cli(['halts', 'clear', halt?.rotation ?? ''])).code).toBe(0);
    expect((await apply(4)).code).toBe(0);
    await waitRestarts('applied', 3);
  }, 120_000);
});
