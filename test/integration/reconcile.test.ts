/**
 * Reconcile end to end: a real OpenBao 2.7.2 and a real test cluster (kube-apiserver, controller manager, kwok pods),
 * no change feed at all. Five writes in OpenBao; `vault-rollout reconcile` restarts exactly the five routed
 * workloads, once each; a second run restarts nothing. A fleet whose pods started after the current versions: the
 * first reconcile restarts nothing (it records them), and a later write restarts only its workload. A KV v1 route is
 * reported as invisible to reconcile. Never skipped: a missing server or cluster fails beforeAll.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { watchRestarts, type Restart } from '../vault/e2e-stack.ts';
import { REPO_ROOT, startDevServer, type DevServer } from '../vault/server.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  expectReplicaSets,
  getWorkload,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-reconcile');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-reconcile-'));
const POLICY = readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8');

let server: DevServer;
let token: string;
let watch: ReturnType<typeof watchRestarts>;

function routes(file: string, prefix: string): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2, kv1: 1 } }
routes:
  - name: ${prefix}
    match: { path: "secret/${prefix}/{app}/db" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: ${prefix}-legacy
    match: { path: "kv1/${prefix}/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  return path;
}

async function runReconcile(
  routesFile: string,
  ...extra: string[]
): Promise<{ code: number; out: string; err: string }> {
  const io = memoryIo({}, { VAULT_TOKEN: token });
  io.readText = async (f) => readFileSync(f, 'utf8');
  const code = await main(['reconcile', '--routes', routesFile, '--vault-addr', server.addr, ...extra], io);
  return { code, out: io.out, err: io.err };
}

/** Waits until every app has a running pod with a start time (kwok starts them). */
async function podsRunning(apps: readonly string[]): Promise<void> {
  await waitFor(
    async () => {
      const res = await admin('alpha').request('GET', `/api/v1/namespaces/${NS}/pods`);
      const pods = (
        res.body as { items: Array<{ metadata: { labels?: Record<string, string> }; status?: { startTime?: string } }> }
      ).items;
      return (
        apps.every((app) => pods.some((p) => p.metadata.labels?.app === app && p.status?.startTime !== undefined)) ||
        undefined
      );
    },
    { timeoutMs: 60_000, intervalMs: 250, what: `pods of ${apps.join(', ')}` },
  );
}

const restartsOf = (name: string): Restart[] => watch.restarts.filter((r) => r.name === name);
const settle = () => new Promise((r) => setTimeout(r, 2000));

beforeAll(async () => {
  server = await startDevServer({ kind: 'openbao' });
  await server.client.enableKv('kv1', 1);
  await server.client.writePolicy('vault-rollout-reconcile', POLICY);
  ({ token } = await server.client.createToken({ policies: ['vault-rollout-reconcile'] }));
  await createNamespace('alpha', NS);
  watch = watchRestarts(cluster('alpha'), NS);
}, 300_000);

afterAll(async () => {
  watch?.stop();
  await server?.stop();
  await deleteNamespace('alpha', NS);
});

