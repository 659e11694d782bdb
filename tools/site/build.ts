/**
 * `npm run docs`: the documentation site, built by mkdocs-material from docs/ (mkdocs.yml) into .local/site.
 *
 * mkdocs runs from a venv kept outside the checkout, as the tests' other tools are:
 * ${XDG_CACHE_HOME:-~/.cache}/vault-rollout/mkdocs-venv-<first 12 of the SHA-256 of tools/site/requirements.txt>,
 * holding exactly those packages, each file checked against its hash (pip --require-hashes, wheels only: no setup.py
 * runs). A changed requirements file gets a new venv. It is made in a temporary folder beside it and renamed into
 * place once complete, so two builds at once never share a half-made venv (the loser of the rename drops its own);
 * mkdocs is run as `python -m mkdocs`, which holds no absolute path of the folder it was installed in.
 *
 * mkdocs.yml sets `strict` with every link and anchor check at `warn`, so a broken link or anchor fails the build.
 *
 *   node tools/site/build.ts [--site-dir DIR]   build (default .local/site); exit 1 with mkdocs's output on failure
 *
 * test/components.ts makes the venv before the integration lanes start; test/integration/docs-site.test.ts builds.
 *
 * The builder for the next years: MkDocs 1.6 is unmaintained (its last release was 2024-08) and mkdocs-material is in
 * maintenance, so the way forward is Zensical, their successor, which reads mkdocs.yml as it is. Tried on 2026-11-28
 * on the CI machine's Python (Debian 12, 3.11.2): `pip install zensical==0.1.3` fails, its pinned zensical-ui is not on
 * PyPI. So the site stays on the pinned MkDocs + Material, which build strict and offline, with MkDocs 2's notice
 * silenced (NO_MKDOCS_2_WARNING: MkDocs 2 is not the way we are going); the move is a change of this file's command
 * and requirements.txt once Zensical installs from PyPI alone, since the pages and mkdocs.yml need no change.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

export const REPO = resolve(import.meta.dirname, '../..');
export const REQUIREMENTS = join(REPO, 'tools/site/requirements.txt');

/** The venv folder for the current requirements file. */
export function mkdocsVenvDir(env: NodeJS.ProcessEnv = process.env): string {
  const hash = createHash('sha256').update(readFileSync(REQUIREMENTS)).digest('hex').slice(0, 12);
  const cache = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cache, 'vault-rollout', `mkdocs-venv-${hash}`);
}

/** Runs a command to its end (asynchronously: the tests' global setup must not block its event loop for minutes). */
function run(
  command: string,
  args: string[],
  what: string,
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options }, (error, stdout, stderr) => {
      const text = `${stdout}${stderr}`;
      if (error === null) return resolvePromise(text);
      const code = (error as NodeJS.ErrnoException).code;
      reject(
        new Error(
          typeof code === 'string'
            ? `${what}: cannot run ${command} (${code})`
            : `${what} failed (exit ${String(error.code)}):\n${text}`,
        ),
      );
    });
  });
}

/**
 * The venv with mkdocs-material, made when missing; returns its python. Throws (never skips) when python3 or its
 * venv module is missing, or PyPI cannot be reached.
 */
export async function ensureMkdocsVenv(
  options: { python?: string; log?: (line: string) => void } = {},
): Promise<{ python: string; built: boolean }> {
  const dir = mkdocsVenvDir();
  const python = join(dir, 'bin', 'python');
  if (existsSync(join(dir, '.complete'))) return { python, built: false };
  const base = options.python ?? process.env.PYTHON ?? 'python3';
  const temporary = `${dir}.tmp-${process.pid}`;
  rmSync(temporary, { recursive: true, force: true });
  mkdirSync(join(dir, '..'), { recursive: true });
  options.log?.(`[docs] making ${dir} (mkdocs-material from PyPI, pinned with hashes)`);
  try {
    await run(base, ['-m', 'venv', temporary], `${base} -m venv (install Python 3 with its venv module)`);
    await run(
      join(temporary, 'bin', 'python'),
      [
        '-m',
        'pip',
        'install',
        '--quiet',
        '--disable-pip-version-check',
        '--require-hashes',
        '--only-binary=:all:',
        '-r',
        REQUIREMENTS,
      ],
      'pip install -r tools/site/requirements.txt',
    );
    await run(join(temporary, 'bin', 'python'), ['-m', 'mkdocs', '--version'], 'mkdocs --version');
    writeFileSync(join(temporary, '.complete'), 'ok\n');
    try {
      renameSync(temporary, dir);
    } catch (e) {
      // Another build finished first: use its venv.
      if (!existsSync(join(dir, '.complete'))) throw e;
    }
  } finally {
    rmSync(temporary, { recursive: true, force: true });
  }
  return { python, built: true };
}

/** Builds the site; returns mkdocs's combined output. Throws with that output when the build fails. */
export async function buildSite(
  options: { siteDir?: string; configFile?: string; log?: (line: string) => void } = {},
): Promise<string> {
  const { python } = await ensureMkdocsVenv(options.log ? { log: options.log } : {});
  const configFile = resolve(REPO, options.configFile ?? 'mkdocs.yml');
  const siteDir = resolve(REPO, options.siteDir ?? '.local/site');
  return run(
    python,
    ['-m', 'mkdocs', 'build', '--strict', '--clean', '--config-file', configFile, '--site-dir', siteDir],
    'mkdocs build',
    { cwd: dirname(configFile), env: { ...process.env, NO_MKDOCS_2_WARNING: '1' } },
  );
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--site-dir');
  try {
    const text = await buildSite({
      ...(at >= 0 && args[at + 1] ? { siteDir: args[at + 1] } : {}),
      log: (l) => process.stderr.write(`${l}\n`),
    });
    process.stderr.write(text);
    process.stdout.write(`site written to ${resolve(REPO, at >= 0 && args[at + 1] ? args[at + 1]! : '.local/site')}\n`);
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
