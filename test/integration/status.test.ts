// `vault-rollout status` on the real test clusters and a real OpenBao: current, behind, failed, halted and poisoned
// consumers, the exit codes, and `--wait` returning when the last (slow) consumer completes. Never skipped.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { statusCommand } from '../../lib/cli/status-command.ts';
import { haltEventName } from '../../lib/kube/restart-record.ts';
import { memoryIo } from '../helpers.ts';
import { REPO_ROOT, startDevServer, type DevServer } from '../vault/server.ts';
import { admin, clusters, createNamespace, createWorkload, deleteNamespace, uniqueName } from './support.ts';

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
`;
const write = (app: string, version: number, mount = 'secret') =>
  JSON.stringify({ time: new Date().toISOString(), type: 'response', request: { id: `st-${app}-${version}`, operation: 'update', mount_type: 'kv', mount_point: `${mount}/`, path: mount === 'secret' ? `${mount}/data/status/${app}` : `${mount}/status/${app}` }, response: mount === 'secret' ? { data: { version } } : {} });

async function apply(app: string, version: number, targets?: string, mount?: string): Promise<void> {
  const io = memoryIo({ 'routes.yaml': routes(targets), '-': write(app, version, mount) });
  expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io), io.out + io.err).toBe(0);
}

async function status(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  const io = memoryIo({ 'routes.yaml': routes() }, env);
  const code = await statusCommand(['--routes', 'routes.yaml', ...args], io);
  return { code, out: io.out, err: io.err };
}

const row = (out: string, cluster: string, app: string): string => out.split('\n').find((l) => new RegExp(`^\\s+${cluster}\\s+${NS}/Deployment/${app}\\s`).test(l)) ?? `(no row for ${cluster} ${app} in:\n${out})`;

let bao: DevServer;
let token: string;

const template = (app: string, readiness?: string) => ({ metadata: { labels: { app }, ...(readiness ? { annotations: { 'vault-rollout.test/readiness': readiness } } : {}) }, spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } });

beforeAll(async () => {
  bao = await startDevServer({ kind: 'openbao' });
  await bao.client.writePolicy('vault-rollout-reconcile', readFileSync(join(REPO_ROOT, 'infra/vault/reconcile-policy.hcl'), 'utf8'));
  ({ token } = await bao.client.createToken({ policies: ['vault-rollout-reconcile'] }));
  for (const c of CLUSTERS) {
    await createNamespace(c, NS);
    await createWorkload(c, NS, 'Deployment', 'api');
    await createWorkload(c, NS, 'Deployment', 'slow', {}, { template: template('slow', 'slow') });
  }
  // Never Ready, with a short progress deadline: the Deployment controller reports ProgressDeadlineExceeded.
  await createWorkload('alpha', NS, 'Deployment', 'broken', {}, { template: template('broken', 'never'), progressDeadlineSeconds: 2 });
  await createWorkload('alpha', NS, 'Deployment', 'old');
}, 180_000);
afterAll(async () => {
  await bao?.stop();
  for (const c of CLUSTERS) await deleteNamespace(c, NS);
});

describe('vault-rollout status', () => {
  it('current everywhere: exit 0, with Vault\'s current version; then behind in one cluster: exit 1, BEHIND', async () => {
    await bao.client.kv2Write('secret', 'status/api', { password: 'one' });
    await apply('api', 1);
    const current = await status(['--path', 'secret/status/api', '--vault-addr', bao.addr, '--wait', '--timeout', '60s'], { VAULT_TOKEN: token });
    expect(current.code, current.out + current.err).toBe(0);
    expect(current.out).toContain('secret/status/api  Vault current_version 1 (written ');
    for (const c of CLUSTERS) expect(row(current.out, c, 'api')).toMatch(/\s1\s+current\s+complete\s+1\/1\s*$/);
    expect(current.out).toMatch(/the old credential may be revoked/);
    expect(current.out).not.toContain(token);

    // Vault moves to version 2; only alpha is restarted for it.
    await bao.client.kv2Write('secret', 'status/api', { password: 'two' });
    await apply('api', 2, '[alpha]');
    const behind = await status(['--path', 'secret/status/api', '--vault-addr', bao.addr], { VAULT_TOKEN: token });
    expect(behind.code).toBe(1);
    expect(row(behind.out, 'beta', 'api')).toMatch(/\s1\s+BEHIND\s+complete\s+1\/1\s+records 1, current is 2/);
    expect(behind.out).toMatch(/1 behind/);
    const json = JSON.parse((await status(['--path', 'secret/status/api', '--vault-addr', bao.addr, '--json'], { VAULT_TOKEN: token })).out);
    expect(json.ok).toBe(false);
    expect(json.paths[0].consumers.map((c: { cluster: string; verdict: string }) => `${c.cluster}:${c.verdict}`)).toEqual([expect.stringMatching(/^alpha:(current|rolling)$/), 'beta:BEHIND']);
  });

  it('--wait returns when the last consumer completes (kwok readiness "slow": Ready 10 s after start)', async () => {
    await apply('slow', 1);
    const io = memoryIo({ 'routes.yaml': routes() });
    const code = await statusCommand(['--routes', 'routes.yaml', '--path', 'secret/status/slow', '--wait', '--timeout', '90s', '--interval', '1s'], io);
    expect(code, io.out + io.err).toBe(0);
    // Plain lines while it waited (no terminal): the slow rollouts were seen rolling, then complete.
    expect(io.err).toMatch(/secret\/status\/slow (alpha|beta) \S+\/Deployment\/slow: rolling/);
    for (const c of CLUSTERS) {
      expect(row(io.out, c, 'slow')).toMatch(/current\s+complete\s+1\/1/);
      const d = (await admin(c).request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/slow`)).body as { status: { updatedReplicas?: number; availableReplicas?: number; replicas?: number } };
      expect(d.status).toMatchObject({ updatedReplicas: 1, availableReplicas: 1, replicas: 1 });
    }
  });

  it('--wait gives up at its timeout with exit 1 while a rollout cannot finish; FAILED once the deadline is exceeded', async () => {
    await apply('broken', 1, '[alpha]');
    const waited = await status(['--path', 'secret/status/broken', '--cluster', 'alpha', '--wait', '--timeout', '5s', '--interval', '1s']);
    expect(waited.code).toBe(1);
    expect(waited.err).toMatch(/not every consumer is current and complete after \d+ s \(--timeout 5s\)/);
    // progressDeadlineSeconds: 2 — the controller marks it failed soon after.
    let failed = { code: -1, out: '', err: '' };
    for (let i = 0; i < 30 && !/FAILED/.test(failed.out); i++) {
      await new Promise((r) => setTimeout(r, 1000));
      failed = await status(['--path', 'secret/status/broken', '--cluster', 'alpha']);
    }
    expect(failed.code).toBe(1);
    expect(row(failed.out, 'alpha', 'broken')).toMatch(/\s1\s+FAILED\s+failed\s+1\/1\s+ProgressDeadlineExceeded/);
  });

  it('HALTED stands out when a wave\'s gate halted the restart the workload records (its RotationHalted Event)', async () => {
    await apply('old', 1, '[alpha]');
    expect((await status(['--path', 'secret/status/old', '--cluster', 'alpha', '--wait', '--timeout', '60s'])).code).toBe(0);
    // The Event exactly as the gate writes it (recordHalt; test/integration/waves.test.ts shows the gate writing it).
    const deployment = (await admin('alpha').request('GET', `/apis/apps/v1/namespaces/${NS}/deployments/old`)).body as { spec: { template: { metadata: { annotations: Record<string, string> } } } };
    const token = deployment.spec.template.metadata.annotations['vault-rollout.io/restart-token'] ?? '';
    expect(token).not.toBe('');
    const now = new Date().toISOString();
    const res = await admin('alpha').request('POST', `/api/v1/namespaces/${NS}/events`, {
      body: { metadata: { name: haltEventName('old', token), namespace: NS }, involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'old', namespace: NS }, reason: 'RotationHalted', message: 'vault-rollout halted the rotation of secret/status/old@1 at wave 1 of 2: alpha rollout failed', type: 'Warning', firstTimestamp: now, lastTimestamp: now, count: 1, source: { component: 'vault-rollout' } },
    });
    expect(res.status).toBe(201);
    const halted = await status(['--path', 'secret/status/old', '--cluster', 'alpha']);
    expect(halted.code).toBe(1);
    expect(row(halted.out, 'alpha', 'old')).toMatch(/\s1\s+HALTED\s+\S+\s+\S+\s+halted: vault-rollout halted the rotation of secret\/status\/old@1 at wave 1 of 2/);
  });

  it('POISONED: a recorded version above Vault\'s current one points at reset-version', async () => {
    await bao.client.kv2Write('secret', 'status/api2', { password: 'one' });
    const io = memoryIo({ 'routes.yaml': routes('[alpha]'), '-': write('api2', 999) });
    await createWorkload('alpha', NS, 'Deployment', 'api2');
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io)).toBe(0);
    const poisoned = await status(['--path', 'secret/status/api2', '--cluster', 'alpha', '--vault-addr', bao.addr], { VAULT_TOKEN: token });
    expect(poisoned.code).toBe(1);
    expect(row(poisoned.out, 'alpha', 'api2')).toMatch(/999\s+POISONED/);
    expect(poisoned.out).toContain('vault-rollout reset-version --path secret/status/api2 --version 1');
  });

  it('KV v1: says that status cannot see Vault\'s versions', async () => {
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
