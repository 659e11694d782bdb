/**
 * kubectl habits on the real test clusters: the Helm chart's routing table (`inCluster: true`) used from this
 * machine with `--cluster-kubeconfig NAME=PATH[#CONTEXT]` (doctor, apply, status), and an exec credential plugin that
 * hands out a client certificate (as `tsh kube credentials` does) used for the TLS handshake, as kubectl uses it.
 * The clusters authenticate client certificates signed by their CA (test/clusters/pki.ts); the plugin is a shell
 * script written here that prints the `vault-rollout` user's certificate and key as an ExecCredential.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { memoryIo } from '../helpers.ts';
import {
  closedPort,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-cluster-kc');
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-cluster-kubeconfig-test-'));
/** The table the Helm chart mounts: every cluster reached from inside its pod, which this machine is not. */
const helmTable = `clusters:
  alpha: { inCluster: true, labels: { env: prod } }
  beta: { inCluster: true, labels: { env: prod } }
vault: { mounts: { secret: 2 } }
routes:
  - name: api
    match: { path: "secret/habits/{app}" }
    targets: [{ clusters: { env: prod }, namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`;
const write = (version: number) =>
  JSON.stringify({
    time: '2026-11-28T12:00:00Z',
    type: 'response',
    request: {
      id: `habits-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: 'secret/data/habits/api',
    },
    response: { data: { version } },
  });
const recorded = async (name: string) =>
  (await getWorkload(name, NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
    'vault-rollout.io/versions'
  ];

/**
 * beta's kubeconfig as a laptop has it: its current-context points at a server that is not there, and the context
 * named `beta-admin-laptop` is the working one, so only #CONTEXT reaches the cluster.
 */
async function laptopKubeconfig(): Promise<string> {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster('beta').vaultRolloutKubeconfig);
  const current = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (current === null || user === null) throw new Error('beta kubeconfig has no current cluster or user');
  kc.loadFromOptions({
    clusters: [current, { ...current, name: 'elsewhere', server: `https://127.0.0.1:${await closedPort()}` }],
    users: [user],
    contexts: [
      { name: 'beta-admin-laptop', cluster: current.name, user: user.name },
      { name: 'elsewhere', cluster: 'elsewhere', user: user.name },
    ],
    currentContext: 'elsewhere',
  });
  const file = join(dir, 'laptop.kubeconfig');
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** alpha through an exec plugin that prints the vault-rollout user's client certificate and key, expiring in an hour. */
function execCertificateKubeconfig(): string {
  const alpha = cluster('alpha');
  const credential = {
    apiVersion: 'client.authentication.k8s.io/v1',
    kind: 'ExecCredential',
    status: {
      clientCertificateData: readFileSync(alpha.vaultRollout.certFile, 'utf8'),
      clientKeyData: readFileSync(alpha.vaultRollout.keyFile, 'utf8'),
      expirationTimestamp: new Date(Date.now() + 3_600_000).toISOString(),
    },
  };
  writeFileSync(join(dir, 'credential.json'), JSON.stringify(credential), { mode: 0o600 });
  const plugin = join(dir, 'tsh-like-plugin');
  writeFileSync(plugin, `#!/bin/sh\necho run >> "${dir}/plugin-runs"\ncat "${dir}/credential.json"\n`);
  chmodSync(plugin, 0o700);
  const kc = new KubeConfig();
  kc.loadFromFile(alpha.vaultRolloutKubeconfig);
  const current = kc.getCurrentCluster();
  if (current === null) throw new Error('alpha kubeconfig has no current cluster');
  const file = join(dir, 'exec.kubeconfig');
  // Written as YAML by hand: the exec block as kubectl's users write it, the plugin relative to the kubeconfig.
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '  - name: alpha',
      '    cluster:',
      `      server: ${current.server}`,
      `      certificate-authority-data: ${current.caData ?? ''}`,
      'users:',
      '  - name: tsh',
      '    user:',
      '      exec:',
      '        apiVersion: client.authentication.k8s.io/v1',
      '        command: ./tsh-like-plugin',
      '        interactiveMode: Never',
      'contexts:',
      '  - name: alpha',
      '    context: { cluster: alpha, user: tsh }',
      'current-context: alpha',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return file;
}

let laptop = '';
let execKubeconfig = '';
beforeAll(async () => {
  for (const c of ['alpha', 'beta']) {
    await createNamespace(c, NS);
    await createWorkload(c, NS, 'Deployment', 'api');
  }
  laptop = await laptopKubeconfig();
  execKubeconfig = execCertificateKubeconfig();
});
afterAll(async () => {
  for (const c of ['alpha', 'beta']) await deleteNamespace(c, NS);
  rmSync(dir, { recursive: true, force: true });
});

describe("--cluster-kubeconfig on the Helm chart's table", () => {
  it('without it, the inCluster clusters cannot be reached from this machine', async () => {
    const io = memoryIo({ 'routes.yaml': helmTable, '-': write(1) });
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io)).toBe(3);
    expect(io.out).toMatch(/alpha\s+\S+\s+Deployment\s+api\s+failed/);
  });

  it('doctor, apply and status reach each cluster through the file given, beta through the #CONTEXT named', async () => {
    const flags = [
      '--cluster-kubeconfig',
      `alpha=${cluster('alpha').vaultRolloutKubeconfig}`,
      '--cluster-kubeconfig',
      `beta=${laptop}#beta-admin-laptop`,
    ];
    let io = memoryIo({ 'routes.yaml': helmTable });
    expect(await main(['doctor', '--routes', 'routes.yaml', ...flags, '--json'], io), `${io.out}\n${io.err}`).toBe(0);
    const checks = JSON.parse(io.out).checks as Array<{ cluster: string; check: string; detail: string }>;
    expect(checks.filter((c) => c.check === 'credentials').map((c) => `${c.cluster}: ${c.detail}`)).toEqual([
      `alpha: ${cluster('alpha').server}`,
      `beta: ${cluster('beta').server}`,
    ]);

    io = memoryIo({ 'routes.yaml': helmTable, '-': write(2) });
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait', ...flags], io), `${io.out}\n${io.err}`).toBe(0);
    expect(io.out).toMatch(/alpha\s+\S+\s+Deployment\s+api\s+restarted/);
    expect(io.out).toMatch(/beta\s+\S+\s+Deployment\s+api\s+restarted/);
    expect(await recorded('beta')).toBe('{"secret/habits/api":2}');

    io = memoryIo({ 'routes.yaml': helmTable });
    await main(['status', '--routes', 'routes.yaml', ...flags, '--json'], io);
    expect(io.err).not.toMatch(/cluster (alpha|beta): /);
    expect(io.out).toMatch(/"recorded": ?2/);
  });

  it("without #CONTEXT the file's current-context is used, as kubectl does (here the server that is not there)", async () => {
    const io = memoryIo({ 'routes.yaml': helmTable, '-': write(3) });
    expect(
      await main(['apply', '--routes', 'routes.yaml', '--no-wait', '--cluster-kubeconfig', `beta=${laptop}`], io),
    ).toBe(3);
    expect(io.out).toMatch(/beta\s+\S+\s+Deployment\s+api\s+failed\s+unreachable: cannot connect \(ECONNREFUSED\)/);
  });
});

describe('an exec plugin that hands out a client certificate', () => {
  it('is used for the TLS handshake, as kubectl does: apply restarts through it, the plugin run once', async () => {
    const io = memoryIo({
      'routes.yaml': helmTable.replace(/targets: \[\{ clusters: \{ env: prod \}/, 'targets: [{ clusters: [alpha]'),
      '-': write(4),
    });
    expect(
      await main(
        ['apply', '--routes', 'routes.yaml', '--no-wait', '--cluster-kubeconfig', `alpha=${execKubeconfig}`],
        io,
      ),
      `${io.out}\n${io.err}`,
    ).toBe(0);
    expect(io.out).toMatch(/alpha\s+\S+\s+Deployment\s+api\s+restarted/);
    expect(await recorded('alpha')).toBe('{"secret/habits/api":4}');
    expect(readFileSync(join(dir, 'plugin-runs'), 'utf8').trim().split('\n')).toHaveLength(1);
  });
});
