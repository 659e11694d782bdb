/**
 * Runs an applied pod's container the way a kubelet would, without a kubelet: kwok pods do not run, so the chart's
 * end-to-end test reads the Pod back from the API server, materialises its volumes (ConfigMaps, Secret items, the
 * projected ServiceAccount token through the TokenRequest API, persistent and emptyDir volumes as directories) and
 * its environment (secretKeyRef, configMapKeyRef and literal values, plus the kubelet's KUBERNETES_SERVICE_HOST and
 * _PORT), then hands command, args, environment and files to a `ContainerRunner`.
 *
 * `imageRunner` runs it from the container image (test/image/image.ts): the image's root, the volumes bound at their
 * mount paths in a mount namespace of its own, the pod's user. Only the pod network is stood in for: `--host 0.0.0.0`
 * becomes loopback and `--port` a free port. `exec` runs a command in the same container as `kubectl exec` would.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { KubeClient } from '../clusters/kube-http.ts';
import { runInImage, type ImageConfig } from '../image/image.ts';

type ImageRuntimeConfig = ImageConfig['config'];

interface KeyToPath {
  key: string;
  path: string;
  mode?: number;
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}
interface ProjectionSource {
  serviceAccountToken?: { path: string; audience?: string; expirationSeconds?: number };
  configMap?: { name: string; items?: KeyToPath[] };
  secret?: { name: string; items?: KeyToPath[] };
  downwardAPI?: { items: Array<{ path: string; fieldRef?: { fieldPath: string } }> };
}
interface Volume {
  name: string;
  configMap?: { name: string; items?: KeyToPath[] };
  secret?: { secretName: string; items?: KeyToPath[] };
  projected?: { sources: ProjectionSource[] };
  emptyDir?: object;
  persistentVolumeClaim?: { claimName: string };
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
export interface PodView {
  metadata: { name: string; namespace: string; uid: string };
  spec: {
    serviceAccountName?: string;
    containers: Container[];
    volumes?: Volume[];
    securityContext?: { runAsUser?: number; runAsGroup?: number; fsGroup?: number };
  };
}

/** What the kubelet would start: the container's command and args, its environment, and its mounts as files. */
export interface ContainerSpec {
  /** The pod's command, or undefined for the image's entrypoint. */
  command: string[] | undefined;
  args: string[];
  env: Record<string, string>;
  /** The materialised mounts: mount path → directory holding what the volume shows there. */
  mounts: Record<string, string>;
  /** Mount paths of volumes the container may write (emptyDir, a claim's volume, not mounted read-only). */
  writable: string[];
  /** The pod's securityContext: who the process runs as, and the group its volumes are given to. */
  securityContext: { runAsUser?: number; runAsGroup?: number; fsGroup?: number };
}

export interface RunningContainer {
  /** Resolves with the loopback port once the process says it listens. */
  listening: Promise<number>;
  stderr: () => string;
  stop: () => Promise<void>;
}

/** What an exec'd command left: its exit code and output. */
export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface ContainerRunner {
  start: (spec: ContainerSpec) => Promise<RunningContainer>;
  /**
   * Runs `argv` in the container of `spec` as `kubectl exec POD -- argv…` does: no shell, argv[0] looked up on the
   * image's PATH, with the container's environment, user, working directory and volumes (the same host directories
   * as the started container, so it sees the state serve writes).
   */
  exec: (spec: ContainerSpec, argv: string[]) => Promise<ExecResult>;
}

