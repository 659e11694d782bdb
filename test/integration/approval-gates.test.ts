/**
 * Approval gates (`rollout.gate.approval: true`) on the real clusters, two waves (gamma, then alpha):
 *
 * 1. `apply` restarts gamma, waits at the gate printing the exact `vault-rollout approve` command, and restarts alpha
 *    only after `approve` (run beside it) recorded who approved it; `approve --list` shows the wave while it waits,
 *    and approving an unknown rotation or a wave that does not wait is a clear error.
 * 2. `serve`: the gate records the request in the rotation store and waits; `status` (text and the page) shows
 *    "waits for approval (since …): vault-rollout approve …"; serve is killed with SIGKILL while the wave waits and
 *    started again on the same queue file; the approval given after that restarts alpha once, never before it and
 *    never twice.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { SqliteRotationStore } from '../../lib/rotations/sqlite-rotation-store.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { createNamespace, deleteNamespace, spawnServe, uniqueName, type ServeChild } from './support.ts';
import { clustersYaml, deployReady, kvWriteAudit, replicaSetsFor, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-approve');
const CLUSTERS = ['gamma', 'alpha'] as const;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-approve-'));
const stateDb = join(dir, 'state', 'rotations.sqlite');
const queueFile = join(dir, 'state', 'queue.sqlite');
const routesFile = join(dir, 'routes.yaml');
const APPROVE = /Approve it with: vault-rollout approve ([0-9a-f]+) --wave 2/;
let serve: ServeChild | undefined;

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(CLUSTERS)}
vault: { mounts: { secret: 2 } }
rotationStore: { sqlite: ${JSON.stringify(stateDb)} }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }]
  gate: { healthy: true, timeout: 60s, approval: true }
routes:
  - name: approve
    match: { path: "secret/approve/{app}" }
    targets: [{ clusters: [alpha, gamma], namespace: ${NS}, names: [byhand, served], kind: Deployment, name: "{app}" }]
`,
  );
  new SqliteRotationStore(stateDb).close();
  await Promise.all(CLUSTERS.map((c) => createNamespace(c, NS)));
  await deployReady(NS, { byhand: CLUSTERS, served: CLUSTERS });
}, 180_000);

afterAll(async () => {
  serve?.child.kill('SIGKILL');
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
});

/** A CLI command in this process against the test's store; its io stays readable while it runs. */
function cli(args: string[], input = '') {
  const io = memoryIo({ 'in.ndjson': input }, { VAULT_ROLLOUT_STATE_DB: stateDb });
  io.readText = async (f) => (f === 'in.ndjson' ? input : readFileSync(f, 'utf8'));
  return { io, done: main(args, io) };
}
const run = async (args: string[]) => {
  const { io, done } = cli(args);
  return { code: await done, out: io.out, err: io.err };
};
const versionTwo = (c: string, app: string) => replicaSetsFor(NS, c, app, `secret/approve/${app}`, 2);