describe('reconcile with the feed off', () => {
  it('five writes in OpenBao: exactly the five routed workloads restart, once; a second run restarts nothing', async () => {
    const apps = Array.from({ length: 7 }, (_, i) => `rc-${i}`);
    for (const app of apps) await createWorkload('alpha', NS, 'Deployment', app);
    await podsRunning(apps);
    await settle();
    // Five routed writes; rc-5 and rc-6 have no secret; one write nobody routes; one KV v1 write reconcile cannot see.
    for (const app of apps.slice(0, 5)) await server.client.kv2Write('secret', `rc/${app}/db`, { password: 'rotated' });
    await server.client.kv2Write('secret', 'unrouted/db', { password: 'x' });
    await server.client.kv1Write('kv1', 'rc/rc-5', { password: 'x' });
    const file = routes('rc.yaml', 'rc');

    const first = await runReconcile(file);
    expect(first.err).not.toContain(token);
    expect(first.code, first.out + first.err).toBe(0);
    expect(first.out).toContain('KV v1 (no versions): reconcile cannot see changes of rc-legacy');
    expect(first.out).toMatch(
      /Workloads \(5\): 0 current, 0 running the current version \(recorded without a restart\), 5 behind, 0 failed/,
    );
    await waitFor(async () => apps.slice(0, 5).every((app) => restartsOf(app).length === 1) || undefined, {
      timeoutMs: 30_000,
      what: 'five restarts',
    });
    await settle();
    for (const [i, app] of apps.entries()) expect(restartsOf(app), app).toHaveLength(i < 5 ? 1 : 0);
    for (const app of apps.slice(0, 5)) expect(restartsOf(app)[0]?.versions).toEqual({ [`secret/rc/${app}/db`]: 1 });

    const second = await runReconcile(file);
    expect(second.code, second.out + second.err).toBe(0);
    expect(second.out).toContain('Nothing is behind: nothing queued.');
    expect(second.out).toMatch(/Workloads \(5\): 5 current/);
    await settle();
    for (const [i, app] of apps.entries()) expect(restartsOf(app), app).toHaveLength(i < 5 ? 1 : 0);

    // A dry run after one more write shows the plan and changes nothing.
    await server.client.kv2Write('secret', 'rc/rc-0/db', { password: 'again' });
    const dry = await runReconcile(file, '--dry-run');
    expect(dry.code).toBe(0);
    expect(dry.out).toContain('DRY RUN: nothing recorded, nothing queued; 1 workload would restart.');
    expect(dry.out).toMatch(/alpha\s+\S+\s+Deployment\s+rc-0\s+BEHIND\s+secret\/rc\/rc-0\/db/);
    await settle();
    expect(restartsOf('rc-0')).toHaveLength(1);
  });

  it('a fleet that already runs the current versions: the first reconcile restarts nothing; a later write restarts its workload only', async () => {
    const apps = Array.from({ length: 5 }, (_, i) => `cur-${i}`);
    for (const app of apps) await server.client.kv2Write('secret', `cur/${app}/db`, { password: 'current' });
    // Pod start times have whole seconds: start the pods clearly after the versions were created.
    await new Promise((r) => setTimeout(r, 1500));
    for (const app of apps) await createWorkload('alpha', NS, 'Deployment', app);
    await podsRunning(apps);
    await settle();
    const file = routes('cur.yaml', 'cur');

    const first = await runReconcile(file);
    expect(first.code, first.out + first.err).toBe(0);
    expect(first.out).toMatch(
      /Workloads \(5\): 0 current, 5 running the current version \(recorded without a restart\), 0 behind, 0 failed/,
    );
    expect(first.out).toContain('Nothing is behind: nothing queued.');
    await settle();
    for (const app of apps) {
      expect(restartsOf(app), app).toHaveLength(0);
      const object = await getWorkload('alpha', NS, 'Deployment', app);
      expect(object.metadata.annotations?.['vault-rollout.io/versions']).toBe(
        JSON.stringify({ [`secret/cur/${app}/db`]: 1 }),
      );
      // The pod template is untouched (a Deployment counts an annotation change in its generation, but rolls nothing).
      expect(object.spec.template?.metadata?.annotations).toBeUndefined();
      await expectReplicaSets('alpha', NS, app, 1);
    }
    expect((await runReconcile(file)).out).toMatch(/Workloads \(5\): 5 current/);

    await server.client.kv2Write('secret', 'cur/cur-2/db', { password: 'rotated' });
    const next = await runReconcile(file);
    expect(next.code, next.out + next.err).toBe(0);
    await waitFor(async () => restartsOf('cur-2').length === 1 || undefined, {
      timeoutMs: 30_000,
      what: 'the restart of cur-2',
    });
    await settle();
    for (const app of apps) expect(restartsOf(app), app).toHaveLength(app === 'cur-2' ? 1 : 0);
    expect(restartsOf('cur-2')[0]?.versions).toEqual({ 'secret/cur/cur-2/db': 2 });
  });

  it("deleted and destroyed versions follow the route's operations", async () => {
    await createWorkload('alpha', NS, 'Deployment', 'del-0');
    await createWorkload('alpha', NS, 'Deployment', 'del-1');
    await podsRunning(['del-0', 'del-1']);
    await settle();
    const file = join(dir, 'del.yaml');
    writeFileSync(
      file,
      `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
routes:
  - name: with-delete
    match: { path: "secret/del/del-0", operations: [write, delete, destroy] }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: del-0 }]
  - name: writes-only
    match: { path: "secret/del/del-1" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: del-1 }]
`,
    );
    for (const app of ['del-0', 'del-1']) {
      await server.client.kv2Write('secret', `del/${app}`, { password: 'one' });
      await server.client.kv2Delete('secret', `del/${app}`);
    }
    const run = await runReconcile(file);
    expect(run.code, run.out + run.err).toBe(0);
    await waitFor(async () => restartsOf('del-0').length === 1 || undefined, {
      timeoutMs: 30_000,
      what: 'the restart of del-0',
    });
    await settle();
    // A delete records its time and id (the same version may be deleted again after an undelete).
    expect(restartsOf('del-0')[0]?.versions).toEqual({
      'secret/del/del-0#delete': expect.stringMatching(/^\d{4}-.*#reconcile:secret\/del\/del-0@1:delete$/),
    });
    expect(restartsOf('del-1')).toHaveLength(0);
  });
});