async function getJson<T>(kube: KubeClient, path: string): Promise<T> {
  const res = await kube.request('GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return res.body as T;
}

async function dataOf(
  kube: KubeClient,
  ns: string,
  kind: 'configmaps' | 'secrets',
  name: string,
): Promise<Record<string, Buffer>> {
  const obj = await getJson<{ data?: Record<string, string> }>(kube, `/api/v1/namespaces/${ns}/${kind}/${name}`);
  return Object.fromEntries(
    Object.entries(obj.data ?? {}).map(([k, v]) => [k, kind === 'secrets' ? Buffer.from(v, 'base64') : Buffer.from(v)]),
  );
}

function writeItems(dir: string, data: Record<string, Buffer>, items: KeyToPath[] | undefined, mode: number): void {
  const chosen: KeyToPath[] = items ?? Object.keys(data).map((key) => ({ key, path: key }));
  for (const item of chosen) {
    const content = data[item.key];
    if (content === undefined) throw new Error(`volume item ${item.key} is not in its source`);
    const file = join(dir, item.path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, content, { mode: item.mode ?? mode });
  }
}

function field(pod: PodView, path: string): string {
  if (path === 'metadata.namespace') return pod.metadata.namespace;
  if (path === 'metadata.name') return pod.metadata.name;
  throw new Error(`fieldRef ${path} is not supported by the pod runner`);
}

/**
 * Materialises one container of the applied pod under a new temporary root. `server` is the API server the pod's
 * in-cluster environment points at (KUBERNETES_SERVICE_HOST/PORT); tokens come from TokenRequest, bound to the pod.
 */
export async function materialisePod(
  kube: KubeClient,
  pod: PodView,
  containerName: string,
  server: string,
): Promise<{ spec: ContainerSpec; root: string }> {
  const ns = pod.metadata.namespace;
  const container = pod.spec.containers.find((c) => c.name === containerName);
  if (!container) throw new Error(`pod ${pod.metadata.name} has no container ${containerName}`);
  const root = mkdtempSync(join(tmpdir(), 'vr-pod-'));
  const volumes = new Map((pod.spec.volumes ?? []).map((v) => [v.name, v]));
  const mounts: Record<string, string> = {};
  const writable: string[] = [];
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes.get(mount.name);
    if (!volume) throw new Error(`volumeMount ${mount.name} names no volume`);
    const dir = join(root, mount.mountPath);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (volume.configMap)
      writeItems(dir, await dataOf(kube, ns, 'configmaps', volume.configMap.name), volume.configMap.items, 0o644);
    else if (volume.secret)
      writeItems(dir, await dataOf(kube, ns, 'secrets', volume.secret.secretName), volume.secret.items, 0o400);
    else if (volume.projected) {
      for (const source of volume.projected.sources) {
        if (source.serviceAccountToken) {
          const sa = pod.spec.serviceAccountName ?? 'default';
          const res = await kube.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
            body: {
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenRequest',
              spec: {
                expirationSeconds: source.serviceAccountToken.expirationSeconds ?? 3600,
                ...(source.serviceAccountToken.audience ? { audiences: [source.serviceAccountToken.audience] } : {}),
                boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
              },
            },
          });
          if (res.status !== 201) throw new Error(`TokenRequest for ${ns}/${sa}: HTTP ${res.status}`);
          writeItems(
            dir,
            { token: Buffer.from((res.body as { status: { token: string } }).status.token) },
            [{ key: 'token', path: source.serviceAccountToken.path }],
            0o400,
          );
        } else if (source.configMap)
          writeItems(dir, await dataOf(kube, ns, 'configmaps', source.configMap.name), source.configMap.items, 0o444);
        else if (source.secret)
          writeItems(dir, await dataOf(kube, ns, 'secrets', source.secret.name), source.secret.items, 0o400);
        else if (source.downwardAPI) {
          for (const item of source.downwardAPI.items) {
            if (!item.fieldRef) throw new Error('downwardAPI resourceFieldRef is not supported by the pod runner');
            writeItems(
              dir,
              { v: Buffer.from(field(pod, item.fieldRef.fieldPath)) },
              [{ key: 'v', path: item.path }],
              0o444,
            );
          }
        } else throw new Error(`projected source ${Object.keys(source).join(',')} is not supported by the pod runner`);
      }
    } else if (volume.emptyDir || volume.persistentVolumeClaim) {
      // A fresh directory: an empty volume, or a claim's volume the first time it is mounted.
      if (!mount.readOnly) writable.push(mount.mountPath);
    } else throw new Error(`volume ${volume.name}: its type is not supported by the pod runner`);
    if (mount.readOnly) chmodSync(dir, 0o500);
    mounts[mount.mountPath] = dir;
  }
  const url = new URL(server);
  const env: Record<string, string> = {
    KUBERNETES_SERVICE_HOST: url.hostname,
    KUBERNETES_SERVICE_PORT: url.port || '443',
  };
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) {
      const value = (await dataOf(kube, ns, 'secrets', e.valueFrom.secretKeyRef.name))[e.valueFrom.secretKeyRef.key];
      if (value === undefined)
        throw new Error(
          `env ${e.name}: key ${e.valueFrom.secretKeyRef.key} is not in Secret ${e.valueFrom.secretKeyRef.name}`,
        );
      env[e.name] = value.toString();
    } else if (e.valueFrom?.configMapKeyRef) {
      const value = (await dataOf(kube, ns, 'configmaps', e.valueFrom.configMapKeyRef.name))[
        e.valueFrom.configMapKeyRef.key
      ];
      if (value === undefined)
        throw new Error(
          `env ${e.name}: key ${e.valueFrom.configMapKeyRef.key} is not in ConfigMap ${e.valueFrom.configMapKeyRef.name}`,
        );
      env[e.name] = value.toString();
    } else if (e.valueFrom?.fieldRef) env[e.name] = field(pod, e.valueFrom.fieldRef.fieldPath);
    else throw new Error(`env ${e.name}: its source is not supported by the pod runner`);
  }
  return {
    spec: {
      command: container.command,
      args: container.args ?? [],
      env,
      mounts,
      writable,
      securityContext: pod.spec.securityContext ?? {},
    },
    root,
  };
}

