/**
 * `serve` following a rollout longer than its queue's visibility timeout: the timeout shortened to 3 s
 * (VAULT_ROLLOUT_VISIBILITY_SECONDS), a Deployment on beta whose new pods become Ready only after ~10 s
 * (`vault-rollout.test/readiness: slow`), the default follow budget (60 s), so one attempt follows the whole rollout.
 * The worker's heartbeat keeps the message its own: worked once (one `rollout message done`, restarted and complete),
 * no redelivery, nothing dead-lettered, nothing lost, one new ReplicaSet.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { cluster, createNamespace, createWorkload, deleteNamespace, expectReplicaSets, repoRootDir, settledWorkload, uniqueName } from './support.ts';

const NS = uniqueName('vr-visibility');
const dir = mkdtempSync(join(tmpdir(), 'vr-visibility-'));
const routesFile = join(dir, 'routes.yaml');
const queueFile = join(dir, 'state', 'queue.sqlite');
const VISIBILITY_SECONDS = 3;
let child: ChildProcess | undefined;

beforeAll(async () => {
  writeFileSync(routesFile, `clusters:
  beta: { kubeconfig: { file: ${JSON.stringify(cluster('beta').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: slow
    match: { path: "secret/visibility/slow" }
    targets: [{ clusters: [beta], namespace: ${NS}, kind: Deployment, name: slow }]
`);
  await createNamespace('beta', NS);
  const template = { metadata: { labels: { app: 'slow' }, annotations: { 'vault-rollout.test/readiness': 'slow' } }, spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } };
  await createWorkload('beta', NS, 'Deployment', 'slow', {}, { replicas: 2, template });
  await waitFor(async () => ((await settledWorkload('beta', NS, 'Deployment', 'slow')) as { status?: { readyReplicas?: number } }).status?.readyReplicas === 2 || undefined, { timeoutMs: 90_000, what: 'the first pods Ready' });
}, 300_000);

afterAll(async () => {
  child?.kill('SIGKILL');
  await deleteNamespace('beta', NS);
});

describe('serve and a rollout longer than the visibility timeout', () => {
  it('works the message once: no redelivery, no dead letter, one restart', async () => {
    let output = '';
    child = spawn(process.execPath, [join(repoRootDir, 'lib/cli/main.ts'), 'serve', '--routes', routesFile, '--port', '0', '--queue-file', queueFile], {
      cwd: repoRootDir,
      env: { PATH: process.env.PATH, HOME: dir, VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN, POWERTOOLS_METRICS_DISABLED: 'true', VAULT_ROLLOUT_VISIBILITY_SECONDS: String(VISIBILITY_SECONDS) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    const port = await waitFor(async () => Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1]) || undefined, { timeoutMs: 180_000, what: 'serve listening' });

    const audit = JSON.stringify({ time: new Date().toISOString(), type: 'response', request: { id: 'visibility-1', operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/visibility/slow' }, response: { data: { version: 2 } } });
    const res = await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, { method: 'POST', body: audit, headers: { authorization: `Bearer ${BEARER_TOKEN}` } });
    expect(res.status).toBe(202);

    type Line = { message?: string; results?: Array<{ outcome: string; rollout?: string }>; operation?: string };
    const lines = (): Line[] => output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);
    const done = () => lines().filter((l) => l.message === 'rollout message done');
    await waitFor(async () => done().some((l) => l.results?.some((r) => r.rollout === 'complete')) || undefined, { timeoutMs: 120_000, what: 'the rollout followed to complete' });
    // Several visibility timeouts more, for a redelivery to show if there were one.
    await new Promise((r) => setTimeout(r, 3 * VISIBILITY_SECONDS * 1000));
    child.kill('SIGTERM');
    await new Promise((r) => child?.once('exit', r));

    expect(done().map((l) => l.results?.map((r) => `${r.outcome}:${r.rollout}`).join())).toEqual(['restarted:complete']);
    expect(lines().filter((l) => l.message?.startsWith('the queue took back'))).toEqual([]);
    const db = new DatabaseSync(queueFile, { readOnly: true });
    try {
      expect(db.prepare('SELECT COUNT(*) AS n FROM messages').get()).toEqual({ n: 0 });
      expect(db.prepare('SELECT COUNT(*) AS n FROM dead_letters').get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    await expectReplicaSets('beta', NS, 'slow', 2);
  }, 300_000);
});
