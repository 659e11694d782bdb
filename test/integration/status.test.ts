// `vault-rollout status` on the real test clusters and a real OpenBao: current, behind, failed, halted and poisoned
// consumers, the exit codes, and `--wait` returning when the last (slow) consumer completes. A `..` record
// key makes no request outside `secret/metadata/` (OpenBao's audit log says), a tenant's look-alike halt Event is
// ignored, and a workload reconcile recorded without a restart is current (exit 0). Never skipped.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { statusCommand } from '../../lib/cli/status-command.ts';
import { haltEventName } from '../../lib/plan/restart-record.ts';
import { recordHalt } from '../../lib/pipeline/kube-executor.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { readAuditFile, REPO_ROOT, startDevServer, type DevServer } from '../vault/server.ts';
import {
  admin,
  clusters,
  createNamespace,
  createWorkload,
  deleteNamespace,
  fileAccess,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-status');
const CLUSTERS = ['alpha', 'beta'];
const routes = (targets = '[alpha, beta]') => `clusters:
${clusters.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2, legacy: 1 } }
routes:
  - name: apps
    match: { path: "secret/status/{app}" }
    targets: [{ clusters: ${targets}, namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: legacy
    match: { path: "legacy/status/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: wide
    match: { path: "secret/status/wide/**" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: [wide], kind: Deployment, name: wide }]
`;
const write = (app: string, version: number, mount = 'secret') =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `st-${app}-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: `${mount}/`,
      path: mount === 'secret' ? `${mount}/data/status/${app}` : `${mount}/status/${app}`,
    },
    response: mount === 'secret' ? { data: { version } } : {},
  });

async function apply(app: string, version: number, targets?: string, mount?: string): Promise<void> {
  const io = memoryIo({ 'routes.yaml': routes(targets), '-': write(app, version, mount) });
  expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io), io.out + io.err).toBe(0);
}

async function status(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const io = memoryIo({ 'routes.yaml': routes() }, env);
  const code = await statusCommand(['--routes', 'routes.yaml', ...args], io);
  return { code, out: io.out, err: io.err };
}

const row = (out: string, cluster: string, app: string): string =>
  out.split('\n').find((l) => new RegExp(`^\\s+${cluster}\\s+${NS}/Deployment/${app}\\s`).test(l)) ??
  `(no row for ${cluster} ${app} in:\n${out})`;

let bao: DevServer;
let token: string;
const AUDIT = join(mkdtempSync(join(tmpdir(), 'vault-rollout-status-')), 'audit.log');

const template = (app: string, readiness?: string) => ({
  metadata: { labels: { app }, ...(readiness ? { annotations: { 'vault-rollout.test/readiness': readiness } } : {}) },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

beforeAll(async () => {
  bao = await startDevServer({ kind: 'openbao', auditFile: AUDIT });
  await bao.client.writePolicy(
    'vault-rollout-reconcile',
    readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8'),
  );
  ({ token } = await bao.client.createToken({ policies: ['vault-rollout-reconcile'] }));
  for (const c of CLUSTERS) {
    await createNamespace(c, NS);
    await createWorkload(c, NS, 'Deployment', 'api');
    await createWorkload(c, NS, 'Deployment', 'slow', {}, { template: template('slow', 'slow') });
  }
  // Never Ready, with a short progress deadline: the Deployment controller reports ProgressDeadlineExceeded.
  await createWorkload(
    'alpha',
    NS,
    'Deployment',
    'broken',
    {},
    { template: template('broken', 'never'), progressDeadlineSeconds: 2 },
  );
  await createWorkload('alpha', NS, 'Deployment', 'old');
}, 180_000);
afterAll(async () => {
  await bao?.stop();
  for (const c of CLUSTERS) await deleteNamespace(c, NS);
});

describe('vault-rollout status', () => {
  it("current everywhere: exit 0, with Vault's current version; then behind in one cluster: exit 1, BEHIND", async () => {
    await bao.client.kv2Write('secret', 'status/api', { password: 'one' });
    await apply('api', 1);
    const current = await status(
      ['--path', 'secret/status/api', '--vault-addr', bao.addr, '--wait', '--timeout', '60s'],
      { VAULT_TOKEN: token },
    );
    expect(current.code, current.out + current.err).toBe(0);
    expect(current.out).toContain('secret/status/api  Vault current_version 1 (written ');
    for (const c of CLUSTERS) expect(row(current.out, c, 'api')).toMatch(/\s1\s+current\s+complete\s+1\/1\s+1\/0\s*$/);
    expect(current.out).toMatch(/the old credential may be revoked/);
    expect(current.out).not.toContain(token);

    // Vault moves to version 2; only alpha is restarted for it.
    await bao.client.kv2Write('secret', 'status/api', { password: 'two' });
    await apply('api', 2, '[alpha]');
    const behind = await status(['--path', 'secret/status/api', '--vault-addr', bao.addr], { VAULT_TOKEN: token });
    expect(behind.code).toBe(1);
    expect(row(behind.out, 'beta', 'api')).toMatch(/\s1\s+BEHIND\s+complete\s+1\/1\s+1\/0\s+records 1, current is 2/);
    expect(behind.out).toMatch(/1 behind/);
    const json = JSON.parse(
      (await status(['--path', 'secret/status/api', '--vault-addr', bao.addr, '--json'], { VAULT_TOKEN: token })).out,
    );
    expect(json.ok).toBe(false);
    expect(
      json.paths[0].consumers.map((c: { cluster: string; verdict: string }) => `${c.cluster}:${c.verdict}`),
    ).toEqual([expect.stringMatching(/^alpha:(current|rolling)$/), 'beta:BEHIND']);
  });

  it('--wait returns when the last consumer completes (kwok readiness "slow": Ready 10 s after start)', async () => {
    await apply('slow', 1);
    const io = memoryIo({ 'routes.yaml': routes() });
    const code = await statusCommand(
      ['--routes', 'routes.yaml', '--path', 'secret/status/slow', '--wait', '--timeout', '90s', '--interval', '1s'],
      io,
    );
    expect(code, io.out + io.err).toBe(0);
    // Plain lines while it waited (no terminal): the slow rollouts were seen rolling, then complete.
    expect(io.err).toMatch(/secret\/status\/slow (alpha|beta) \S+\/Deployment\/slow: rolling/);
    for (const c of CLUSTERS) {
      expect(row(io.out, c, 'slow')).toMatch(/current\s+complete\s+1\/1/);
      const d = (await admin(c).request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/slow`)).body as {
        status: { updatedReplicas?: number; availableReplicas?: number; replicas?: number };
      };
      expect(d.status).toMatchObject({ updatedReplicas: 1, availableReplicas: 1, replicas: 1 });
    }
  });

  it('--wait gives up at its timeout with exit 1 while a rollout cannot finish; FAILED once the deadline is exceeded', async () => {
    await apply('broken', 1, '[alpha]');
    const waited = await status([
      '--path',
      'secret/status/broken',
      '--cluster',
      'alpha',
      '--wait',
      '--timeout',
      '5s',
      '--interval',
      '1s',
    ]);
    expect(waited.code).toBe(1);
    expect(waited.err).toMatch(/not every consumer is current and complete after \d+ s \(--timeout 5s\)/);
    // progressDeadlineSeconds: 2 — the controller marks it failed soon after.
    let failed = { code: -1, out: '', err: '' };
    for (let i = 0; i < 30 && !/FAILED/.test(failed.out); i++) {
      await new Promise((r) => setTimeout(r, 1000));
      failed = await status(['--path', 'secret/status/broken', '--cluster', 'alpha']);
    }
    expect(failed.code).toBe(1);
    expect(row(failed.out, 'alpha', 'broken')).toMatch(/\s1\s+FAILED\s+failed\s+1\/1\s+\S+\s+ProgressDeadlineExceeded/);
  });

  it("HALTED stands out when a wave's gate halted the restart the workload records (its RotationHalted Event); a tenant's look-alike is ignored", async () => {
    await apply('old', 1, '[alpha]');
    expect(
      (await status(['--path', 'secret/status/old', '--cluster', 'alpha', '--wait', '--timeout', '60s'])).code,
    ).toBe(0);
    const deployment = (await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/old`)).body as {
      spec: { template: { metadata: { annotations: Record<string, string> } } };
    };
    const token = deployment.spec.template.metadata.annotations['vault-rollout.io/restart-token'] ?? '';
    expect(token).not.toBe('');
    const message = 'vault-rollout halted the rotation of secret/status/old@1 at wave 1 of 2: alpha rollout failed';
    // Anyone who may create Events writes one with the name and reason status looks for (kubectl create).
    const now = new Date().toISOString();
    const forged = await admin('alpha').request('POST', `/api/v1/namespaces/${NS}/events`, {
      body: {
        metadata: { name: haltEventName('old', token), namespace: NS },
        involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'old', namespace: NS },
        reason: 'RotationHalted',
        message: `forged: ${message}`,
        type: 'Warning',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
        source: { component: 'vault-rollout' },
      },
    });
    expect(forged.status).toBe(201);
    const notHalted = await status(['--path', 'secret/status/old', '--cluster', 'alpha']);
    expect(notHalted.code, notHalted.out).toBe(0);
    expect(row(notHalted.out, 'alpha', 'old')).toMatch(/\s1\s+current\s+complete\s/);
    expect(
      (await admin('alpha').request('DELETE', `/api/v1/namespaces/${NS}/events/${haltEventName('old', token)}`)).status,
    ).toBe(200);

    // The Event the gate writes: recordHalt itself, as the vault-rollout identity (test/integration/waves.test.ts shows the gate calling it).
    const table = loadRoutingTable(routes('[alpha]'));
    const target = planRollouts(table, [
      {
        namespace: '',
        mount: 'secret',
        key: 'status/old',
        path: 'secret/status/old',
        operation: 'write',
        version: 1,
        kvVersion: 2,
        kvVersionFrom: 'routes',
        source: 'audit',
        via: 'direct',
        id: 'halt',
        time: now,
        record: 'halt',
      },
    ]).targets.find((t) => t.cluster === 'alpha');
    if (!target) throw new Error('no alpha target');
    await recordHalt(table, { ...target, restartToken: token }, 'old', { access: fileAccess }, message);
    const stored = (
      await admin('alpha').request('GET', `/api/v1/namespaces/${NS}/events/${haltEventName('old', token)}`)
    ).body as { metadata: { managedFields?: Array<{ manager: string }> } };
    expect(stored.metadata.managedFields?.map((f) => f.manager)).toContain('vault-rollout');
    const halted = await status(['--path', 'secret/status/old', '--cluster', 'alpha']);
    expect(halted.code).toBe(1);
    expect(row(halted.out, 'alpha', 'old')).toMatch(
      /\s1\s+HALTED\s+\S+\s+\S+\s+\S+\s+halted: vault-rollout halted the rotation of secret\/status\/old@1 at wave 1 of 2/,
    );
  });

  it('a ".." record key makes no request outside secret/metadata/ (OpenBao\'s audit log)', async () => {
    await bao.client.kv2Write('secret', 'status/wide/ok', { password: 'one' });
    // What anyone who may edit the Deployment (or create an Event) can write: keys that a route's `**` matches.
    const keys = (extra: string) =>
      JSON.stringify({
        'secret/status/wide/ok': 1,
        'secret/status/wide/../../../data/status/api': 1,
        [`secret/status/wide/../../../../sys/${extra}`]: 1,
      });
    const versions = 'vault-rollout.io/versions';
    await createWorkload(
      'alpha',
      NS,
      'Deployment',
      'wide',
      { annotations: { [versions]: keys('policy') } },
      {
        template: {
          metadata: { labels: { app: 'wide' }, annotations: { [versions]: keys('mounts') } },
          spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
        },
      },
    );
    const now = new Date().toISOString();
    expect(
      (
        await admin('alpha').request('POST', `/api/v1/namespaces/${NS}/events`, {
          body: {
            metadata: { name: 'wide.tenant', namespace: NS, annotations: { [versions]: keys('auth') } },
            involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'wide', namespace: NS },
            reason: 'Note',
            message: 'x',
            type: 'Normal',
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        })
      ).status,
    ).toBe(201);

    const before = readAuditFile(AUDIT).length;
    const run = await status(['--cluster', 'alpha', '--vault-addr', bao.addr, '--json'], { VAULT_TOKEN: token });
    // Every request status sent, as OpenBao audited it: metadata reads of the mount, and the token source's own
    // lookup of its token (lib/vault/vault-auth.ts), nothing else.
    const requests = readAuditFile(AUDIT)
      .slice(before)
      .filter((e) => e.type === 'request')
      .map((e) => (e.request as { path: string }).path);
    expect(requests).toContain('secret/metadata/status/wide/ok');
    expect(requests.filter((p) => !p.startsWith('secret/metadata/') && p !== 'auth/token/lookup-self')).toEqual([]);

    const json = JSON.parse(run.out) as { paths: Array<{ path: string }>; notes: string[] };
    expect(json.paths.map((p) => p.path)).toContain('secret/status/wide/ok');
    expect(json.paths.map((p) => p.path).filter((p) => p.includes('..'))).toEqual([]);
    expect(json.notes.join('\n')).toMatch(
      /ignored 3 recorded key\(s\) that are no Vault path, e\.g\. .*it has a "\.\." segment/,
    );
  });

  it('a workload reconcile recorded without a restart is current, and status exits 0', async () => {
    await bao.client.kv2Write('secret', 'status/settled', { password: 'one' });
    // Pod start times have whole seconds: the pods start in a later second than the version was written.
    await new Promise((r) => setTimeout(r, 1100));
    await createWorkload('alpha', NS, 'Deployment', 'settled');
    await waitFor(
      async () => {
        const pods = (
          (await admin('alpha').request('GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dsettled`)).body as {
            items: Array<{ status?: { startTime?: string } }>;
          }
        ).items;
        return pods.some((p) => p.status?.startTime !== undefined) || undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'a running pod of settled' },
    );
    const args = ['--path', 'secret/status/settled', '--cluster', 'alpha', '--vault-addr', bao.addr];
    const never = await status(args, { VAULT_TOKEN: token });
    expect(never.code).toBe(1);
    expect(row(never.out, 'alpha', 'settled')).toMatch(/BEHIND.*never restarted for this path/);

    // Reconcile finds its pods started after version 1 was written: it records it without a restart.
    const only = `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(clusters.find((c) => c.name === 'alpha')?.vaultRolloutKubeconfig)} } }
vault: { mounts: { secret: 2 } }
routes:
  - name: settled
    match: { path: "secret/status/settled" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Deployment, name: settled }]
`;
    const io = memoryIo({ 'reconcile.yaml': only }, { VAULT_TOKEN: token });
    expect(await main(['reconcile', '--routes', 'reconcile.yaml', '--vault-addr', bao.addr], io), io.out + io.err).toBe(
      0,
    );
    expect(io.out).toMatch(
      /Workloads \(1\): 0 current, 1 running the current version \(recorded without a restart\), 0 behind, 0 failed/,
    );

    const recorded = await status([...args, '--wait', '--timeout', '60s'], { VAULT_TOKEN: token });
    expect(recorded.code, recorded.out).toBe(0);
    expect(row(recorded.out, 'alpha', 'settled')).toMatch(/\s1\s+current\s+complete\s+1\/1\s+1\/0\s*$/);
    expect(recorded.out).toMatch(/the old credential may be revoked/);
  });

  it("POISONED: a recorded version above Vault's current one points at reset-version", async () => {
    await bao.client.kv2Write('secret', 'status/api2', { password: 'one' });
    const io = memoryIo({ 'routes.yaml': routes('[alpha]'), '-': write('api2', 999) });
    await createWorkload('alpha', NS, 'Deployment', 'api2');
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io)).toBe(0);
    const poisoned = await status(['--path', 'secret/status/api2', '--cluster', 'alpha', '--vault-addr', bao.addr], {
      VAULT_TOKEN: token,
    });
    expect(poisoned.code).toBe(1);
    expect(row(poisoned.out, 'alpha', 'api2')).toMatch(/999\s+POISONED/);
    expect(poisoned.out).toContain('vault-rollout reset-version --path secret/status/api2 --version 1');
  });

  it("KV v1: says that status cannot see Vault's versions", async () => {
    await apply('old', 1, '[alpha]', 'legacy');
    const v1 = await status(['--path', 'legacy/status/old', '--cluster', 'alpha']);
    expect(v1.out).toContain('[KV v1]');
    expect(v1.out).toContain('KV v1 keeps no versions: status (and reconcile) cannot see what Vault holds');
  });

  it('exit 64 on a bad option or an unknown cluster', async () => {
    expect((await status(['--timeout', 'soon'])).code).toBe(64);
    expect((await status(['--cluster', 'nowhere'])).code).toBe(64);
  });
});
