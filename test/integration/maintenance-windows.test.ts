// Maintenance windows on the real clusters. Through `serve`: two versions of a secret written while the route's
// window is closed are accepted (202) and restart nothing; serve is killed with SIGKILL while they wait (the waits
// are in its queue file, in the window's group, not the cluster's); a new serve, once the window opens (a minute
// boundary 25-85 s ahead, real time), restarts the workload ONCE, onto the newest version. Through `apply`: the first
// wave (no window) restarts, the second wave's closed window defers it ("waits for its window (opens …)", exit 3),
// nothing patched there. Bounded: one Deployment per case, at most ~2 minutes. Never skipped.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { memoryIo } from '../helpers.ts';
import { waitFor } from '../clusters/kube-http.ts';
import {
  createNamespace,
  createWorkload,
  deleteNamespace,
  spawnServe,
  uniqueName,
  type ServeChild,
} from './support.ts';
import { clustersYaml, deploymentComplete, kvWriteAudit, replicaSetsFor } from './wave-fixtures.ts';

const NS = uniqueName('vr-window');
const dir = mkdtempSync(join(tmpdir(), 'vr-window-'));
const routesFile = join(dir, 'routes.yaml');
const queueFile = join(dir, 'state', 'queue.sqlite');
const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
const ALL_DAYS = '[Mon, Tue, Wed, Thu, Fri, Sat, Sun]';
// The serve route's window opens at the first minute boundary at least 25 s from now, for 20 minutes.
const OPENS = Math.ceil((Date.now() + 25_000) / 60_000) * 60_000;
// The apply route's second wave: a window that opened 10 minutes ago and closed 5 minutes ago, so closed now.
const CLOSED_FROM = Date.now() - 10 * 60_000;

beforeAll(async () => {
  mkdirSync(join(dir, 'state'), { recursive: true });
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(['alpha', 'gamma'])}
vault: { mounts: { secret: 2 } }
routes:
  - name: nightly
    match: { path: "secret/window/web" }
    rollout:
      window: { days: ${ALL_DAYS}, from: "${hhmm(OPENS)}", to: "${hhmm(OPENS + 20 * 60_000)}", timeZone: UTC }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: web }]
  - name: waved
    match: { path: "secret/window/api" }
    rollout:
      waves:
        - clusters: [gamma]
        - clusters: [alpha]
          window: { days: ${ALL_DAYS}, from: "${hhmm(CLOSED_FROM)}", to: "${hhmm(CLOSED_FROM + 5 * 60_000)}", timeZone: UTC }
      gate: { healthy: true, timeout: 30s }
    targets: [{ clusters: [alpha, gamma], namespace: ${NS}, kind: Deployment, name: api }]
`,
  );
  await Promise.all(['alpha', 'gamma'].map((c) => createNamespace(c, NS)));
  await createWorkload('alpha', NS, 'Deployment', 'web');
  for (const c of ['alpha', 'gamma']) await createWorkload(c, NS, 'Deployment', 'api');
  for (const [c, app] of [
    ['alpha', 'web'],
    ['alpha', 'api'],
    ['gamma', 'api'],
  ] as const)
    await waitFor(
      async () => (await replicaSetsFor(NS, c, app)).length === 1 && (await deploymentComplete(NS, c, app)),
      {
        timeoutMs: 60_000,
        what: `${c}/${app} ready`,
      },
    );
}, 120_000);

afterAll(async () => {
  await Promise.all(['alpha', 'gamma'].map((c) => deleteNamespace(c, NS)));
});

const startServe = (): Promise<ServeChild> =>
  spawnServe({
    routesFile,
    queueFile,
    env: {
      HOME: dir,
      VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
  });

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => child.once('exit', () => r()));

function queued(): { windowWaits: number; clusterGroup: number; deadLetters: number } {
  const db = new DatabaseSync(queueFile);
  try {
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    return {
      windowWaits: count("SELECT COUNT(*) AS n FROM messages WHERE group_id LIKE 'window-alpha-%'"),
      clusterGroup: count("SELECT COUNT(*) AS n FROM messages WHERE group_id = 'alpha'"),
      deadLetters: count('SELECT COUNT(*) AS n FROM dead_letters'),
    };
  } finally {
    db.close();
  }
}

describe('maintenance windows', () => {
  it('serve: changes outside the window wait, survive kill -9, and restart once, onto the newest version, when it opens', async () => {
    expect(Date.now()).toBeLessThan(OPENS - 5_000);
    let serve = await startServe();
    for (const v of [2, 3]) {
      const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
        method: 'POST',
        body: kvWriteAudit(`window-web-${v}`, 'secret/window/web', v),
        headers: { authorization: `Bearer ${BEARER_TOKEN}` },
      });
      expect(res.status).toBe(202);
    }
    // The worker moved both out of the cluster's group into the window's, and restarted nothing.
    await new Promise((r) => setTimeout(r, 2_000));
    serve.child.kill('SIGKILL');
    await exited(serve.child);
    expect(Date.now()).toBeLessThan(OPENS);
    expect(queued()).toMatchObject({ clusterGroup: 0, deadLetters: 0 });
    expect(queued().windowWaits).toBeGreaterThanOrEqual(2);
    expect(await replicaSetsFor(NS, 'alpha', 'web')).toHaveLength(1);

    serve = await startServe();
    try {
      await waitFor(async () => (await replicaSetsFor(NS, 'alpha', 'web', 'secret/window/web', 3)).length === 1, {
        timeoutMs: OPENS - Date.now() + 30_000,
        what: 'the restart onto version 3 once the window opened',
      });
      const restartedAt = Date.now();
      expect(restartedAt).toBeGreaterThanOrEqual(OPENS);
      // Once: no ReplicaSet for version 2, none more after a while, nothing left waiting.
      await new Promise((r) => setTimeout(r, 4_000));
      expect(await replicaSetsFor(NS, 'alpha', 'web')).toHaveLength(2);
      expect(await replicaSetsFor(NS, 'alpha', 'web', 'secret/window/web', 2)).toHaveLength(0);
    } finally {
      serve.child.kill('SIGKILL');
      await exited(serve.child);
    }
    expect(queued()).toMatchObject({ windowWaits: 0, deadLetters: 0 });
  }, 150_000);

  it('apply: the open first wave restarts; the second wave waits for its window, deferred, exit 3', async () => {
    const input = `${kvWriteAudit('window-api-2', 'secret/window/api', 2)}\n`;
    const io = memoryIo({ 'in.ndjson': input }, { VAULT_ROLLOUT_STATE_DB: join(dir, 'state', 'apply.sqlite') });
    io.readText = async (f) => (f === 'in.ndjson' ? input : readFileSync(f, 'utf8'));
    const code = await main(['apply', '--routes', routesFile, '--input', 'in.ndjson', '--wait', '--json'], io);
    expect(io.err).toMatch(
      /route waved, wave 2: deferred: waits for its window \(opens \d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z\)/,
    );
    expect(code).toBe(3);
    const results = (JSON.parse(io.out) as { results: Array<{ cluster: string; outcome: string; reason: string }> })
      .results;
    expect(results.find((r) => r.cluster === 'gamma')?.outcome).toBe('restarted');
    expect(results.find((r) => r.cluster === 'alpha')).toMatchObject({
      outcome: 'deferred',
      reason: expect.stringMatching(/^waits for its window \(opens /) as string,
    });
    expect(await replicaSetsFor(NS, 'gamma', 'api', 'secret/window/api', 2)).toHaveLength(1);
    expect(await replicaSetsFor(NS, 'alpha', 'api')).toHaveLength(1);
  }, 60_000);
});
