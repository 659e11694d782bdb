// A real Vault-compatible server for the tests: OpenBao (`bao`) or HashiCorp
// Vault community (`vault`) in dev mode (in-memory, unsealed, one root token)
// on a free 127.0.0.1 port, plus small fetch-based helpers for the KV, sys/audit,
// token and AppRole endpoints and the event WebSocket.
//
// Binaries come from test/vault/build-server.sh (cached outside the checkout,
// symlinked into .local/bin/). Nothing here ever prints the root token or a
// secret value: the token travels in the child's environment (not argv) and
// is redacted from the captured server output.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serversLedger } from '../lanes.ts';

export type ServerKind = 'openbao' | 'vault';

const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(HERE, '../..');
export const BUILD_SCRIPT = join(HERE, 'build-server.sh');
const BINARY: Record<ServerKind, string> = { openbao: 'bao', vault: 'vault' };

/** An audit device: `type` file | socket | syslog | http (OpenBao), options as the API takes them (strings). */
export interface AuditDevice {
  type: string;
  /** Mount path of the device (`sys/audit/<path>`). */
  path: string;
  description?: string;
  options: Record<string, string>;
}

export interface DevServerOptions {
  kind: ServerKind;
  /** Shorthand for a `file` audit device at path `file` writing JSON lines to this file. */
  auditFile?: string;
  /**
   * Audit devices present from the start. OpenBao: declared in a config file passed with `-config`
   * (OpenBao ≥ 2.4 refuses `sys/audit` API creation unless `unsafe_allow_api_audit_creation`);
   * Vault: enabled through the API right after start.
   */
  audit?: AuditDevice[];
  /** OpenBao: also allow `sys/audit` over the API (`unsafe_allow_api_audit_creation`). Default true. */
  allowApiAudit?: boolean;
  /** Run build-server.sh for this kind first (fast when cached). Default true. */
  build?: boolean;
  /** How long to wait for /v1/sys/health. Default 60 s. */
  startTimeoutMs?: number;
  /** Extra environment for the server process. */
  env?: Record<string, string>;
}

export interface DevServer {
  kind: ServerKind;
  /** `http://127.0.0.1:<port>` */
  addr: string;
  /** The root token. Never log it. */
  token: string;
  /** The server's version as /v1/sys/health reports it, e.g. `2.7.2`, `1.15.6`. */
  version: string;
  pid: number;
  /** Milliseconds from spawn to a healthy /v1/sys/health. */
  startupMs: number;
  client: VaultClient;
  /** The server's combined stdout/stderr so far, root token and unseal key redacted. */
  logs(): string;
  /** SIGTERM to the process group, SIGKILL after 10 s; resolves when the process is gone. */
  stop(): Promise<void>;
}

/** Builds (or reuses) the server binary; throws with the script's output when it fails. */
export async function ensureServerBinary(kind: ServerKind): Promise<string> {
  // Asynchronous: a cold Vault build takes minutes and must not block the test worker's event loop.
  const child = spawn('bash', [BUILD_SCRIPT, kind], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out = (out + chunk.toString('utf8')).slice(-64_000)));
  child.stderr.on('data', (chunk: Buffer) => (out = (out + chunk.toString('utf8')).slice(-64_000)));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((ok) =>
    child.once('close', (c, s) => ok([c, s])),
  );
  if (code !== 0) {
    throw new Error(
      `test/vault/build-server.sh ${kind} failed (exit ${code ?? signal}):\n${out.split('\n').slice(-40).join('\n')}`,
    );
  }
  return serverBinary(kind);
}

