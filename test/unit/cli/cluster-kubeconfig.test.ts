/**
 * kubectl habits: --cluster-kubeconfig NAME=PATH[#CONTEXT] in place of a cluster's credentials from the table,
 * VAULT_ROLLOUT_ROUTES wherever --routes is taken, and validate's warnings on kubeconfig sources written the way
 * kubectl users write them but that fail when used. The override reaching a real cluster (and an exec plugin's
 * client certificate) is tested on the test clusters: test/integration/cluster-kubeconfig.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import {
  allowOverriddenCredentials,
  ClusterKubeconfigError,
  parseClusterKubeconfig,
  withClusterKubeconfigs,
} from '../../../lib/cli/cluster-kubeconfig.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { memoryIo, readRepoFile } from '../../helpers.ts';

const example = readRepoFile('infra/routes/example.yaml');
const demo = readRepoFile('test/fixtures/demo/rotation.ndjson');
const helmTable = example.replace(/kubeconfig: \{ file: [^}]+\}/g, 'inCluster: true');

describe('--cluster-kubeconfig NAME=PATH[#CONTEXT]', () => {
  const env = { HOME: '/home/ops' };

  it('parses a path (relative to the working directory, ~/ as the home directory) and an optional context', () => {
    expect(parseClusterKubeconfig('alpha=/etc/kube/alpha.yaml', env)).toEqual({
      cluster: 'alpha',
      file: '/etc/kube/alpha.yaml',
    });
    expect(parseClusterKubeconfig('alpha=kc/alpha.yaml#admin@alpha', env, '/work')).toEqual({
      cluster: 'alpha',
      file: '/work/kc/alpha.yaml',
      context: 'admin@alpha',
    });
    expect(parseClusterKubeconfig('beta=~/.kube/config#beta', env)).toEqual({
      cluster: 'beta',
      file: '/home/ops/.kube/config',
      context: 'beta',
    });
  });

  it.each([
    ['alpha', /give NAME=PATH or NAME=PATH#CONTEXT/],
    ['=/x', /give NAME=PATH or NAME=PATH#CONTEXT/],
    ['Alpha=/x', /"Alpha" is not a cluster name/],
    ['alpha=', /the kubeconfig path is empty/],
    ['alpha=/x#', /the context after # is empty/],
    ['alpha=~bob/kc', /only ~\/ \(your own home\) is expanded/],
  ])('refuses %s', (value, message) => {
    expect(() => parseClusterKubeconfig(value, env)).toThrow(message);
  });

  it('replaces how the cluster is reached (inCluster, eks, kubeconfig, context, insecureSkipTLSVerify) and keeps the rest of its entry', () => {
    const table = loadRoutingTable(
      helmTable.replace('labels: { env: prod, region: eu }', 'labels: { env: prod, region: eu }\n    concurrency: 3'),
      'routes.yaml',
    );
    const overridden = withClusterKubeconfigs(table, [
      { cluster: 'alpha', file: '/home/ops/alpha.yaml', context: 'admin' },
    ]);
    expect(overridden.clusters.get('alpha')).toEqual({
      kubeconfig: { file: '/home/ops/alpha.yaml' },
      context: 'admin',
      labels: { env: 'prod', region: 'eu' },
      concurrency: 3,
    });
    expect(overridden.clusters.get('beta')).toEqual(table.clusters.get('beta'));
    expect(overridden.routes).toBe(table.routes);
    expect(overridden.hash).toBe(table.hash);
  });

  it('refuses a cluster the table does not have, naming the ones it has, and a cluster given twice', () => {
    const table = loadRoutingTable(helmTable, 'routes.yaml');
    expect(() => withClusterKubeconfigs(table, [{ cluster: 'delta', file: '/x' }])).toThrow(
      new ClusterKubeconfigError(
        '--cluster-kubeconfig delta: no cluster of that name in routes.yaml (its clusters: alpha, beta, gamma)',
      ),
    );
    expect(() =>
      withClusterKubeconfigs(table, [
        { cluster: 'alpha', file: '/x' },
        { cluster: 'alpha', file: '/y' },
      ]),
    ).toThrow(/given twice/);
  });

  it.each([
    ['doctor', []],
    ['status', []],
    ['apply', ['--dry-run', '--no-wait']],
    ['plan', []],
    ['reset-version', ['--path', 'secret/payments/api/db', '--version', '3']],
    ['reconcile', ['--dry-run', '--vault-addr', 'http://127.0.0.1:1']],
    ['halts', ['clear', 'c0ffee0123456789']],
  ])('%s refuses an unknown cluster name with usage exit 64, before reaching any cluster', async (command, extra) => {
    const io = memoryIo({ 'routes.yaml': helmTable, '-': demo });
    expect(
      await main([command, '--routes', 'routes.yaml', '--cluster-kubeconfig', 'delta=/tmp/kc.yaml', ...extra], io),
    ).toBe(64);
    expect(io.err).toContain(
      `vault-rollout ${command}: --cluster-kubeconfig delta: no cluster of that name in routes.yaml (its clusters: alpha, beta, gamma)`,
    );
  });

  it('doctor reaches an overridden inCluster cluster through the file given (here one that does not exist: the error names it)', async () => {
    const io = memoryIo({ 'routes.yaml': helmTable });
    const missing = '/nonexistent-vault-rollout-test/alpha.kubeconfig';
    expect(
      await main(['doctor', '--routes', 'routes.yaml', '--cluster-kubeconfig', `alpha=${missing}`, '-o', 'json'], io),
    ).toBe(1);
    expect(`${io.out}${io.err}`).toContain(`kubeconfig file ${missing}: cannot read ${missing} (ENOENT)`);
  });
});

describe('VAULT_ROLLOUT_ROUTES', () => {
  it('is the routing table of plan (and every command taking --routes) when --routes is absent', async () => {
    const io = memoryIo({ 'from-env.yaml': example, '-': demo }, { VAULT_ROLLOUT_ROUTES: 'from-env.yaml' });
    expect(await main(['plan'], io)).toBe(0);
    expect(io.out).toContain('Targets: 11');
  });

  it('notify has no example table by default: without --routes or VAULT_ROLLOUT_ROUTES it is a usage error', async () => {
    const io = memoryIo();
    expect(await main(['notify', 'test'], io)).toBe(64);
    expect(io.err).toContain('missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  });
});

describe('validate warns on kubeconfig sources that validate but fail when used', () => {
  const table = example
    .replace(
      'kubeconfig: { file: ../../.local/clusters/alpha/vault-rollout.kubeconfig }',
      'kubeconfig: { env: KUBECONFIG }',
    )
    .replace(
      'kubeconfig: { file: ../../.local/clusters/beta/vault-rollout.kubeconfig }',
      'kubeconfig: { file: ~/.kube/config }',
    );

  it('names the field with its line, says why, and what to write instead; the table is still valid (exit 0)', async () => {
    const io = memoryIo({ 'routes.yaml': table });
    expect(await main(['validate', 'routes.yaml'], io)).toBe(0);
    expect(io.err).toContain(
      'routes.yaml:6:24: clusters.alpha.kubeconfig.env: warning: KUBECONFIG holds the path of a kubeconfig file',
    );
    expect(io.err).toContain('write kubeconfig: { file: /path/to/kubeconfig }');
    expect(io.err).toContain(
      'routes.yaml:9:25: clusters.beta.kubeconfig.file: warning: ~/.kube/config: ~ is not expanded',
    );
    expect(io.err).toContain('(file: /home/you/.kube/config)');
    expect(io.err).toContain('--cluster-kubeconfig beta=~/.kube/config');
    expect(io.out).toBe('routes.yaml: ok (3 clusters, 4 routes, 5 targets, 3 KV mounts)\n');
  });

  it('says nothing of a table without them', async () => {
    const io = memoryIo({ 'routes.yaml': example });
    expect(await main(['validate', 'routes.yaml'], io)).toBe(0);
    expect(io.err).toBe('');
  });
});

describe("a kubeconfig named on the command line is the operator's choice", () => {
  it('allows its exec plugin and token file for that cluster only, beside what the environment already allows', () => {
    const env = { HOME: '/home/ops', VAULT_ROLLOUT_ALLOW_EXEC: 'gamma' };
    const widened = allowOverriddenCredentials(env, ['alpha=/k/alpha.yaml#admin']);
    expect(widened.VAULT_ROLLOUT_ALLOW_EXEC).toBe('gamma,alpha');
    expect(widened.VAULT_ROLLOUT_ALLOW_TOKEN_FILE).toBe('alpha');
    expect(allowOverriddenCredentials(env, undefined)).toBe(env);
  });
});
