/**
 * The CLI's conventions: one test per defect a new user met, each run in process through main() (or the
 * command's function where a test must stop a long-running command), with no cluster.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { main } from '../../../lib/cli/main.ts';
import { serveCommand } from '../../../lib/cli/serve-command.ts';
import { printableYaml } from '../../../lib/report/printable.ts';
import { memoryIo, readRepoFile, repoRoot } from '../../helpers.ts';

const routes = readRepoFile('infra/routes/example.yaml');
const demo = readRepoFile('test/fixtures/demo/rotation.ndjson');
const version = (JSON.parse(readRepoFile('package.json')) as { version: string }).version;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'vr-ux-'));
  dirs.push(d);
  return d;
};

describe('--help and --version', () => {
  it.each([[['plan', '--help']], [['help', 'plan']], [['plan', '-h']]])(
    "%j prints plan's own usage and exits 0",
    async (argv) => {
      const io = memoryIo();
      expect(await main(argv, io)).toBe(0);
      expect(io.out).toContain('Usage: vault-rollout plan [options]');
      expect(io.out).toContain('--input <FILE>');
      expect(io.out).toMatch(/Exit codes:\n {2}0 +every record was understood/);
      expect(io.err).toBe('');
    },
  );

  it.each([['--version'], ['-V']])('%s prints the package version', async (flag) => {
    const io = memoryIo();
    expect(await main([flag], io)).toBe(0);
    expect(io.out).toBe(`vault-rollout ${version}\n`);
  });

  it("an unknown flag names itself and the command's --help, exit 64", async () => {
    const io = memoryIo();
    expect(await main(['validate', '--frobnicate', 'x.yaml'], io)).toBe(64);
    expect(io.err).toBe(
      'vault-rollout validate: unknown option "--frobnicate"\nRun "vault-rollout validate --help" for usage.\n',
    );
  });
});

describe('-o json|yaml and --json print the same data', () => {
  const stateDb = join(tempDir(), 'rotations.sqlite');
  it.each([
    ['plan', ['plan', '--routes', 'routes.yaml', '--input', 'in.ndjson']],
    ['validate', ['validate', 'routes.yaml']],
    ['schema', ['schema']],
    ['halts list', ['halts', 'list']],
  ])('%s', async (_name, argv) => {
    const run = async (extra: string[]): Promise<string> => {
      const io = memoryIo({ 'routes.yaml': routes, 'in.ndjson': demo }, { VAULT_ROLLOUT_STATE_DB: stateDb });
      expect(await main([...argv, ...extra], io), io.err).toBe(0);
      return io.out;
    };
    const json = JSON.parse(await run(['--json'])) as unknown;
    expect(JSON.parse(await run(['-o', 'json']))).toEqual(json);
    expect(JSON.parse(await run(['--output=json']))).toEqual(json);
    const yaml = await run(['-o', 'yaml']);
    // YAML, not JSON (which a YAML parser would read just the same).
    expect(yaml.trimStart()).not.toMatch(/^[{[]/);
    expect(parseYaml(yaml)).toEqual(json);
  });
});

describe('import -o', () => {
  it('-o chooses the format now: a file name is refused, pointing to --file', async () => {
    const io = memoryIo();
    expect(await main(['import', '--cluster', 'alpha=k.yaml', '-o', 'routes.yaml'], io)).toBe(64);
    expect(io.err).toContain(
      '--output routes.yaml: one of yaml, json, table (-o/--output chooses the format; to write to a file use --file FILE)',
    );
  });
});

describe('--namespace is a Kubernetes namespace', () => {
  it('reset-version --namespace (a Vault namespace) is refused, naming --vault-namespace', async () => {
    const io = memoryIo();
    expect(
      await main(
        ['reset-version', '--routes', 'missing.yaml', '--path', 'secret/a', '--version', '3', '--namespace', 'team-a'],
        io,
      ),
    ).toBe(64);
    expect(io.err).toContain('--namespace is no longer accepted: use --vault-namespace VAULT-NS');
  });

  it('relay --namespaces is refused, naming --vault-namespace', async () => {
    const io = memoryIo();
    expect(await main(['relay', '--events', 'kv-v2/*', '--namespaces', 'a,b', '--to', 'http://127.0.0.1:1'], io)).toBe(
      64,
    );
    expect(io.err).toContain('--namespaces is no longer accepted: use --vault-namespace NS');
  });

  it('import -n is --namespace, a Kubernetes namespace', async () => {
    const io = memoryIo();
    expect(await main(['import', '--cluster', 'alpha=k.yaml', '-n', 'Bad_NS'], io)).toBe(64);
    expect(io.err).toContain('--namespace Bad_NS: not a namespace name');
  });
});

describe('durations take a unit', () => {
  const secret = { VAULT_ROLLOUT_WEBHOOK_SECRET: 'a-test-webhook-secret-of-some-length' };
  it.each([
    [['serve', '--request-timeout', '30'], '--request-timeout 30: use a unit: 30s'],
    [['serve', '--status-refresh', '30'], '--status-refresh 30: use a unit: 30s'],
    [
      ['relay', '--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--grace-seconds', '10'],
      '--grace-seconds is no longer accepted: use --grace DURATION, e.g. --grace 10s',
    ],
    [
      ['relay', '--audit-file', 'a.log', '--to', 'http://127.0.0.1:1', '--batch-wait-ms', '1000'],
      '--batch-wait-ms is no longer accepted: use --batch-wait DURATION',
    ],
    [['status', '--routes', 'routes.yaml', '--timeout', '90'], '--timeout 90: use a unit: 90s'],
    [['apply', '--routes', 'routes.yaml', '--timeout', '48h'], '--timeout 48h: 48h is out of range: from 1s to 24h'],
  ])('%j is refused', async (argv, message) => {
    const io = memoryIo({ 'routes.yaml': routes }, secret);
    expect(await main(argv, io)).toBe(64);
    expect(io.err).toContain(message);
  });

  it.each([
    [['serve', '--routes', 'missing.yaml', '--request-timeout', '30s', '--status-refresh', '1m']],
    [['status', '--routes', 'missing.yaml', '--timeout', '1m30s', '--interval', '500ms']],
  ])('%j is accepted (and goes on to read the routing table)', async (argv) => {
    const io = memoryIo({}, secret);
    expect(await main(argv, io)).toBe(1);
    expect(io.err).toContain('missing.yaml: no such file');
  });

  it('relay --grace 10s --batch-wait 1s is accepted', async () => {
    const io = memoryIo();
    expect(await main(['relay', '--audit-file', 'a.log', '--grace', '10s', '--batch-wait', '1s'], io)).toBe(64);
    expect(io.err).toContain('--to is required');
  });
});

describe('plan on a terminal', () => {
  it('says it reads standard input instead of waiting silently', async () => {
    const io = { ...memoryIo({ 'routes.yaml': routes, '-': '' }), stdinIsTTY: true };
    const captured = io as typeof io & { err: string };
    let err = '';
    captured.stderr = (t: string) => void (err += t);
    expect(await main(['plan', '--routes', 'routes.yaml'], captured)).toBe(0);
    expect(err).toContain(
      'vault-rollout plan: reading change records from standard input; pipe a file or use --input FILE; Ctrl-D to end',
    );
  });
});

describe('serve and its routing table', () => {
  const secret = { VAULT_ROLLOUT_WEBHOOK_SECRET: 'a-test-webhook-secret-of-some-length' };
  const stopped = (): AbortSignal => AbortSignal.abort();

  it('honours VAULT_ROLLOUT_ROUTES when --routes is absent', async () => {
    const io = memoryIo({ 'infra/routes/example.yaml': routes }, { ...secret, VAULT_ROLLOUT_ROUTES: 'mine.yaml' });
    expect(await serveCommand(['--port', '0', '--dry-run'], io, stopped())).toBe(1);
    expect(io.err).toContain('mine.yaml: no such file');
  });

  it('refuses the example table unless told --allow-example-routes', async () => {
    const io = memoryIo({ 'infra/routes/example.yaml': routes }, secret);
    expect(await serveCommand(['--port', '0', '--dry-run'], io, stopped())).toBe(64);
    expect(io.err).toContain(
      'infra/routes/example.yaml is the example routing table (the demo): give your own with --routes FILE or VAULT_ROLLOUT_ROUTES, or pass --allow-example-routes to serve it',
    );
    const allowed = memoryIo({ 'infra/routes/example.yaml': routes }, secret);
    expect(await serveCommand(['--port', '0', '--dry-run', '--allow-example-routes'], allowed, stopped())).toBe(0);
    expect(allowed.err).toContain('routes infra/routes/example.yaml: 4 routes');
  });
});

describe('numbers are checked', () => {
  it('worker --concurrency abc is a usage error, not NaN pollers', async () => {
    const io = memoryIo();
    expect(
      await main(
        ['worker', '--routes', 'missing.yaml', '--queue-url', 'http://127.0.0.1:1/q', '--concurrency', 'abc'],
        io,
      ),
    ).toBe(64);
    expect(io.err).toContain('--concurrency abc: not a whole number: abc (from 1 to 64)');
  });
});

describe('status and reconcile log as themselves', () => {
  // VAULT_SKIP_VERIFY makes the Vault connection log a warning; no token then ends the command (exit 1).
  const env = { VAULT_SKIP_VERIFY: 'true' };
  it.each([
    ['status', ['status', '--routes', 'routes.yaml', '--vault-addr', 'https://127.0.0.1:1']],
    ['reconcile', ['reconcile', '--routes', 'routes.yaml', '--vault-addr', 'https://127.0.0.1:1']],
  ])('%s', async (component, argv) => {
    const io = memoryIo({ 'routes.yaml': routes }, env);
    expect(await main(argv, io)).toBe(1);
    const lines = io.err
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { component: string; message: string });
    expect(lines.find((l) => l.message.startsWith('VAULT_SKIP_VERIFY is set'))?.component).toBe(component);
  });
});

describe('file errors in words', () => {
  it('a missing routing table', async () => {
    const io = memoryIo();
    expect(await main(['plan', '--routes', 'routes.yaml'], io)).toBe(1);
    expect(io.err).toBe('vault-rollout plan: cannot read the routing table: routes.yaml: no such file\n');
  });

  it('a directory given as a routing table', async () => {
    const dir = tempDir();
    const io = { ...memoryIo(), readText: (f: string) => readFile(f, 'utf8') };
    let err = '';
    io.stderr = (t: string) => void (err += t);
    expect(await main(['validate', dir], io)).toBe(1);
    expect(err).toBe(`vault-rollout validate: cannot read the routing table: ${dir}: is a directory\n`);
  });
});

describe('validate: the verdict in the format asked for', () => {
  const bad =
    'clusters:\n  a: { kubeconfig: { env: A }, lables: {} }\nroutes:\n  - name: app\n    match: { paht: secret/app }\n    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: app }]\n';
  const problems = [
    { line: 2, column: 32, field: 'clusters.a.lables', message: 'unknown field "lables" (did you mean "labels"?)' },
    { line: 5, column: 14, field: 'routes[0].match.paht', message: 'unknown field "paht" (did you mean "path"?)' },
  ];

  it.each([
    ['json', (t: string): unknown => JSON.parse(t)],
    ['yaml', (t: string): unknown => parseYaml(t)],
  ] as const)('-o %s on a bad table prints ok: false and the problems on stdout, exit 1', async (format, parse) => {
    const io = memoryIo({ 'bad.yaml': bad });
    expect(await main(['validate', 'bad.yaml', '-o', format], io)).toBe(1);
    expect(parse(io.out)).toEqual({ file: 'bad.yaml', ok: false, problems });
    expect(io.err).toBe('');
  });

  it('-o json on a file that cannot be read prints ok: false too', async () => {
    const io = memoryIo();
    expect(await main(['validate', 'gone.yaml', '--json'], io)).toBe(1);
    expect(JSON.parse(io.out)).toEqual({
      file: 'gone.yaml',
      ok: false,
      problems: [{ line: 0, column: 0, field: '', message: 'cannot read the routing table: gone.yaml: no such file' }],
    });
  });

  it("the table output lists each problem, then a count under the command's name", async () => {
    const io = memoryIo({ 'bad.yaml': bad });
    expect(await main(['validate', 'bad.yaml'], io)).toBe(1);
    expect(io.out).toBe('');
    expect(io.err).toBe(`bad.yaml:2:32: clusters.a.lables: unknown field "lables" (did you mean "labels"?)
bad.yaml:5:14: routes[0].match.paht: unknown field "paht" (did you mean "path"?)
vault-rollout validate: bad.yaml: 2 problems
`);
  });

  it('counts are singular or plural as they should be', async () => {
    const io = memoryIo({ 'one.yaml': 'clusters:\n  a: { kubeconfig: { env: A } }\n' });
    expect(await main(['validate', 'one.yaml'], io)).toBe(0);
    expect(io.out).toBe('one.yaml: ok (1 cluster, 0 routes, 0 targets, 0 KV mounts)\n');
  });
});

describe('first contact with the command line', () => {
  it.each([
    [['-q', 'validate', 'routes.yaml']],
    [['--verbose', 'validate', 'routes.yaml']],
    [['-o', 'json', 'validate', 'routes.yaml']],
    [['--json', '-q', 'validate', 'routes.yaml']],
  ])('global flags before the command: %j', async (argv) => {
    const io = memoryIo({ 'routes.yaml': routes });
    expect(await main(argv, io), io.err).toBe(0);
    expect(io.out).toContain('routes.yaml');
  });

  it('an unknown command is three lines: what, the nearest command, where to look', async () => {
    const io = memoryIo();
    expect(await main(['valdate', 'routes.yaml'], io)).toBe(64);
    expect(io.err).toBe(
      'vault-rollout: unknown command "valdate"\nDid you mean "validate"?\nRun "vault-rollout --help" for the commands.\n',
    );
  });

  it('an unknown command near none is two', async () => {
    const io = memoryIo();
    expect(await main(['frobnicate'], io)).toBe(64);
    expect(io.err).toBe('vault-rollout: unknown command "frobnicate"\nRun "vault-rollout --help" for the commands.\n');
  });

  it('--help | head: the reader going away ends the process quietly, exit 0', async () => {
    const child = spawn(process.execPath, [join(repoRoot, 'lib/cli/main.ts'), 'help', 'apply'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // The reader is gone before the first write, so every write meets EPIPE.
    child.stdout.destroy();
    let err = '';
    child.stderr.on('data', (d: Buffer) => void (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(err).toBe('');
    expect(code).toBe(0);
  });
});

describe('read commands write nothing', () => {
  it.each([
    ['halts', ['halts']],
    ['halts list -o json', ['halts', 'list', '-o', 'json']],
    ['halts clear', ['halts', 'clear', 'abcdef0123456789']],
    ['status', ['status', '--routes', 'routes.yaml']],
  ])('%s creates no state file (nor its folder)', async (_name, argv) => {
    const dir = tempDir();
    const io = memoryIo(
      { 'routes.yaml': routes },
      { XDG_STATE_HOME: join(dir, 'state'), KUBECONFIG: join(dir, 'none') },
    );
    await main(argv, io);
    expect(existsSync(join(dir, 'state'))).toBe(false);
  });

  it('halts on a store not created yet says there is no halt', async () => {
    const dir = tempDir();
    const io = memoryIo({}, { VAULT_ROLLOUT_STATE_DB: join(dir, 'rotations.sqlite') });
    expect(await main(['halts'], io)).toBe(0);
    expect(io.out).toBe(`No halted rotation (SQLite file ${join(dir, 'rotations.sqlite')}).\n`);
    expect(existsSync(join(dir, 'rotations.sqlite'))).toBe(false);
  });
});

describe('-o yaml is plain YAML', () => {
  it('quotes only what YAML needs, with no anchors or aliases', async () => {
    const io = memoryIo({ 'routes.yaml': routes, 'in.ndjson': demo });
    expect(await main(['plan', '--routes', 'routes.yaml', '--input', 'in.ndjson', '-o', 'yaml'], io), io.err).toBe(0);
    expect(io.out).not.toMatch(/[&*][a-z]+\d*\s*$/m);
    expect(io.out).toMatch(/^ {4}path: secret\/payments\/api\/db$/m);
    expect(io.out).not.toMatch(/: "[a-z][-a-z0-9]*"$/m);
    expect(parseYaml(io.out)).toEqual(
      JSON.parse(
        await (async () => {
          const json = memoryIo({ 'routes.yaml': routes, 'in.ndjson': demo });
          await main(['plan', '--routes', 'routes.yaml', '--input', 'in.ndjson', '-o', 'json'], json);
          return json.out;
        })(),
      ),
    );
  });
});

describe('-o yaml writes an object met twice twice', () => {
  it('no &a1 / *a1', () => {
    const shared = { cluster: 'alpha' };
    expect(printableYaml({ first: shared, second: shared, odd: 'x\u001by' })).toBe(
      'first:\n  cluster: alpha\nsecond:\n  cluster: alpha\nodd: "x\\ey"\n',
    );
  });
});

describe('one error style', () => {
  it("a bad routing table: each problem, then the count under the command's name", async () => {
    const io = memoryIo({
      'routes.yaml': 'clusters:\n  a: { kubeconfig: { env: A }, lables: {} }\n',
      'in.ndjson': demo,
    });
    expect(await main(['plan', '--routes', 'routes.yaml', '--input', 'in.ndjson'], io)).toBe(1);
    expect(io.err).toBe(
      'routes.yaml:2:32: clusters.a.lables: unknown field "lables" (did you mean "labels"?)\nvault-rollout plan: routes.yaml: invalid routing table: 1 problem\n',
    );
  });

  it("commander's messages quote as ours do", async () => {
    const io = memoryIo();
    expect(await main(['validate'], io)).toBe(64);
    expect(io.err).toBe(
      'vault-rollout validate: missing required argument "file"\nRun "vault-rollout validate --help" for usage.\n',
    );
  });
});

describe('VAULT_NAMESPACE wherever --vault-namespace exists', () => {
  const table =
    'clusters:\n  a: { kubeconfig: { env: VR_TEST_NO_KUBECONFIG } }\nvault: { mounts: { team-a/secret: 2 } }\nroutes:\n  - name: app\n    match: { namespace: team-a, path: secret/app }\n    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: app }]\n';
  const argv = [
    'reset-version',
    '--routes',
    'routes.yaml',
    '--path',
    'secret/app',
    '--version',
    '3',
    '--dry-run',
    '-o',
    'json',
  ];

  it('reset-version takes the Vault namespace from VAULT_NAMESPACE', async () => {
    const io = memoryIo({ 'routes.yaml': table }, { VAULT_NAMESPACE: 'team-a' });
    await main(argv, io);
    expect((JSON.parse(io.out) as { changes: Array<{ namespace: string }> }).changes[0]?.namespace).toBe('team-a');
  });

  it('--vault-namespace still wins over it (here: the root namespace, which no route takes)', async () => {
    const io = memoryIo({ 'routes.yaml': table }, { VAULT_NAMESPACE: 'team-a' });
    expect(await main([...argv, '--vault-namespace', ''], io)).toBe(1);
    expect(io.err).toBe('vault-rollout reset-version: no route of routes.yaml targets secret/app\n');
  });
});