describe('approval gates', () => {
  it('apply waits at the gate, printing the command, until approve records who approved it', async () => {
    const audit = `${kvWriteAudit('approve-byhand-2', 'secret/approve/byhand', 2)}\n`;
    const apply = cli(['apply', '--routes', routesFile, '--input', 'in.ndjson', '--wait', '--json'], audit);
    const rotation = await waitFor(async () => APPROVE.exec(apply.io.err)?.[1], {
      timeoutMs: 60_000,
      what: 'apply asking for approval',
    });
    expect(await versionTwo('gamma', 'byhand')).toHaveLength(1);
    expect(await versionTwo('alpha', 'byhand')).toHaveLength(0);

    const listed = await run(['approve', '--list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out).pending).toMatchObject([
      { rotation, wave: 2, waves: 2, secrets: ['secret/approve/byhand version 2'] },
    ]);
    const unknown = await run(['approve', 'abcdef0123456789']);
    expect(unknown).toMatchObject({ code: 1, err: expect.stringContaining('no wave of rotation abcdef0123456789') });
    const notWaiting = await run(['approve', rotation, '--wave', '3']);
    expect(notWaiting).toMatchObject({ code: 1, err: expect.stringContaining('wave 3 of rotation') });
    expect(await versionTwo('alpha', 'byhand')).toHaveLength(0);

    const approved = await run(['approve', rotation, '--wave', '2', '--by', 'alice']);
    expect(approved.code).toBe(0);
    expect(approved.out).toContain(`Approved wave 2 of 2 of rotation ${rotation}`);
    expect(await apply.done).toBe(0);
    expect(await versionTwo('alpha', 'byhand')).toHaveLength(1);
    const store = new SqliteRotationStore(stateDb);
    try {
      expect(await store.approvals.get(rotation, 2)).toMatchObject({
        approvedBy: 'alice',
        approvedAt: expect.any(String),
      });
    } finally {
      store.close();
    }
  }, 120_000);

  it('serve waits for the approval through a kill -9 and restarts the next wave once, after it', async () => {
    const start = () => spawnServe({ routesFile, queueFile, env: serveEnv(dir, stateDb), listenTimeoutMs: 120_000 });
    serve = await start();
    const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
      method: 'POST',
      headers: { authorization: `Bearer ${BEARER_TOKEN}` },
      body: `${kvWriteAudit('approve-served-2', 'secret/approve/served', 2)}\n`,
    });
    expect(res.status).toBe(202);
    const waiting = await waitFor(
      async () => {
        const { out } = await run(['approve', '--list', '--json']);
        return (JSON.parse(out).pending as Array<{ rotation: string; since: string }>)[0];
      },
      { timeoutMs: 90_000, what: 'the gate asking for approval' },
    );
    expect(await versionTwo('gamma', 'served')).toHaveLength(1);

    const status = await run(['status', '--routes', routesFile]);
    expect(status.out).toContain(
      `wave 2 of 2 waits for approval (since ${waiting.since}): vault-rollout approve ${waiting.rotation} --wave 2`,
    );
    const page = await run(['status', '--routes', routesFile, '--output', 'html']);
    expect(page.out).toContain('Waiting for approval (1)');
    expect(page.out).toContain(`vault-rollout approve ${waiting.rotation} --wave 2`);

    await killed(serve.child);
    serve = await start();
    // The restarted serve works the held gate again (at most one gate recheck later): still waiting.
    await new Promise((r) => setTimeout(r, 10_000));
    expect(await versionTwo('alpha', 'served')).toHaveLength(0);
    expect((await run(['approve', '--list', '--json'])).out).toContain(waiting.since);

    expect((await run(['approve', waiting.rotation, '--by', 'bob'])).code).toBe(0);
    const [restarted] = await waitFor(
      async () => {
        const sets = await versionTwo('alpha', 'served');
        return sets.length === 1 && sets;
      },
      { timeoutMs: 60_000, what: 'alpha restarted after the approval' },
    );
    const approvedAt = await approvedAtOf(waiting.rotation);
    // Never before the approval (creationTimestamp has whole seconds).
    expect(Date.parse(restarted?.metadata.creationTimestamp ?? '')).toBeGreaterThanOrEqual(
      Math.floor(approvedAt / 1000) * 1000,
    );
    // Killed again once wave 2 is out: the restart is not repeated by what the queue redelivers.
    await killed(serve.child);
    serve = await start();
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await versionTwo('alpha', 'served')).toHaveLength(1);
    expect(await versionTwo('gamma', 'served')).toHaveLength(1);
  }, 240_000);
});

async function approvedAtOf(rotation: string): Promise<number> {
  const store = new SqliteRotationStore(stateDb);
  try {
    return Date.parse((await store.approvals.get(rotation, 2))?.approvedAt ?? '');
  } finally {
    store.close();
  }
}

async function killed(child: ChildProcess): Promise<void> {
  const exit = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGKILL');
  await exit;
}
