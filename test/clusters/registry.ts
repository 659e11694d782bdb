// The test clusters' OCI registry: Distribution's registry from Debian's docker-registry package, one per lane on
// 127.0.0.1 (port base+2), its storage under the lane's clusters directory (kept across `down`, so a warm `up` pushes
// nothing twice). `npm run image -- --push 127.0.0.1:<port>/<repo>:<tag>` pushes the vault-rollout image there; the
// real node (real-node.ts) pulls through its link to the host. And the test images, built here from Debian's static
// busybox on an empty base: `pause` (the pod sandbox: it sleeps) and `busybox` (a shell for the consumer workloads).
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

import { MEDIA, layerTar } from '../../tools/image/build.ts';
import { sha256 } from '../../tools/image/deb.ts';
import { pushLayout } from '../../tools/image/push.ts';
import { CLUSTERS_DIR, waitFor } from './kube-http.ts';
import { DiedError, httpGet, isAlive, rethrowWithLog, startProcess, type Managed } from './processes.ts';

export const REGISTRY_BINARY = '/usr/bin/docker-registry';
const REGISTRY_DIR = join(CLUSTERS_DIR, 'registry');
const BUSYBOX = '/bin/busybox';

export function registryProcess(): Managed {
  return {
    label: 'registry',
    binary: REGISTRY_BINARY,
    pidFile: join(REGISTRY_DIR, 'registry.pid'),
    logFile: join(REGISTRY_DIR, 'registry.log'),
  };
}

/** Starts the registry on 127.0.0.1:port and waits for its /v2/; returns HOST:PORT. */
export async function startRegistry(port: number): Promise<string> {
  const address = `127.0.0.1:${port}`;
  mkdirSync(join(REGISTRY_DIR, 'data'), { recursive: true });
  const config = join(REGISTRY_DIR, 'config.yml');
  // A secret of its own each start (it signs upload state; one registry, so no other instance must share it).
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(REGISTRY_DIR, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: ${address}`,
      `  secret: ${randomBytes(24).toString('hex')}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  const p = registryProcess();
  const pid = startProcess(p, ['serve', config]);
  await waitFor(
    async () => {
      if (!isAlive(pid)) throw new DiedError(p);
      return (await httpGet(`http://${address}/v2/`).catch(() => ({ status: 0 }))).status === 200;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: `registry http://${address}/v2/` },
  ).catch(rethrowWithLog(p));
  return address;
}

/** The busybox version of Debian's busybox-static (`BusyBox v1.35.0 (Debian 1:1.35.0-4+b3) …` → `1.35.0`). */
function busyboxTag(): string {
  const head = readFileSync(BUSYBOX)
    .toString('latin1')
    .match(/BusyBox v(\d+\.\d+\.\d+)/);
  if (!head?.[1])
    throw new Error(`${BUSYBOX} does not say its BusyBox version (is Debian's busybox-static installed?)`);
  return head[1];
}

interface TestImage {
  name: string;
  tag: string;
  layout: string;
}

/** An OCI layout of one layer: /bin/busybox and the applets the tests call as links to it; `cmd` runs. */
function writeBusyboxLayout(dir: string, cmd: string[]): void {
  const files = [
    { path: '/bin/busybox', mode: 0o755, data: readFileSync(BUSYBOX) },
    ...['sh', 'sleep', 'cat', 'echo', 'env', 'nc'].map((a) => ({ path: `/bin/${a}`, mode: 0o777, target: 'busybox' })),
    { path: '/tmp', mode: 0o1777, dir: true },
  ];
  const tar = layerTar(files, 0);
  const layer = gzipSync(tar, { level: 9 });
  const blob = (data: Buffer) => ({ digest: `sha256:${sha256(data)}`, size: data.length, data });
  const layerBlob = blob(layer);
  const config = blob(
    Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: { Cmd: cmd, Env: ['PATH=/bin'], WorkingDir: '/' },
        rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(tar)}`] },
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA.manifest,
        config: { mediaType: MEDIA.config, digest: config.digest, size: config.size },
        layers: [{ mediaType: MEDIA.layer, digest: layerBlob.digest, size: layerBlob.size }],
      }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
  for (const b of [layerBlob, config, manifest]) writeFileSync(join(dir, 'blobs', 'sha256', b.digest.slice(7)), b.data);
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.index,
      manifests: [{ mediaType: MEDIA.manifest, digest: manifest.digest, size: manifest.size }],
    }),
  );
}

export interface TestImages {
  pause: string;
  busybox: string;
}

/** Builds the pause and busybox images and pushes them to the registry; returns their references. */
export async function pushTestImages(registry: string): Promise<TestImages> {
  const tag = busyboxTag();
  const images: TestImage[] = [
    { name: 'pause', tag, layout: join(REGISTRY_DIR, 'images', 'pause') },
    { name: 'busybox', tag, layout: join(REGISTRY_DIR, 'images', 'busybox') },
  ];
  writeBusyboxLayout(images[0]!.layout, ['/bin/sleep', '2147483647']);
  writeBusyboxLayout(images[1]!.layout, ['/bin/sh']);
  const refs = await Promise.all(
    images.map(
      async (i) => (await pushLayout(i.layout, `${registry}/vault-rollout-test/${i.name}:${i.tag}`)).reference,
    ),
  );
  return { pause: refs[0]!, busybox: refs[1]! };
}
