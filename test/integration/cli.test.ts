/** `vault-rollout apply` and `doctor` end to end on the real test clusters, through the real credential sources. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { memoryIo } from '../helpers.ts';
import {
  alteredKubeconfig,
  closedPort,
  cluster,
  clusters,
  createNamespace,
  createWorkload,
  deleteNamespace,
  getWorkload,
  scopedKubeconfig,
  uniqueName,
} from './support.ts';
import { KUBERNETES_VERSION } from '../clusters/clusters.ts';

const NS = uniqueName('vr-cli');
const routes = (extra = '') => `clusters:
${clusters.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}
${extra}
vault: { mounts: { secret: 2 } }
routes:
  - name: api
    match: { path: "secret/cli/{app}" }
    targets: [{ clusters: [alpha, beta], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`;
const write = (version: number) =>
  JSON.stringify({
    time: '2026-11-20T12:00:00Z',
    type: 'response',
    request: {
      id: `cli-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: 'secret/data/cli/api',
    },
    response: { data: { version } },
  });

beforeAll(async () => {
  for (const c of ['alpha', 'beta']) {
    await createNamespace(c, NS);
    await createWorkload(c, NS, 'Deployment', 'api');
  }
});
afterAll(async () => {
  for (const c of ['alpha', 'beta']) await deleteNamespace(c, NS);
});

describe('vault-rollout apply', () => {
  it('--dry-run changes nothing, then apply restarts, then a replay is unchanged', async () => {
    const before = await getWorkload('alpha', NS, 'Deployment', 'api');
    let io = memoryIo({ 'routes.yaml': routes(), '-': write(1) });
    expect(await main(['apply', '--routes', 'routes.yaml', '--dry-run'], io)).toBe(0);
    expect(io.out).toContain('Results: 2 dry-run');
    const after = await getWorkload('alpha', NS, 'Deployment', 'api');
    // Status updates by the controller move resourceVersion; a spec change would move generation.
    expect(after.metadata.generation).toBe(before.metadata.generation);
    expect(after.spec.template?.metadata?.annotations).toBeUndefined();

    io = memoryIo({ 'routes.yaml': routes(), '-': write(1) });
    expect(await main(['apply', '--routes', 'routes.yaml', '--json'], io)).toBe(0);
    const doc = JSON.parse(io.out);
    expect(doc.results.map((r: { cluster: string; outcome: string }) => `${r.cluster}:${r.outcome}`)).toEqual([
      'alpha:restarted',
      'beta:restarted',
    ]);
    expect(doc.targets).toHaveLength(2);

    io = memoryIo({ 'routes.yaml': routes(), '-': write(1) });
    expect(await main(['apply', '--routes', 'routes.yaml'], io)).toBe(0);
    expect(io.out).toContain('Results: 2 unchanged');
  });

  it('exits 3 when a target fails, and names the reason', async () => {
    const stopped = alteredKubeconfig(cluster('alpha').vaultRolloutKubeconfig, {
      server: `https://127.0.0.1:${await closedPort()}`,
    });
    const table = routes(`  stopped: { kubeconfig: { file: ${JSON.stringify(stopped)} } }`).replace(
      'clusters: [alpha, beta]',
      'clusters: [alpha, stopped]',
    );
    const io = memoryIo({ 'routes.yaml': table, '-': write(2) });
    expect(await main(['apply', '--routes', 'routes.yaml'], io)).toBe(3);
    expect(io.out).toMatch(/alpha\s+\S+\s+Deployment\s+api\s+restarted/);
    expect(io.out).toMatch(/stopped\s+\S+\s+Deployment\s+api\s+failed\s+unreachable: cannot connect \(ECONNREFUSED\)/);
  });
});

describe('vault-rollout reset-version', () => {
  it('repairs a poisoned record: real rotations are skipped until it is reset, then go through', async () => {
    const forged = (version: number, id: string) => write(version).replace(/"id":"cli-\d+"/, `"id":"${id}"`);
    let io = memoryIo({ 'routes.yaml': routes(), '-': forged(999999, 'forged') });
    expect(await main(['apply', '--routes', 'routes.yaml'], io)).toBe(0);
    io = memoryIo({ 'routes.yaml': routes(), '-': write(5) });
    expect(await main(['apply', '--routes', 'routes.yaml'], io)).toBe(0);
    expect(io.out).toContain('Results: 2 skipped');

    io = memoryIo({ 'routes.yaml': routes() });
    expect(
      await main(
        [
          'reset-version',
          '--routes',
          'routes.yaml',
          '--path',
          'secret/data/cli/api',
          '--version',
          '5',
          '--cluster',
          'alpha',
        ],
        io,
      ),
    ).toBe(0);
    expect(io.out).toMatch(/alpha\s+\S+\s+Deployment\s+api\s+restarted/);
    expect(
      (await getWorkload('alpha', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
        'vault-rollout.io/versions'
      ],
    ).toBe('{"secret/cli/api":5}');
    // Only the named cluster was reset: beta still carries the forged version.
    expect(
      (await getWorkload('beta', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
        'vault-rollout.io/versions'
      ],
    ).toBe('{"secret/cli/api":999999}');

    io = memoryIo({ 'routes.yaml': routes(), '-': write(6) });
    // The output says why when it is not 0 (a target failed: its reason; exit 3).
    expect(await main(['apply', '--routes', 'routes.yaml', '--json'], io), `${io.out}\n${io.err}`).toBe(0);
    expect(
      JSON.parse(io.out).results.map((r: { cluster: string; outcome: string }) => `${r.cluster}:${r.outcome}`),
    ).toEqual(['alpha:restarted', 'beta:skipped']);

    io = memoryIo({ 'routes.yaml': routes() });
    expect(
      await main(['reset-version', '--routes', 'routes.yaml', '--path', 'secret/other/api', '--version', '1'], io),
    ).toBe(1);
    expect(io.err).toContain('no route of routes.yaml targets secret/other/api');
    expect(
      await main(['reset-version', '--routes', 'routes.yaml', '--path', 'secret/cli/api', '--version', '0'], io),
    ).toBe(64);
  });
});

describe('vault-rollout doctor', () => {
  it('passes on the test clusters and names what to fix elsewhere', async () => {
    let io = memoryIo({ 'routes.yaml': routes() });
    expect(await main(['doctor', '--routes', 'routes.yaml', '--json'], io)).toBe(0);
    const ok = JSON.parse(io.out);
    expect(ok.ok).toBe(true);
    expect(
      ok.checks
        .filter((c: { cluster: string }) => c.cluster === 'alpha')
        .map((c: { check: string; detail: string }) => `${c.check}: ${c.detail}`),
    ).toEqual([
      `credentials: ${cluster('alpha').server}`,
      `reachable: Kubernetes ${KUBERNETES_VERSION}`,
      'identity: vault-rollout (groups: system:authenticated)',
      `get deployments in namespace ${NS}: allowed`,
      `list deployments in namespace ${NS}: allowed`,
      `watch deployments in namespace ${NS}: allowed`,
      `patch deployments in namespace ${NS}: allowed`,
      `create events in namespace ${NS}: allowed`,
      `list pods, replicasets, controllerrevisions in namespace ${NS}: allowed`,
      'admission policy: installed and enforced: this identity may change only what a restart writes (8 kinds)',
    ]);

    const elsewhere = uniqueName('vr-elsewhere');
    await createNamespace('beta', elsewhere);
    const scoped = await scopedKubeconfig('beta', uniqueName('vr-doctor'), elsewhere);
    const wrongCa = alteredKubeconfig(cluster('alpha').vaultRolloutKubeconfig, { caFile: cluster('gamma').caFile });
    const table = routes(
      `  scoped: { kubeconfig: { file: ${JSON.stringify(scoped)} } }\n  wrong-ca: { kubeconfig: { file: ${JSON.stringify(wrongCa)} } }\n  missing: { kubeconfig: { env: VAULT_ROLLOUT_TEST_UNSET } }`,
    ).replace('clusters: [alpha, beta]', 'clusters: [alpha, scoped, wrong-ca, missing]');
    io = memoryIo({ 'routes.yaml': table });
    expect(await main(['doctor', '--routes', 'routes.yaml'], io)).toBe(1);
    expect(io.out).toContain(
      `scoped: patch deployments in namespace ${NS}: denied\n    fix: grant patch on apps/deployments`,
    );
    expect(io.out).toContain(
      'wrong-ca: reachable: tls: TLS verification failed (UNABLE_TO_VERIFY_LEAF_SIGNATURE)\n    fix: the API server certificate does not verify against the CA of the kubeconfig',
    );
    expect(io.out).toMatch(/missing: credentials: .*VAULT_ROLLOUT_TEST_UNSET/);
    await deleteNamespace('beta', elsewhere);
  });
});
