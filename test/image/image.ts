/**
 * The container image (tools/image/) for tests, without a container runtime: build it (or reuse the cache), read
 * its manifest and config, unpack its layers into a directory, and run a command in that directory as the image
 * would: its root as `/` (unshare --root), its user, working directory and environment, the root file system
 * read-only (a read-only bind mount in a mount namespace of its own) with writable host directories mounted where
 * the caller says (as a pod's volumes). Needs root (CAP_SYS_ADMIN for the mounts, CAP_SYS_CHROOT), util-linux and
 * GNU tar. Shares the host's network: serve listens on the 127.0.0.1 it is told.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { buildImage, type BuiltImage } from '../../tools/image/build.ts';
import type { ImageRuntimeConfig } from '../../tools/image/config.ts';

export interface ImageDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { architecture: string; os: string };
}
export interface ImageManifest {
  schemaVersion: number;
  mediaType: string;
  config: ImageDescriptor;
  layers: ImageDescriptor[];
  annotations?: Record<string, string>;
}
export interface ImageConfig {
  created: string;
  architecture: string;
  os: string;
  config: ImageRuntimeConfig;
  rootfs: { type: string; diff_ids: string[] };
  history: { created: string; created_by: string }[];
}
export interface ImageContents {
  layout: string;
  index: { manifests: ImageDescriptor[] };
  manifestDigest: string;
  manifest: ImageManifest;
  config: ImageConfig;
}

let built: Promise<BuiltImage> | undefined;

/** The image of this checkout: built into ~/.cache/vault-rollout/image/ when missing (throws when it cannot be). */
export function imageLayout(): Promise<BuiltImage> {
  built ??= buildImage({ log: (line) => process.stderr.write(`[image] ${line}\n`) });
  return built;
}

export const blobPath = (layout: string, digest: string): string =>
  join(layout, 'blobs', 'sha256', digest.replace(/^sha256:/, ''));
const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/** The layout's one manifest and its config. */
export function readImage(layout: string): ImageContents {
  const index = readJson<{ manifests: ImageDescriptor[] }>(join(layout, 'index.json'));
  if (index.manifests.length !== 1)
    throw new Error(`${layout}: expected one manifest, found ${index.manifests.length}`);
  const manifestDigest = index.manifests[0]!.digest;
  const manifest = readJson<ImageManifest>(blobPath(layout, manifestDigest));
  const config = readJson<ImageConfig>(blobPath(layout, manifest.config.digest));
  return { layout, index, manifestDigest, manifest, config };
}

/**
 * The image's file system: each layer applied in order by GNU tar (owners and modes kept), its whiteouts first
 * (`.wh.NAME` removes NAME of the layers below, `.wh..wh..opq` empties its directory). A new directory unless `into`.
 */
export function unpackImage(layout: string, into?: string): string {
  const root = into ?? mkdtempSync(join(tmpdir(), 'vault-rollout-image-'));
  chmodSync(root, 0o755);
  const { manifest } = readImage(layout);
  for (const layer of manifest.layers) {
    if (layer.mediaType !== 'application/vnd.oci.image.layer.v1.tar+gzip')
      throw new Error(`layer ${layer.digest}: media type ${layer.mediaType} not supported`);
    const blob = blobPath(layout, layer.digest);
    const names = execFileSync('tar', ['-tzf', blob], { encoding: 'utf8', maxBuffer: 1 << 26 })
      .split('\n')
      .filter(Boolean);
    for (const name of names) {
      const path = name.replace(/^(\.\/|\/)+/, '').replace(/\/$/, '');
      const base = path.slice(path.lastIndexOf('/') + 1);
      if (!base.startsWith('.wh.')) continue;
      const parent = join(root, dirname(path));
      if (base === '.wh..wh..opq') {
        for (const child of execFileSync('ls', ['-A', parent], { encoding: 'utf8' }).split('\n').filter(Boolean))
          rmSync(join(parent, child), { recursive: true, force: true });
      } else {
        rmSync(join(parent, base.slice(4)), { recursive: true, force: true });
      }
    }
    execFileSync('tar', ['-xzpf', blob, '-C', root, '--numeric-owner', '--same-owner', '--exclude=.wh.*']);
  }
  return root;
}

