/**
 * The image's application: lib/cli/main.ts and its dependencies bundled by esbuild into one ES module that the
 * pinned Node 24 runs without node_modules beside it. Deterministic: the same sources and lockfile give the same bytes
 * (paths in it are relative to the repository).
 */
import { join } from 'node:path';
import { build } from 'esbuild';

export const REPO_ROOT = join(import.meta.dirname, '../..');

/** The bundle and what went into it. */
export interface CliBundle {
  code: Buffer;
  /** The source files esbuild read, relative to the repository (the npm package lists their packages' licences). */
  inputs: string[];
}

/** lib/cli/main.ts bundled (the image's application, and the npm package's: tools/npm/pack.ts). */
export async function buildCliBundle(): Promise<CliBundle> {
  const result = await build({
    absWorkingDir: REPO_ROOT,
    entryPoints: ['lib/cli/main.ts'],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    write: false,
    outfile: 'vault-rollout.mjs',
    logLevel: 'silent',
    legalComments: 'eof',
    metafile: true,
    // The bundle is only ever run as the program: main.ts's `if (import.meta.main)` holds on every Node 24 (the
    // property came in 24.2; before it was undefined and the CLI would exit 0 doing nothing).
    define: { 'import.meta.main': 'true' },
    // Bundled CommonJS packages require() Node's builtins: give the module a require.
    banner: {
      js: "import { createRequire as __vaultRolloutCreateRequire } from 'node:module';\nconst require = __vaultRolloutCreateRequire(import.meta.url);",
    },
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${result.errors.map((e) => e.text).join('; ')}`);
  const [file] = result.outputFiles;
  if (!file || result.outputFiles.length !== 1) throw new Error('esbuild: expected one output file');
  return { code: Buffer.from(file.contents), inputs: Object.keys(result.metafile.inputs) };
}

/** The bundle's bytes. */
export async function bundleCli(): Promise<Buffer> {
  return (await buildCliBundle()).code;
}

// `node tools/image/bundle.ts OUT.mjs`: the bundle alone, executable as the image holds it (tools/image/Dockerfile's
// build stage).
if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error('usage: node tools/image/bundle.ts OUT.mjs');
  const { writeFile } = await import('node:fs/promises');
  const { executableBundle } = await import('./config.ts');
  await writeFile(out, executableBundle(await bundleCli()), { mode: 0o755 });
}
