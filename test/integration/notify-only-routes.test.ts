/**
 * A notify-only route (`mode: notify`) on the real alpha cluster: every entry plans its target as usual and patches
 * nothing. Through `serve` (the intake), `apply` and `reconcile` (a real OpenBao), the Deployment's template stays
 * as it was (same generation, no restart record) and it keeps its one ReplicaSet; serve sends a `would-restart`
 * notification naming it to the route's webhook sink, `apply` prints "would restart (notify-only route)", and
 * reconcile's worker answers it the same way.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { REPO_ROOT, startDevServer, type DevServer } from '../vault/server.ts';
import { createNamespace, deleteNamespace, getWorkload, spawnServe, uniqueName, type ServeChild } from './support.ts';
import { clustersYaml, deployReady, kvWriteAudit, replicaSetsFor, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-notify-only');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-notify-only-'));
const stateDb = join(dir, 'state', 'rotations.sqlite');
const routesFile = join(dir, 'routes.yaml');
const POLICY = readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8');
const received: Array<Record<string, unknown>> = [];
let hook: Server;
let serve: ServeChild | undefined;
let vault: DevServer;
let token: string;
let before: { generation: number; annotations: Record<string, string> };

interface DeploymentView {
  metadata: { generation: number };
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
}
const watched = async () => (await getWorkload('alpha', NS, 'Deployment', 'watched')) as unknown as DeploymentView;

/** The Deployment exactly as it was: its generation, its template's annotations, one ReplicaSet. */
async function expectUntouched(): Promise<void> {
  const now = await watched();
  expect(now.metadata.generation).toBe(before.generation);
  expect(now.spec.template.metadata?.annotations ?? {}).toEqual(before.annotations);
  expect(await replicaSetsFor(NS, 'alpha', 'watched')).toHaveLength(1);
}

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
  vault = await startDevServer({ kind: 'openbao' });
  await vault.client.writePolicy('vault-rollout-reconcile', POLICY);
  ({ token } = await vault.client.createToken({ policies: ['vault-rollout-reconcile'] }));
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(['alpha'])}
vault: { mounts: { secret: 2 } }
rotationStore: { sqlite: ${JSON.stringify(stateDb)} }
notifications:
  sinks: { hook: { type: webhook, urlFromEnv: WATCH_HOOK_URL, secretFromEnv: WATCH_HOOK_KEY } }
  events: [would-restart]
routes:
  - name: watch
    match: { path: "secret/watch/{app}" }
    mode: notify
    targets: [{ clusters: [alpha], namespace: ${NS}, names: [watched], kind: Deployment, name: "{app}" }]
`,
  );
  new SqliteRotationStore(stateDb).close();
  await createNamespace('alpha', NS);
  await deployReady(NS, { watched: ['alpha'] });
  const d = await watched();
  before = { generation: d.metadata.generation, annotations: d.spec.template.metadata?.annotations ?? {} };
  // Written after the pods started: reconcile finds the workload behind this version.
  await vault.client.kv2Write('secret', 'watch/watched', { v: '1' });
}, 180_000);

afterAll(async () => {
  serve?.child.kill('SIGKILL');
  await vault?.stop();
  await new Promise<void>((r) => hook.close(() => r()));
  await deleteNamespace('alpha', NS);
});

async function cli(args: string[], input?: string): Promise<{ code: number; out: string; err: string }> {
  const io = memoryIo(input === undefined ? {} : { 'in.ndjson': input }, {
    VAULT_ROLLOUT_STATE_DB: stateDb,
    VAULT_TOKEN: token,
  });
  io.readText = async (f) => (f === 'in.ndjson' ? (input ?? '') : readFileSync(f, 'utf8'));
  const code = await main(args, io);
  return { code, out: io.out, err: io.err };
}

describe('a notify-only route', () => {
  it('serve sends what would restart to the route sink and patches nothing', async () => {
    serve = await spawnServe({
      routesFile,
      queueFile: join(dir, 'queue.sqlite'),
      listenTimeoutMs: 180_000,
      env: serveEnv(dir, stateDb, {
        VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1',
        WATCH_HOOK_URL: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`,
        WATCH_HOOK_KEY: 'notify-only-test-hmac-key-93b1',
      }),
    });
    const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
      method: 'POST',
      body: kvWriteAudit('watch-2', 'secret/watch/watched', 2),
      headers: { authorization: `Bearer ${BEARER_TOKEN}` },
    });
    expect(res.status).toBe(202);
    const event = await waitFor(async () => received.find((e) => e.kind === 'would-restart'), {
      timeoutMs: 30_000,
      what: 'the would-restart notification',
    });
    expect(event).toMatchObject({
      route: 'watch',
      cluster: 'alpha',
      secrets: ['secret/watch/watched version 2'],
      targets: [`Deployment ${NS}/watched`],
    });
    await expectUntouched();
    serve.child.kill('SIGKILL');
    serve = undefined;
  }, 120_000);

  it('apply prints "would restart (notify-only route)" and patches nothing', async () => {
    const { code, out } = await cli(
      ['apply', '--routes', routesFile, '--input', 'in.ndjson', '--no-wait'],
      `${kvWriteAudit('watch-3', 'secret/watch/watched', 3)}\n`,
    );
    expect(code).toBe(0);
    expect(out).toContain('would restart (notify-only route)');
    expect(out).toContain('watched');
    await expectUntouched();
  }, 60_000);

  it('reconcile finds it behind and patches nothing', async () => {
    const { out, err } = await cli(['reconcile', '--routes', routesFile, '--vault-addr', vault.addr, '--json']);
    expect(err).not.toContain('error');
    const report = JSON.parse(out) as { workloads: Array<{ name: string; state: string }> };
    expect(report.workloads.filter((w) => w.name === 'watched').map((w) => w.state)).toEqual(['behind']);
    expect(out).toContain('would restart (notify-only route)');
    await expectUntouched();
  }, 60_000);
  it('status shows it behind, its route notify-only', async () => {
    const { out } = await cli([
      'status',
      '--routes',
      routesFile,
      '--path',
      'secret/watch/watched',
      '--vault-addr',
      vault.addr,
    ]);
    expect(out).toContain('BEHIND (notify-only)');
    expect(out).toContain('restarts nothing');
  }, 60_000);
});