export interface RunInImageOptions {
  /** Added to (and overriding) the image's Env. */
  env?: Record<string, string>;
  /** Files written into the root before the run, by absolute path in the image (root-owned, 0644 unless mode). */
  files?: Record<string, string | { content: string; mode?: number; uid?: number; gid?: number }>;
  /** Host directories mounted read-write at absolute paths of the image, as a pod's volumes (emptyDir). */
  volumes?: Record<string, string>;
  /** The working directory in the image; the image's WorkingDir by default. */
  cwd?: string;
  /** `uid:gid`; the image's User by default. */
  user?: string;
  /** Replaces the image's Entrypoint (args then replace Cmd, as `docker run --entrypoint`). */
  entrypoint?: string[];
  /** The root file system read-only (default true), as readOnlyRootFilesystem. */
  readOnlyRoot?: boolean;
}

const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const hostCommands = new Map<string, string>();
/** A host command's absolute path (spawn and env look commands up in the PATH they are given: the image's). */
function hostCommand(name: string): string {
  let path = hostCommands.get(name);
  if (path === undefined) {
    path = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8', env: { PATH: HOST_PATH } }).trim();
    if (!path.startsWith('/')) throw new Error(`runInImage: ${name} not found on the host (util-linux, coreutils)`);
    hostCommands.set(name, path);
  }
  return path;
}

/** The `argv` an image config runs: Entrypoint + (args, or Cmd when none). */
export const imageArgv = (
  config: ImageRuntimeConfig,
  args?: readonly string[],
  entrypoint?: readonly string[],
): string[] => [...(entrypoint ?? config.Entrypoint), ...(args ?? (entrypoint ? [] : config.Cmd))];

/** Runs Entrypoint + args (Cmd when args are not given) in an unpacked root, as the image's user. */
export function runInImage(
  root: string,
  config: ImageRuntimeConfig,
  args: readonly string[] | undefined,
  options: RunInImageOptions = {},
): ChildProcess {
  for (const [path, file] of Object.entries(options.files ?? {})) {
    if (!path.startsWith('/')) throw new Error(`runInImage: ${path} is not an absolute path`);
    const spec = typeof file === 'string' ? { content: file } : file;
    const target = join(root, path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, spec.content, { mode: spec.mode ?? 0o644 });
    chmodSync(target, spec.mode ?? 0o644);
    chownSync(target, spec.uid ?? 0, spec.gid ?? 0);
  }
  const [uid, gid] = (options.user ?? config.User).split(':');
  const argv = imageArgv(config, args, options.entrypoint);
  const env = Object.fromEntries(config.Env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  Object.assign(env, options.env);
  const mounts: string[] = [];
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  if (options.readOnlyRoot ?? true)
    mounts.push(`mount --bind ${quote(root)} ${quote(root)}`, `mount -o remount,bind,ro ${quote(root)}`);
  for (const [path, hostDir] of Object.entries(options.volumes ?? {})) {
    if (!path.startsWith('/')) throw new Error(`runInImage: volume ${path} is not an absolute path`);
    mkdirSync(join(root, path), { recursive: true });
    mounts.push(`mount --bind ${quote(hostDir)} ${quote(join(root, path))}`);
  }
  // The image's PATH, not the host's (which the mounts above use), from `env` outside the root.
  const path = env.PATH === undefined ? ['-u', 'PATH'] : [`PATH=${env.PATH}`];
  const enter = [
    'exec',
    hostCommand('env'),
    ...path,
    hostCommand('unshare'),
    `--root=${root}`,
    `--wd=${options.cwd ?? config.WorkingDir ?? '/'}`,
    `--setgid=${gid ?? uid}`,
    `--setuid=${uid}`,
    '--',
    ...argv,
  ]
    .map(quote)
    .join(' ');
  // The host's sh and util-linux run the mounts in a new mount namespace, then become the image's process, with
  // the image's environment only.
  const script = [...mounts, enter].join(' && ');
  return spawn(hostCommand('unshare'), ['--mount', '--propagation', 'private', hostCommand('sh'), '-c', script], {
    env: { ...env, PATH: HOST_PATH },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}
