/**
 * Pushes an OCI image layout to a registry over the OCI distribution API, without a container daemon: every blob the
 * registry lacks (HEAD, then a monolithic POST + PUT upload), then the manifest under the tag. A loopback registry
 * (127.0.0.0/8, ::1, localhost) is spoken to over plain HTTP, as Docker and containerd treat it; every other one over
 * HTTPS with the system's trust store (TLS verified). Credentials, when the registry asks for them, come from the file
 * `docker login` and `podman login` write (the `auths` entry of the registry's host; credential helpers are not run).
 */
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface ImageReference {
  registry: string;
  repository: string;
  tag: string;
}

const REPOSITORY = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const REGISTRY = /^(?:localhost|\[[0-9a-fA-F:]+\]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)(?::\d{1,5})?$/;

/** `HOST[:PORT]/REPOSITORY[:TAG]` (tag `latest` when absent); the host must be named, as `docker push` would need. */
export function parseImageReference(text: string): ImageReference {
  const fail = (why: string): never => {
    throw new Error(`--push ${JSON.stringify(text)}: ${why}`);
  };
  if (text.length > 512) fail('longer than 512 characters');
  if (text.includes('@')) fail('push needs a tag, not a digest');
  const slash = text.indexOf('/');
  const registry = slash > 0 ? text.slice(0, slash) : '';
  if (!registry || !(registry.includes('.') || registry.includes(':') || registry === 'localhost')) {
    fail('name the registry: HOST[:PORT]/REPOSITORY[:TAG], e.g. 127.0.0.1:5000/vault-rollout:dev');
  }
  if (!REGISTRY.test(registry)) fail(`${JSON.stringify(registry)} is not a registry host[:port]`);
  const rest = text.slice(slash + 1);
  const colon = rest.lastIndexOf(':');
  const repository = colon > rest.lastIndexOf('/') && colon >= 0 ? rest.slice(0, colon) : rest;
  const tag = repository === rest ? 'latest' : rest.slice(colon + 1);
  if (!REPOSITORY.test(repository))
    fail(`${JSON.stringify(repository)} is not a repository name (lower case, digits, . _ - /)`);
  if (!TAG.test(tag)) fail(`${JSON.stringify(tag)} is not a tag (letters, digits, . _ -, at most 128)`);
  return { registry, repository, tag };
}

/** Plain HTTP for a registry on loopback only. */
export function registryBaseUrl(registry: string): string {
  const host = registry.replace(/:\d+$/, '');
  const loopback = host === 'localhost' || host === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(host);
  return `${loopback ? 'http' : 'https'}://${registry}`;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}
interface LayoutImage {
  manifest: Descriptor;
  manifestBytes: Buffer;
  blobs: Descriptor[];
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const blobFile = (layout: string, digest: string): string => join(layout, 'blobs', 'sha256', digest.slice(7));

/** The layout's one manifest (an image index of one manifest, as tools/image/build.ts writes it) and its blobs. */
export async function readLayoutImage(layout: string): Promise<LayoutImage> {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { manifests?: Descriptor[] };
  if (index.manifests?.length !== 1)
    throw new Error(`${layout}/index.json: expected one manifest, found ${index.manifests?.length ?? 0}`);
  const manifest = index.manifests[0]!;
  if (!DIGEST.test(manifest.digest))
    throw new Error(`${layout}/index.json: manifest digest ${manifest.digest} is not sha256`);
  const manifestBytes = await readFile(blobFile(layout, manifest.digest));
  const parsed = JSON.parse(manifestBytes.toString('utf8')) as { config?: Descriptor; layers?: Descriptor[] };
  if (!parsed.config || !Array.isArray(parsed.layers))
    throw new Error(`${layout}: manifest ${manifest.digest} has no config or layers`);
  const blobs = [parsed.config, ...parsed.layers];
  for (const b of blobs)
    if (!DIGEST.test(b.digest)) throw new Error(`${layout}: blob digest ${b.digest} is not sha256`);
  return { manifest, manifestBytes, blobs };
}

/** `user:password` for a registry host from the login files, or undefined. */
export async function registryCredentials(
  registry: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  const files = [
    env.REGISTRY_AUTH_FILE,
    env.XDG_RUNTIME_DIR ? join(env.XDG_RUNTIME_DIR, 'containers', 'auth.json') : undefined,
    join(env.DOCKER_CONFIG ?? join(env.HOME ?? homedir(), '.docker'), 'config.json'),
  ].filter((f): f is string => f !== undefined);
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch {
      continue;
    }
    const auths = (JSON.parse(text) as { auths?: Record<string, { auth?: string }> }).auths ?? {};
    const entry = auths[registry] ?? auths[`https://${registry}`];
    if (entry?.auth) return Buffer.from(entry.auth, 'base64').toString('utf8');
  }
  return undefined;
}

const ERROR_BODY_LIMIT = 2048;
async function failure(what: string, res: Response): Promise<Error> {
  const body = (await res.text().catch(() => '')).slice(0, ERROR_BODY_LIMIT);
  return new Error(`${what}: HTTP ${res.status}${body ? ` ${body.trim()}` : ''}`);
}