export function serverBinary(kind: ServerKind): string {
  const bin = join(REPO_ROOT, '.local', 'bin', BINARY[kind]);
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run bash test/vault/build-server.sh ${kind}`);
  return bin;
}

/** A free 127.0.0.1 port whose successor (the dev cluster listener) is free too. */
export async function freePortPair(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await listenOnce(0);
    if (port < 65535 && (await listenOnce(port + 1).catch(() => 0)) === port + 1) return port;
  }
  throw new Error('no free pair of ports on 127.0.0.1');
}

function listenOnce(port: number): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once('error', fail);
    srv.listen(port, '127.0.0.1', () => {
      const address = srv.address();
      const p = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => ok(p));
    });
  });
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) if (child.pid !== undefined) tryKill(-child.pid, 'SIGKILL');
  });
}

function tryKill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const { kind } = options;
  const bin = options.build === false ? serverBinary(kind) : await ensureServerBinary(kind);
  const token = `dev-${randomBytes(16).toString('hex')}`;
  const audit: AuditDevice[] = [...(options.audit ?? [])];
  if (options.auditFile) audit.unshift({ type: 'file', path: 'file', options: { file_path: options.auditFile } });

  let lastError: unknown;
  // A port can be taken between freePortPair() and the server's bind: retry.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePortPair();
    try {
      return await startOnce(kind, bin, port, token, audit, options);
    } catch (error) {
      lastError = error;
      if (!String(error).includes('address already in use')) break;
    }
  }
  throw lastError;
}

async function startOnce(
  kind: ServerKind,
  bin: string,
  port: number,
  token: string,
  audit: AuditDevice[],
  options: DevServerOptions,
): Promise<DevServer> {
  const work = mkdtempSync(join(tmpdir(), `vault-rollout-${kind}-`));
  const addr = `http://127.0.0.1:${port}`;
  const args = ['server', '-dev', '-dev-no-store-token', `-dev-listen-address=127.0.0.1:${port}`];
  if (kind === 'openbao') {
    // Declarative audit devices (OpenBao's answer to CVE-2025-54997); JSON is valid config syntax.
    const config: Record<string, unknown> = {
      unsafe_allow_api_audit_creation: options.allowApiAudit !== false,
      disable_mlock: true,
    };
    if (audit.length > 0) {
      config.audit = audit.map((d) => ({
        [d.type]: { [d.path]: { description: d.description ?? '', options: d.options } },
      }));
    }
    const configFile = join(work, 'config.json');
    writeFileSync(configFile, JSON.stringify(config, null, 2), { mode: 0o600 });
    args.push(`-config=${configFile}`);
  }
  const prefix = kind === 'openbao' ? 'BAO' : 'VAULT';
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: work, // no token helper file in the real HOME
    TMPDIR: work,
    [`${prefix}_DEV_ROOT_TOKEN_ID`]: token,
    [`${prefix}_LOG_LEVEL`]: 'info',
    ...options.env,
  };

  const started = performance.now();
  const child = spawn(bin, args, { cwd: work, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  installExitHook();
  // The 'exit' hook does not run when this process is killed by a signal (a test runner's timeout):
  // a watchdog reads a pipe from us and kills the server's process group when the pipe closes.
  const watchdog =
    child.pid === undefined
      ? undefined
      : spawn(
          'bash',
          ['-c', 'while read -r _; do :; done; kill -KILL -- "-$1" 2>/dev/null', 'watchdog', String(child.pid)],
          {
            detached: true,
            stdio: ['pipe', 'ignore', 'ignore'],
          },
        );
  watchdog?.unref();
  (watchdog?.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  let output = '';
  const redact = (text: string): string =>
    text
      .split(token)
      .join('<root-token>')
      .replace(/(Unseal Key:\s*)\S+/g, '$1<redacted>');
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exitPromise = new Promise<void>((ok) => {
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      live.delete(child);
      ok();
    });
  });
  child.once('error', (error) => (output += `\nspawn error: ${error.message}\n`));

  const logs = (): string => redact(output);
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (!stopped) {
      stopped = true;
      if (!exited && child.pid !== undefined) {
        tryKill(-child.pid, 'SIGTERM');
        const timer = setTimeout(() => child.pid !== undefined && tryKill(-child.pid, 'SIGKILL'), 10_000);
        await exitPromise;
        clearTimeout(timer);
        // Anything left in the group (there should be nothing): kill it too.
        tryKill(-child.pid, 'SIGKILL');
      }
      if (watchdog?.pid !== undefined) tryKill(watchdog.pid, 'SIGKILL');
      rmSync(work, { recursive: true, force: true });
    }
    await exitPromise;
  };

  const client = new VaultClient(addr, token);
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  let version: string | undefined;
  try {
    for (;;) {
      if (exited) {
        throw new Error(
          `${kind} dev server exited (${exited.code ?? exited.signal}) before becoming healthy:\n${tail(logs())}`,
        );
      }
      const health = await fetch(`${addr}/v1/sys/health`, { signal: AbortSignal.timeout(2_000) }).catch(
        () => undefined,
      );
      if (health?.status === 200) {
        const body = (await health.json()) as { version?: string; sealed?: boolean };
        if (!body.sealed) {
          version = body.version ?? '';
          break;
        }
      } else if (health) {
        await health.body?.cancel();
      }
      if (Date.now() > deadline) throw new Error(`${kind} dev server not healthy at ${addr} in time:\n${tail(logs())}`);
      await sleep(100);
    }
    if (kind === 'vault') {
      for (const device of audit)
        await client.enableAudit(device.path, device.type, device.options, device.description);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  recordServerUse(kind, version ?? '');
  return {
    kind,
    addr,
    token,
    version: version ?? '',
    pid: child.pid ?? -1,
    startupMs: Math.round(performance.now() - started),
    client,
    logs,
    stop,
  };
}

function tail(text: string, lines = 30): string {
  return text.split('\n').slice(-lines).join('\n');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((ok) => setTimeout(ok, ms));
}

/** Resident set size of a process in KiB (Linux /proc), or undefined. */
export function rssKiB(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- client ---

/** A Vault API response body: the usual envelope. */
export interface VaultResponse {
  request_id?: string;
  data?: Record<string, unknown> | null;
  auth?: Record<string, unknown> | null;
  warnings?: string[] | null;
  errors?: string[];
  [key: string]: unknown;
}

export class VaultError extends Error {
  readonly status: number;
  readonly errors: string[];
  constructor(method: string, path: string, status: number, errors: string[]) {
    super(`${method} /v1/${path}: HTTP ${status}: ${errors.join('; ') || 'no error message'}`);
    this.name = 'VaultError';
    this.status = status;
    this.errors = errors;
  }
}

export interface RequestOptions {
  /** Another token than the client's. */
  token?: string;
  /** Statuses that are returned instead of thrown (e.g. 404 for a read). */
  allow?: number[];
  contentType?: string;
}

export interface KvWriteOptions {
  /** KV v2 check-and-set. */
  cas?: number;
}

/**
 * Plain-fetch Vault/OpenBao client for the tests. Errors carry the server's error messages but
 * never the request body (which may hold secret values) nor the token.
 */
export class VaultClient {
  readonly addr: string;
  readonly #token: string;

  constructor(addr: string, token: string) {
    this.addr = addr;
    this.#token = token;
  }

  /** Same server, another token. */
  withToken(token: string): VaultClient {
    return new VaultClient(this.addr, token);
  }

  async request(
    method: string,
    path: string,
    body?: unknown,
    options: RequestOptions = {},
  ): Promise<{ status: number; body: VaultResponse }> {
    const headers: Record<string, string> = { 'X-Vault-Token': options.token ?? this.#token };
    if (body !== undefined) headers['Content-Type'] = options.contentType ?? 'application/json';
    const response = await fetch(`${this.addr}/v1/${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    let parsed: VaultResponse = {};
    if (text.trim() !== '') {
      try {
        parsed = JSON.parse(text) as VaultResponse;
      } catch {
        parsed = { errors: [`non-JSON response (${text.length} bytes)`] };
      }
    }
    if (response.status >= 400 && !(options.allow ?? []).includes(response.status)) {
      throw new VaultError(method, path, response.status, parsed.errors ?? []);
    }
    return { status: response.status, body: parsed };
  }

  async get(path: string, options?: RequestOptions): Promise<VaultResponse> {
    return (await this.request('GET', path, undefined, options)).body;
  }
  async post(path: string, body: unknown = {}, options?: RequestOptions): Promise<VaultResponse> {
    return (await this.request('POST', path, body, options)).body;
  }
  async delete(path: string, options?: RequestOptions): Promise<VaultResponse> {
    return (await this.request('DELETE', path, undefined, options)).body;
  }
  /** LIST as `GET ?list=true`. Returns the keys, [] when there is nothing. */
  async list(path: string): Promise<string[]> {
    const { status, body } = await this.request('GET', `${path}?list=true`, undefined, { allow: [404] });
    if (status === 404) return [];
    return ((body.data?.keys as string[] | undefined) ?? []).slice();
  }

  // ------------------------------------------------------------------ sys ---

  /** Mounts a KV engine at `path` (KV v1 or v2) and waits until it answers. */
  async enableKv(path: string, version: 1 | 2, description = ''): Promise<void> {
    await this.post(`sys/mounts/${path}`, { type: 'kv', description, options: { version: String(version) } });
    if (version === 2) {
      // A new v2 mount answers "upgrading" for a moment; wait for its config endpoint.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const { status } = await this.request('GET', `${path}/config`, undefined, { allow: [400, 404, 500, 503] });
        if (status === 200) break;
        if (Date.now() > deadline) throw new Error(`KV v2 mount ${path} not ready`);
        await sleep(50);
      }
    }
  }

  async disableMount(path: string): Promise<void> {
    await this.delete(`sys/mounts/${path}`);
  }

  /**
   * Enables an audit device through the API (`sys/audit/<path>`). Vault: always allowed. OpenBao ≥ 2.4:
   * only when the server runs with `unsafe_allow_api_audit_creation` (startDevServer sets it unless
   * `allowApiAudit: false`); otherwise declare the device in `DevServerOptions.audit`.
   * - file: `{ file_path }`; socket: `{ address: '127.0.0.1:9090', socket_type: 'tcp' }`;
   * - http (OpenBao ≥ 2.5): `{ uri, headers: JSON.stringify({ Authorization: ['Bearer …'] }) }`.
   */
  async enableAudit(path: string, type: string, options: Record<string, string>, description = ''): Promise<void> {
    await this.post(`sys/audit/${path}`, { type, description, options });
  }

  async disableAudit(path: string): Promise<void> {
    await this.delete(`sys/audit/${path}`);
  }

  async listAudit(): Promise<Record<string, unknown>> {
    const body = await this.get('sys/audit');
    return (body.data ?? body) as Record<string, unknown>;
  }

  // ---------------------------------------------------------------- KV v2 ---

  /** Create or update (POST `<mount>/data/<key>`). `data.version` of the result is the new version. */
  async kv2Write(mount: string, key: string, data: Record<string, unknown>, options: KvWriteOptions = {}) {
    const body: Record<string, unknown> = { data };
    if (options.cas !== undefined) body.options = { cas: options.cas };
    return this.post(`${mount}/data/${key}`, body);
  }

  /** JSON merge patch of the current version (PATCH `<mount>/data/<key>`). */
  async kv2Patch(mount: string, key: string, data: Record<string, unknown>, options: KvWriteOptions = {}) {
    const body: Record<string, unknown> = { data };
    if (options.cas !== undefined) body.options = { cas: options.cas };
    return (await this.request('PATCH', `${mount}/data/${key}`, body, { contentType: 'application/merge-patch+json' }))
      .body;
  }

  /** Reads a version (default: the current one); undefined when there is none. */
  async kv2Read(mount: string, key: string, version?: number): Promise<VaultResponse | undefined> {
    const query = version === undefined ? '' : `?version=${version}`;
    const { status, body } = await this.request('GET', `${mount}/data/${key}${query}`, undefined, { allow: [404] });
    return status === 404 ? undefined : body;
  }

  async kv2List(mount: string, prefix = ''): Promise<string[]> {
    return this.list(`${mount}/metadata/${prefix}`);
  }

  /** Soft-deletes the current version (DELETE `<mount>/data/<key>`). */
  async kv2Delete(mount: string, key: string) {
    return this.delete(`${mount}/data/${key}`);
  }

  /** Soft-deletes the given versions (POST `<mount>/delete/<key>`). */
  async kv2DeleteVersions(mount: string, key: string, versions: number[]) {
    return this.post(`${mount}/delete/${key}`, { versions });
  }

  async kv2Undelete(mount: string, key: string, versions: number[]) {
    return this.post(`${mount}/undelete/${key}`, { versions });
  }

  /** Permanently removes the given versions' data (PUT `<mount>/destroy/<key>`). */
  async kv2Destroy(mount: string, key: string, versions: number[]) {
    return (await this.request('PUT', `${mount}/destroy/${key}`, { versions })).body;
  }

  /** Writes key metadata: `max_versions`, `cas_required`, `delete_version_after`, `custom_metadata`. */
  async kv2MetadataWrite(mount: string, key: string, metadata: Record<string, unknown>) {
    return this.post(`${mount}/metadata/${key}`, metadata);
  }

  async kv2MetadataRead(mount: string, key: string): Promise<VaultResponse | undefined> {
    const { status, body } = await this.request('GET', `${mount}/metadata/${key}`, undefined, { allow: [404] });
    return status === 404 ? undefined : body;
  }

  /** Deletes the key, all versions and metadata (DELETE `<mount>/metadata/<key>`). */
  async kv2MetadataDelete(mount: string, key: string) {
    return this.delete(`${mount}/metadata/${key}`);
  }

  // ---------------------------------------------------------------- KV v1 ---

  /** Create or update (POST `<mount>/<key>`); KV v1 has no versions. */
  async kv1Write(mount: string, key: string, data: Record<string, unknown>) {
    return this.post(`${mount}/${key}`, data);
  }

  async kv1Read(mount: string, key: string): Promise<VaultResponse | undefined> {
    const { status, body } = await this.request('GET', `${mount}/${key}`, undefined, { allow: [404] });
    return status === 404 ? undefined : body;
  }

  async kv1List(mount: string, prefix = ''): Promise<string[]> {
    return this.list(`${mount}/${prefix}`);
  }

  async kv1Delete(mount: string, key: string) {
    return this.delete(`${mount}/${key}`);
  }

  // ----------------------------------------------------- tokens, AppRole ---

  async writePolicy(name: string, policy: string): Promise<void> {
    await this.request('PUT', `sys/policies/acl/${name}`, { policy });
  }

  /** A child token; returns its client token and accessor. */
  async createToken(options: { policies?: string[]; ttl?: string; displayName?: string } = {}) {
    const body = await this.post('auth/token/create', {
      policies: options.policies,
      ttl: options.ttl ?? '1h',
      display_name: options.displayName,
    });
    const auth = body.auth as { client_token: string; accessor: string };
    return { token: auth.client_token, accessor: auth.accessor };
  }

  /** Enables AppRole (if needed), creates a role and returns its role_id and a fresh secret_id. */
  async createAppRole(role: string, policies: string[], mount = 'approle') {
    const auths = await this.get('sys/auth');
    const mounts = (auths.data ?? auths) as Record<string, unknown>;
    if (!(`${mount}/` in mounts)) await this.post(`sys/auth/${mount}`, { type: 'approle' });
    await this.post(`auth/${mount}/role/${role}`, { token_policies: policies, token_ttl: '1h' });
    const roleId = (await this.get(`auth/${mount}/role/${role}/role-id`)).data?.role_id as string;
    const secretId = (await this.post(`auth/${mount}/role/${role}/secret-id`)).data?.secret_id as string;
    return { roleId, secretId };
  }

  /** Logs in with AppRole and returns the token. */
  async appRoleLogin(roleId: string, secretId: string, mount = 'approle'): Promise<string> {
    const body = await this.post(`auth/${mount}/login`, { role_id: roleId, secret_id: secretId });
    return (body.auth as { client_token: string }).client_token;
  }

  // ----------------------------------------------------------- events ---

  /**
   * Subscribes to `sys/events/subscribe/<pattern>?json=true` (Vault ≥ 1.13; enabled by default in 1.15,
   * Enterprise-only from 1.16). The token goes in the `X-Vault-Token` header of the upgrade request
   * (Node's WebSocket accepts `headers`). Resolves once the socket is open.
   */
  async subscribeEvents(pattern: string, options: { filter?: string } = {}): Promise<EventSubscription> {
    const url = new URL(`${this.addr.replace(/^http/, 'ws')}/v1/sys/events/subscribe/${pattern}`);
    url.searchParams.set('json', 'true');
    if (options.filter) url.searchParams.set('filter', options.filter);
    const socket = new WebSocket(url, { headers: { 'X-Vault-Token': this.#token } });
    const subscription = new EventSubscription(socket);
    await new Promise<void>((ok, fail) => {
      socket.addEventListener('open', () => ok(), { once: true });
      socket.addEventListener('error', () => fail(new Error(`event subscription to ${pattern} failed`)), {
        once: true,
      });
    });
    return subscription;
  }
}

/** The JSON event notifications received on one WebSocket, raw text and parsed. */
export class EventSubscription {
  readonly raw: string[] = [];
  readonly events: Record<string, unknown>[] = [];
  readonly #socket: WebSocket;
  #waiters: (() => void)[] = [];

  constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (message: MessageEvent) => {
      const text =
        typeof message.data === 'string' ? message.data : Buffer.from(message.data as ArrayBuffer).toString();
      this.raw.push(text);
      this.events.push(JSON.parse(text) as Record<string, unknown>);
      for (const wake of this.#waiters.splice(0)) wake();
    });
    socket.addEventListener('close', () => {
      for (const wake of this.#waiters.splice(0)) wake();
    });
  }

  /** The first event (received so far or later) that matches, or throws after the timeout. */
  async waitFor(
    predicate: (event: Record<string, unknown>) => boolean,
    timeoutMs = 10_000,
  ): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(predicate);
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0 || this.#socket.readyState === WebSocket.CLOSED) {
        throw new Error(`no matching event within ${timeoutMs} ms (${this.events.length} received)`);
      }
      await new Promise<void>((ok) => {
        const timer = setTimeout(ok, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          ok();
        });
      });
    }
  }

  close(): Promise<void> {
    if (this.#socket.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((ok) => {
      this.#socket.addEventListener('close', () => ok(), { once: true });
      this.#socket.close();
    });
  }
}

// ------------------------------------------------------------ audit logs ---

/** Parses a JSON-lines audit file (missing file: []). */
export function readAuditFile(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Polls until `predicate` holds for the entries (audit writes are synchronous, so this is quick). */
export async function waitForEntries<T>(
  read: () => T[],
  predicate: (entries: T[]) => boolean,
  timeoutMs = 10_000,
): Promise<T[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const entries = read();
    if (predicate(entries)) return entries;
    if (Date.now() > deadline)
      throw new Error(`audit entries did not arrive in ${timeoutMs} ms (${entries.length} seen)`);
    await sleep(50);
  }
}

/**
 * Notes which server and version the running test file started, for the compatibility matrix (test/matrix.ts):
 * one JSON line per start in the lane's ledger. Outside a test file (the demo) there is nothing to note.
 */
function recordServerUse(kind: ServerKind, version: string): void {
  const file = process.env.VAULT_ROLLOUT_TEST_FILE;
  if (file === undefined || file === '') return;
  const ledger = serversLedger();
  mkdirSync(dirname(ledger), { recursive: true });
  appendFileSync(ledger, `${JSON.stringify({ file, server: kind === 'vault' ? 'Vault' : 'OpenBao', version })}\n`);
}
