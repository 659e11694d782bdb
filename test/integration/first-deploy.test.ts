/**
 * The Lambda's first deploy with the real osls, offline: `npm run package` refuses the sample values of
 * serverless.yml and infra/routes/ with one message naming each param and the --param that sets it, and resolves the
 * stage once they are given with --param, serverless.yml unchanged. Each run stops at osls's variable resolution,
 * before anything is bundled (the full packaging: package.test.ts; the rules: test/unit/deploy/sample-values.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { withoutAwsCredentials } from '../../bench/bundle-bench.ts';
import { readRepoFile, repoRoot } from '../helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-first-deploy-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const env = {
  ...withoutAwsCredentials(process.env),
  FORCE_COLOR: '0',
  NO_COLOR: '1',
  SLS_TELEMETRY_DISABLED: '1',
  SLS_NOTIFICATIONS_MODE: 'off',
  AWS_EC2_METADATA_DISABLED: 'true',
};
const said = (r: ReturnType<typeof spawnSync>) =>
  `${r.error?.message ?? `exit ${r.status}`}\n${String(r.stdout)}\n${String(r.stderr)}`;

describe('npm run package before the first deploy', () => {
  it('refuses the prod stage as shipped, naming vaultAddr, vaultAwsHeaderValue, alarmTarget and routes once each', () => {
    const r = spawnSync(
      process.execPath,
      ['infra/serverless/package.js', '--stage', 'prod', '--package', join(work, 'refused')],
      { cwd: repoRoot, env, encoding: 'utf8', timeout: 180_000 },
    );
    expect(r.status, said(r)).toBe(1);
    const out = `${r.stdout}${r.stderr}`;
    expect(out).toContain('the stage still has sample values:');
    for (const param of ['vaultAddr', 'vaultAwsHeaderValue', 'alarmTarget', 'routes'])
      expect(out.split(`- param ${param}: `).length - 1, param).toBe(1);
    expect(out).toContain(
      'param alarmTarget: arn:aws:sns:eu-west-1:123456789012:ops-pager is an SNS topic of the sample account 123456789012; set yours with --param "alarmTarget=arn:aws:sns:REGION:ACCOUNT:TOPIC"',
    );
    expect(out).not.toContain('Packaging');
  });

  it('resolves the stage with every sample given by --param (osls print: the same resolution, nothing bundled)', () => {
    const routes = join(work, 'prod.yaml');
    const own = readRepoFile('infra/routes/prod.yaml')
      .split('\n')
      .filter((l) => !l.startsWith('# vault-rollout sample table') && !l.startsWith('# clusters and routes below'));
    writeFileSync(routes, own.join('\n').replaceAll('123456789012', '111122223333'));
    const osls = join(repoRoot, 'node_modules/osls/bin/serverless.js');
    const params = [
      'vaultAddr=https://vault.corp.internal:8200',
      'vaultAwsHeaderValue=vault.corp.internal',
      'alarmTarget=arn:aws:sns:eu-west-1:111122223333:ops-pager',
      `routes=${routes}`,
    ];
    const r = spawnSync(
      process.execPath,
      [osls, 'print', '--stage', 'prod', ...params.flatMap((p) => ['--param', p])],
      { cwd: repoRoot, env, encoding: 'utf8', timeout: 180_000 },
    );
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout).toContain('VAULT_ADDR: https://vault.corp.internal:8200');
    expect(r.stdout).toContain('arn:aws:sns:eu-west-1:111122223333:ops-pager');
    expect(readFileSync(join(work, 'prod.compiled.json'), 'utf8')).toContain('111122223333');
  });
});