/** The parameters of a `WWW-Authenticate: Bearer realm="…",service="…"` challenge. */
export function parseChallenge(header: string): { scheme: string; params: Record<string, string> } {
  const scheme = header.trim().split(/\s+/, 1)[0]?.toLowerCase() ?? '';
  const params: Record<string, string> = {};
  for (const m of header.matchAll(/([a-zA-Z_]+)="([^"]*)"/g)) params[m[1]!.toLowerCase()] = m[2]!;
  return { scheme, params };
}

export interface PushOptions {
  env?: NodeJS.ProcessEnv;
  log?: (line: string) => void;
  /** Per request; a blob upload gets ten times as long. */
  timeoutMs?: number;
}

class RegistrySession {
  private authorization: string | undefined;
  private readonly ref: ImageReference;
  private readonly base: string;
  private readonly opts: PushOptions;
  constructor(ref: ImageReference, base: string, opts: PushOptions) {
    this.ref = ref;
    this.base = base;
    this.opts = opts;
  }

  async request(
    method: string,
    path: string,
    init: { body?: Buffer; headers?: Record<string, string>; long?: boolean } = {},
  ): Promise<Response> {
    const url = path.startsWith('http') ? path : `${this.base}${path}`;
    const timeout = (this.opts.timeoutMs ?? 60_000) * (init.long ? 10 : 1);
    const send = () =>
      fetch(url, {
        method,
        redirect: 'follow',
        signal: AbortSignal.timeout(timeout),
        headers: { ...init.headers, ...(this.authorization ? { authorization: this.authorization } : {}) },
        ...(init.body ? { body: init.body } : {}),
      });
    const res = await send();
    if (res.status !== 401 || this.authorization) return res;
    await res.body?.cancel();
    await this.authenticate(res.headers.get('www-authenticate') ?? '');
    return send();
  }

  private async authenticate(header: string): Promise<void> {
    const where = `${this.ref.registry} asks for credentials`;
    const credentials = await registryCredentials(this.ref.registry, this.opts.env);
    if (credentials === undefined) {
      throw new Error(
        `${where}: log in first (docker login / podman login ${this.ref.registry}); credential helpers are not read`,
      );
    }
    const { scheme, params } = parseChallenge(header);
    const basic = `Basic ${Buffer.from(credentials).toString('base64')}`;
    if (scheme === 'basic') {
      this.authorization = basic;
      return;
    }
    if (scheme !== 'bearer' || !params.realm)
      throw new Error(`${where} with an unsupported challenge: ${header.slice(0, 200)}`);
    const url = new URL(params.realm);
    if (url.protocol !== 'https:' && !registryBaseUrl(url.host).startsWith('http:'))
      throw new Error(`${where}: token realm ${url.origin} is not HTTPS`);
    if (params.service) url.searchParams.set('service', params.service);
    url.searchParams.set('scope', `repository:${this.ref.repository}:pull,push`);
    const res = await fetch(url, {
      headers: { authorization: basic },
      signal: AbortSignal.timeout(this.opts.timeoutMs ?? 60_000),
    });
    if (!res.ok) throw await failure(`${this.ref.registry}: token from ${url.origin}`, res);
    const body = JSON.parse((await res.text()).slice(0, 64 * 1024)) as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (!token) throw new Error(`${this.ref.registry}: the token endpoint ${url.origin} answered no token`);
    this.authorization = `Bearer ${token}`;
  }
}

/** Pushes the layout's image as REGISTRY/REPOSITORY:TAG; returns the manifest digest the registry holds. */
export async function pushLayout(
  layout: string,
  reference: string,
  opts: PushOptions = {},
): Promise<{ reference: string; digest: string }> {
  const ref = parseImageReference(reference);
  const image = await readLayoutImage(layout);
  const log = opts.log ?? (() => {});
  const session = new RegistrySession(ref, registryBaseUrl(ref.registry), opts);
  const repo = `/v2/${ref.repository}`;
  for (const blob of image.blobs) {
    const head = await session.request('HEAD', `${repo}/blobs/${blob.digest}`);
    if (head.ok) {
      log(`${blob.digest.slice(7, 19)}: already there`);
      continue;
    }
    const start = await session.request('POST', `${repo}/blobs/uploads/`);
    const location = start.headers.get('location');
    await start.body?.cancel();
    if (start.status !== 202 || !location)
      throw await failure(`${ref.registry}: starting the upload of ${blob.digest}`, start);
    const target = new URL(location, registryBaseUrl(ref.registry));
    target.searchParams.set('digest', blob.digest);
    const data = await readFile(blobFile(layout, blob.digest));
    const put = await session.request('PUT', target.href, {
      body: data,
      long: true,
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(data.length) },
    });
    if (put.status !== 201) throw await failure(`${ref.registry}: uploading ${blob.digest}`, put);
    await put.body?.cancel();
    log(`${blob.digest.slice(7, 19)}: pushed ${data.length} bytes`);
  }
  const res = await session.request('PUT', `${repo}/manifests/${ref.tag}`, {
    body: image.manifestBytes,
    headers: { 'content-type': image.manifest.mediaType },
  });
  if (res.status !== 201)
    throw await failure(`${ref.registry}: putting the manifest ${ref.repository}:${ref.tag}`, res);
  await res.body?.cancel();
  const digest = res.headers.get('docker-content-digest') ?? image.manifest.digest;
  if (digest !== image.manifest.digest)
    throw new Error(`${ref.registry} stored the manifest as ${digest}, not ${image.manifest.digest}`);
  return { reference: `${ref.registry}/${ref.repository}:${ref.tag}`, digest };
}
