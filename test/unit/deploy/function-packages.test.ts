/**
 * What each Lambda function's package holds besides its bundle (infra/serverless/iam.js, wired in serverless.yml):
 * kubeconfigs — a `file` one packaged beside the table, an `inline` one inside it — only in the functions that reach
 * clusters (worker, reconcile), never in the intake (http, internet-facing; logs). test/integration/package.test.ts
 * checks the zips osls writes.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
// @ts-expect-error: a plain ES module without types (osls's variable resolver)
import * as packaging from '../../../infra/serverless/iam.js';
import { loadCompiledRoutingTable } from '../../../lib/routing/compiled-table.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { readRepoFile } from '../../helpers.ts';

const ROUTES = 'test/fixtures/package-kubeconfigs/routes.yaml';
const KUBECONFIG_FILE = 'test/fixtures/package-kubeconfigs/by-file.kubeconfig';
const context = { resolveVariable: async (name: string) => (name === 'param:routes' ? ROUTES : undefined) };
type Resolved<T> = (c: typeof context) => Promise<T>;
const { packagePatterns, clusterPackagePatterns, intakeRoutes, compiledRoutes } = packaging as Record<
  'packagePatterns' | 'clusterPackagePatterns',
  Resolved<string[]>
> &
  Record<'intakeRoutes' | 'compiledRoutes', Resolved<string>>;

const MARKERS = ['INLINE-KUBECONFIG-MARKER', 'FILE-KUBECONFIG-MARKER', 'by-file.kubeconfig', '"inline"'];

describe('kubeconfigs are packaged only where a function reaches clusters', () => {
  it('every function (package.patterns) gets the table without kubeconfigs, and no kubeconfig file', async () => {
    const files = await packagePatterns(context);
    expect(files).not.toContain(KUBECONFIG_FILE);
    for (const file of files) {
      const text = readRepoFile(file);
      for (const marker of MARKERS) expect(text, `${file} holds ${marker}`).not.toContain(marker);
    }
  });

  it('the intake table (VAULT_ROLLOUT_ROUTES of http and logs) plans as the full one does', async () => {
    const intake = loadCompiledRoutingTable(readRepoFile(await intakeRoutes(context)), 'intake.json');
    const full = loadCompiledRoutingTable(readRepoFile(await compiledRoutes(context)), 'full.json');
    expect([...intake.clusters.keys()]).toEqual(['by-file', 'by-inline', 'by-ssm']);
    expect(intake.clusters.get('by-inline')).toEqual({ labels: { env: 'it' } });
    expect(intake.clusters.get('by-ssm')).toEqual(full.clusters.get('by-ssm'));
    const change = {
      namespace: '',
      mount: 'secret',
      key: 'app/db',
      path: 'secret/app/db',
      operation: 'write',
      version: 2,
      kvVersion: 2,
      kvVersionFrom: 'routes',
      source: 'audit',
      via: 'direct',
      id: 'r',
      time: '2026-11-20T10:00:00Z',
      record: 'line 1',
    } as const;
    expect(planRollouts(intake, [change])).toEqual(planRollouts(full, [change]));
  });

  it('the worker and reconcile add the full table and the kubeconfig files it names', async () => {
    const files = await clusterPackagePatterns(context);
    expect(files).toEqual([await compiledRoutes(context), KUBECONFIG_FILE]);
    expect(readRepoFile(await compiledRoutes(context))).toContain('INLINE-KUBECONFIG-MARKER');
  });

  it("reconcile's environment names the full table", async () => {
    const withVault = {
      resolveVariable: async (name: string) =>
        name === 'param:routes' ? ROUTES : name === 'param:vaultAuth' ? 'aws' : '',
    };
    const { reconcileEnvironment } = packaging as {
      reconcileEnvironment: (c: typeof withVault) => Promise<Record<string, string>>;
    };
    expect((await reconcileEnvironment(withVault)).VAULT_ROLLOUT_ROUTES).toBe(await compiledRoutes(context));
  });

  it('serverless.yml gives the full table and the kubeconfig files to the worker and reconcile alone', () => {
    const yml = parse(readFileSync(new URL('../../../serverless.yml', import.meta.url), 'utf8'), {
      logLevel: 'silent',
    }) as {
      provider: { environment: Record<string, string> };
      package: { patterns: string };
      functions: Record<string, { package?: { patterns?: string }; environment?: Record<string, string> | string }>;
    };
    expect(yml.provider.environment.VAULT_ROLLOUT_ROUTES).toBe('${file(./infra/serverless/iam.js):intakeRoutes}');
    expect(yml.package.patterns).toBe('${file(./infra/serverless/iam.js):packagePatterns}');
    const fullTable = Object.entries(yml.functions)
      .filter(([, fn]) => fn.package?.patterns === '${file(./infra/serverless/iam.js):clusterPackagePatterns}')
      .map(([name]) => name);
    expect(fullTable.sort()).toEqual(['reconcile', 'worker']);
    expect(yml.functions.worker?.environment).toMatchObject({
      VAULT_ROLLOUT_ROUTES: '${file(./infra/serverless/iam.js):compiledRoutes}',
    });
    // Reconcile's environment is derived whole (reconcileEnvironment), with the full table in it.
    expect(yml.functions.reconcile?.environment).toBe('${file(./infra/serverless/iam.js):reconcileEnvironment}');
    for (const fn of ['http', 'logs'])
      expect(JSON.stringify(yml.functions[fn])).not.toMatch(/compiledRoutes|clusterPackagePatterns/);
  });
});
