/**
 * The Lambda's first deploy: packaging refuses the sample values serverless.yml and infra/routes/ ship with
 * (infra/serverless/samples.js, checked where reconcile's environment is resolved), every one named with the --param
 * that sets it, and takes them once they are set or once `--param samples=allow` says so. The real osls run:
 * test/integration/package.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
// @ts-expect-error: a plain ES module without types (osls's variable resolver)
import * as packaging from '../../../infra/serverless/iam.js';
// @ts-expect-error: a plain ES module without types (osls's variable resolver)
import * as samples from '../../../infra/serverless/samples.js';
import { readRepoFile } from '../../helpers.ts';

type Params = Record<string, string>;
const { reconcileEnvironment } = packaging as {
  reconcileEnvironment: (c: {
    resolveVariable: (name: string) => Promise<unknown>;
  }) => Promise<Record<string, unknown>>;
};
const { isExampleHost, routesSampleProblems } = samples as {
  isExampleHost: (v: string) => boolean;
  routesSampleProblems: (routes: string, text: string) => Error[];
};

const yml = parse(readRepoFile('serverless.yml'), { logLevel: 'silent' }) as { params: Record<string, Params> };
/** A stage's params as osls resolves them: default, then the stage's, then --param; ${sls:stage} filled in. */
const paramsOf = (stage: string, overrides: Params = {}): Params => {
  const merged: Params = { ...yml.params.default, ...yml.params[stage], ...overrides };
  return Object.fromEntries(Object.entries(merged).map(([k, v]) => [k, String(v).replaceAll('${sls:stage}', stage)]));
};
const context = (params: Params) => ({
  resolveVariable: async (name: string) =>
    name.startsWith('param:') ? params[name.slice('param:'.length)] : undefined,
});
const refusal = async (params: Params): Promise<string> => {
  try {
    await reconcileEnvironment(context(params));
  } catch (e) {
    return (e as Error).message;
  }
  return 'not refused';
};

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-sample-values-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
/** A stage's own table: the sample without its two marker lines, in an account of its own. */
const ownTable = (stage: string): string => {
  const file = join(work, `${stage}.yaml`);
  const unmarked = readRepoFile(`infra/routes/${stage}.yaml`)
    .split('\n')
    .filter((l) => !l.startsWith('# vault-rollout sample table') && !l.startsWith('# clusters and routes below'));
  writeFileSync(file, unmarked.join('\n').replaceAll('123456789012', '111122223333'));
  return file;
};
const REAL = {
  vaultAddr: 'https://vault.corp.internal:8200',
  vaultAwsHeaderValue: 'vault.corp.internal',
  alarmTarget: 'arn:aws:sns:eu-west-1:111122223333:ops-pager',
};

describe.each(['dev', 'staging', 'prod'])('packaging the %s stage', (stage) => {
  it('refuses the shipped values, naming each param and the --param that sets it, in one message', async () => {
    const message = await refusal(paramsOf(stage));
    expect(message).toMatch(/^the stage still has sample values:\n/);
    expect(message).toContain(
      `param vaultAddr: https://vault.${stage}.example.com:8200 is the sample address (example.com)`,
    );
    expect(message).toContain('set yours with --param "vaultAddr=https://vault.your-domain:8200"');
    expect(message).toMatch(
      /param alarmTarget: \S+ is (an SNS topic of the sample account 123456789012|the sample address \(example.com\)); set yours with --param "alarmTarget=/,
    );
    expect(message).toContain(
      `param routes: infra/routes/${stage}.yaml is the sample routing table (its line 2 says "# vault-rollout sample table"`,
    );
    expect(message.includes('param vaultAwsHeaderValue')).toBe(paramsOf(stage).vaultAuth === 'aws');
    expect(message).toContain('--param samples=allow packages the samples knowingly');
  });

  it('takes the stage once every sample is set with --param, serverless.yml unchanged', async () => {
    const env = await reconcileEnvironment(context(paramsOf(stage, { ...REAL, routes: ownTable(stage) })));
    expect(env.VAULT_ADDR).toBe(REAL.vaultAddr);
  });

  it('takes the samples knowingly with --param samples=allow', async () => {
    const env = await reconcileEnvironment(context(paramsOf(stage, { samples: 'allow' })));
    expect(env.VAULT_ADDR).toBe(`https://vault.${stage}.example.com:8200`);
  });
});

describe('sample values', () => {
  it('refuses a routing table, no longer marked, that still names the sample account, with the line', () => {
    const text =
      'clusters:\n  a:\n    # arn:aws:iam::123456789012:role/in-a-comment is fine\n    eks: { name: a, region: eu-west-1, roleArn: "arn:aws:iam::123456789012:role/r" }\n';
    expect(routesSampleProblems('mine.yaml', text).map((e) => e.message)).toEqual([
      'param routes: mine.yaml is a routing table whose line 4 names the sample account 123456789012; set yours with --param "routes=path/to/your-routes.yaml"',
    ]);
  });

  it('knows the example domains of RFC 2606 and nothing else', () => {
    for (const v of [
      'https://vault.dev.example.com:8200',
      'vault.example.org',
      'ops@example.net',
      'https://vault.corp.example',
    ])
      expect(isExampleHost(v), v).toBe(true);
    for (const v of ['https://vault.corp.internal:8200', 'https://example.company.com', 'ops@notexample.com'])
      expect(isExampleHost(v), v).toBe(false);
  });

  it('refuses a samples param other than refuse or allow', async () => {
    expect(await refusal(paramsOf('dev', { samples: 'yes' }))).toBe(
      'param samples "yes": give refuse (the default) or allow',
    );
  });
});
