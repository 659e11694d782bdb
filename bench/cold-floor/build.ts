/**
 * Bundles the cold-start floors (bench/cold-floor/<function>.ts) with the esbuild settings serverless.yml gives the
 * real functions (custom.esbuild, its plugins included), so a floor differs from its function only in vault-rollout's
 * own code.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { parse } from 'yaml';
import { REPO } from '../provenance.ts';

interface EsbuildSettings {
  bundle: boolean;
  minify: boolean;
  sourcemap: boolean;
  keepNames: boolean;
  platform: BuildOptions['platform'];
  target: string;
  format: BuildOptions['format'];
  mainFields: string[];
  banner: { js: string };
  plugins: string;
}

/** serverless.yml's custom.esbuild, as esbuild options (the settings only serverless-esbuild reads left out). */
export async function serverlessEsbuildOptions(): Promise<BuildOptions> {
  const manifest = parse(readFileSync(join(REPO, 'serverless.yml'), 'utf8'), { logLevel: 'error' }) as {
    custom: { esbuild: EsbuildSettings };
  };
  const s = manifest.custom.esbuild;
  const plugins = ((await import(join(REPO, s.plugins))) as { default: Plugin[] }).default;
  return {
    bundle: s.bundle,
    minify: s.minify,
    sourcemap: s.sourcemap,
    keepNames: s.keepNames,
    platform: s.platform,
    target: s.target,
    format: s.format,
    mainFields: s.mainFields,
    banner: s.banner,
    plugins,
  };
}

/** Bundles the floor of `fn` into DIR/functions/<fn>.mjs (the layout of an unpacked function) and returns its path. */
export async function buildFloor(fn: string, dir: string): Promise<string> {
  const outfile = join(dir, 'functions', `${fn}.mjs`);
  mkdirSync(join(dir, 'functions'), { recursive: true });
  await build({
    ...(await serverlessEsbuildOptions()),
    entryPoints: [join(REPO, 'bench', 'cold-floor', `${fn}.ts`)],
    outfile,
    logLevel: 'error',
  });
  return outfile;
}