export function removeRoot(root: string): void {
  // Read-only mounts were made 0500: give them back to the owner so the tree can be removed.
  execFileSync('chmod', ['-R', 'u+rwx', root]);
  rmSync(root, { recursive: true, force: true });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * The container image itself as the container (test/image/image.ts): its unpacked root, read-only, the pod's volumes
 * bound at their mount paths, the pod's user and command; what the kubelet does for `fsGroup` done here (every volume
 * given to the group and readable by it, the writable ones writable by it). Only the network is the host's: `--host`
 * becomes loopback and `--port` a free port.
 */
export function imageRunner(root: string, config: ImageRuntimeConfig): ContainerRunner {
  return {
    async start(spec) {
      const port = await freePort();
      const args = [...spec.args];
      for (let i = 0; i < args.length - 1; i += 1) {
        if (args[i] === '--host') args[i + 1] = '127.0.0.1';
        if (args[i] === '--port') args[i + 1] = String(port);
      }
      const { runAsUser, runAsGroup, fsGroup } = spec.securityContext;
      if (fsGroup !== undefined) {
        for (const [mountPath, dir] of Object.entries(spec.mounts)) {
          execFileSync('chgrp', ['-R', String(fsGroup), dir]);
          execFileSync('chmod', ['-R', spec.writable.includes(mountPath) ? 'g+rwX' : 'g+rX', dir]);
        }
      }
      const user = runAsUser === undefined ? undefined : `${runAsUser}:${runAsGroup ?? runAsUser}`;
      const child = runInImage(root, config, args, {
        env: spec.env,
        volumes: spec.mounts,
        ...(user ? { user } : {}),
        ...(spec.command ? { entrypoint: spec.command } : {}),
      });
      return watchListening(child, port);
    },
    async exec(spec, argv) {
      const { runAsUser, runAsGroup } = spec.securityContext;
      const user = runAsUser === undefined ? undefined : `${runAsUser}:${runAsGroup ?? runAsUser}`;
      // The exec'd argv replaces the entrypoint and takes no arguments of the image's Cmd.
      const child = runInImage(root, config, [], {
        env: spec.env,
        volumes: spec.mounts,
        entrypoint: argv,
        ...(user ? { user } : {}),
      });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
    },
  };
}

/** A started container: listening once its log says so on `port`; stopped with SIGTERM (SIGKILL after 15 s). */
function watchListening(child: ChildProcess, port: number): RunningContainer {
  let err = '';
  const listening = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the container did not listen in 120 s:\n${err}`)), 120_000);
    const onData = (d: Buffer) => {
      err += d.toString();
      if (err.includes(`listening on http://127.0.0.1:${port}`)) {
        clearTimeout(timer);
        resolve(port);
      }
    };
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    child.once('exit', (code) => (clearTimeout(timer), reject(new Error(`the container exited ${code}:\n${err}`))));
  });
  listening.catch(() => undefined);
  return {
    listening,
    stderr: () => err,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const forced = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(forced);
    },
  };
}
