/**
 * The npm package as a user gets it: `npm run pack` makes the tarball, `npm install -g` puts it in a clean temporary
 * prefix, and the installed `vault-rollout` answers --version, validate and plan from a directory outside the
 * checkout, on the project's Node 24 as `node` on PATH. In the integration project because it runs npm.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRepoFile, repoRoot } from '../helpers.ts';

const pkg = JSON.parse(readRepoFile('package.json')) as { name: string; version: string; license: string };
/** The project's Node 24 (bin/setup), first on PATH for npm and for the installed CLI. */
const nodeDir = join(repoRoot, 'node_modules/.bin');
const work = mkdtempSync(join(tmpdir(), 'vault-rollout-npm-package-test-'));
const prefix = join(work, 'prefix');
const home = join(work, 'home');
const user = join(work, 'user');
let tarball = '';

/** Every npm call: its own cache and no registry round trips that the test does not need; bounded in time. */
function npm(args: string[], cwd: string, timeout: number): SpawnSyncReturns<string> {
  const env = {
    ...process.env,
    PATH: `${nodeDir}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    npm_config_cache: join(work, 'npm-cache'),
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  };
  return spawnSync('npm', args, { cwd, env, encoding: 'utf8', timeout });
}

const said = (r: SpawnSyncReturns<string>) => `${r.error?.message ?? `exit ${r.status}`}\n${r.stdout}\n${r.stderr}`;

/** The installed CLI, run as a user would: from their own directory, with nothing of the checkout on PATH but Node. */
function vaultRollout(
  args: string[],
  path = `${join(prefix, 'bin')}:${nodeDir}:/usr/bin:/bin`,
): SpawnSyncReturns<string> {
  return spawnSync(join(prefix, 'bin', 'vault-rollout'), args, {
    cwd: user,
    env: { PATH: path, HOME: home },
    encoding: 'utf8',
    timeout: 60_000,
  });
}

beforeAll(() => {
  for (const dir of [home, user]) mkdirSync(dir);
  const packed = npm(['run', '--silent', 'pack', '--', '--pack-destination', join(work, 'out')], repoRoot, 240_000);
  expect(packed.status, said(packed)).toBe(0);
  tarball = packed.stdout.trim().split('\n').at(-1) ?? '';
  expect(tarball).toBe(join(work, 'out', `${pkg.name}-${pkg.version}.tgz`));
  const installed = npm(['install', '--global', '--prefix', prefix, tarball], work, 240_000);
  expect(installed.status, said(installed)).toBe(0);
}, 600_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the npm package', () => {
  it('holds the bundled CLI, its licences, README and LICENSE, and no TypeScript; its package.json is not private and declares no dependency', () => {
    const listed = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
    expect(listed.status, said(listed)).toBe(0);
    const files = listed.stdout.trim().split('\n').sort();
    for (const f of [
      'package.json',
      'README.md',
      'LICENSE',
      'bin/vault-rollout',
      'dist/vault-rollout.mjs',
      'dist/THIRD-PARTY-LICENSES.md',
    ])
      expect(files).toContain(`package/${f}`);
    expect(files.filter((f) => f.endsWith('.ts') || f.includes('node_modules/'))).toEqual([]);

    const manifest = JSON.parse(
      spawnSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }).stdout,
    ) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      name: pkg.name,
      version: pkg.version,
      license: pkg.license,
      engines: { node: '>=24' },
      bin: { 'vault-rollout': 'bin/vault-rollout' },
    });
    for (const field of ['private', 'dependencies', 'optionalDependencies', 'devDependencies', 'scripts'])
      expect(manifest, field).not.toHaveProperty(field);
  });

  it('installs globally into a clean prefix, alone: nothing from the checkout, no dependency beside it', () => {
    const dir = join(prefix, 'lib', 'node_modules', pkg.name);
    expect(existsSync(join(prefix, 'bin', 'vault-rollout'))).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['LICENSE', 'README.md', 'bin', 'dist', 'infra', 'package.json']);
    expect(readdirSync(join(prefix, 'lib', 'node_modules'))).toEqual([pkg.name]);
  });

  it('vault-rollout --version prints the package version', () => {
    const r = vaultRollout(['--version']);
    expect(r.status, said(r)).toBe(0);
    expect(r.stdout).toBe(`vault-rollout ${pkg.version}\n`);
    expect(r.stderr).toBe('');
  });

  it("validate and plan work on a routing table and an audit line of the user's", () => {
    writeFileSync(
      join(user, 'routes.yaml'),
      [
        'clusters:',
        '  alpha: { kubeconfig: { file: alpha.kubeconfig } }',
        'vault: { mounts: { secret: 2 } }',
        'routes:',
        '  - name: api',
        '    match: { path: "secret/payments/{app}" }',
        '    targets: [{ clusters: [alpha], namespace: payments, names: [api], kind: Deployment, name: "{app}" }]',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(user, 'audit.log'),
      `${JSON.stringify({ time: '2026-11-20T12:00:00Z', type: 'response', request: { id: 'npm-package-1', operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/payments/api' }, response: { data: { version: 3 } } })}\n`,
    );

    const validated = vaultRollout(['validate', 'routes.yaml']);
    expect(validated.status, said(validated)).toBe(0);
    expect(validated.stdout).toContain('routes.yaml: ok');

    const planned = vaultRollout(['plan', '--routes', 'routes.yaml', '--input', 'audit.log', '--json']);
    expect(planned.status, said(planned)).toBe(0);
    const plan = JSON.parse(planned.stdout) as {
      changes: { path: string; version: number }[];
      targets: { cluster: string; namespace: string; kind: string; name: string }[];
    };
    expect(plan.changes.map((c) => `${c.path}@${c.version}`)).toEqual(['secret/payments/api@3']);
    expect(plan.targets.map((t) => `${t.cluster}/${t.namespace}/${t.kind}/${t.name}`)).toEqual([
      'alpha/payments/Deployment/api',
    ]);

    const invalid = vaultRollout(['validate', 'audit.log']);
    expect(invalid.status).toBe(1);
  });

  it('refuses, in words, a node on PATH older than 24', () => {
    const old = join(work, 'node-22');
    mkdirSync(old);
    writeFileSync(join(old, 'node'), '#!/bin/sh\necho v22.12.0\n');
    chmodSync(join(old, 'node'), 0o755);
    const r = vaultRollout(['--version'], `${old}:/usr/bin:/bin`);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('vault-rollout: needs Node.js 24 or later; `node` on PATH is v22.12.0\n');
  });

  it("carries the checkout's LICENSE (test/unit/tools/npm-pack.test.ts: the text of package.json's license)", () => {
    expect(readFileSync(join(prefix, 'lib', 'node_modules', pkg.name, 'LICENSE'), 'utf8')).toBe(
      readRepoFile('LICENSE'),
    );
  });
});
