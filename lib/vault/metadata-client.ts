/**
 * What vault-rollout reads from Vault: KV v2 METADATA only — `GET <mount>/metadata/<key>` (the current version and
 * when each version was created, deleted or destroyed) and `LIST <mount>/metadata/<prefix>` (to expand a route's
 * pattern) — never `data/`, so no secret value ever reaches this process. Works with Vault and OpenBao (the same
 * API), Enterprise namespaces through `X-Vault-Namespace`. Every mount, key and folder is checked before a request
 * is built from it (vault-path.ts: no `.`, `..`, empty or control-character segment), and every URL sent must resolve
 * under `<mount>/metadata/` (vault-request.ts `pathPrefix`): a record key a tenant wrote cannot point the token at
 * `data/` or `sys/`.
 *
 * A thin typed module rather than a client library: node-vault and hashi-vault-js wrap every endpoint (data reads
 * included) around request/axios, carry no types for these answers and no namespace-per-call; we need two
 * endpoints, redirects limited to Vault's own nodes and bounded answers, which vault-request.ts already gives.
 *
 * Retries: network errors, timeouts, 412 (a performance standby not yet caught up), 429 and 5xx, with jittered
 * backoff, a bounded number of attempts.
 *
 * Read-after-event: a call given a `vaultIndex` (a change's, from its event notification) sends it as `X-Vault-Index`,
 * on every attempt and redirect; a node that has not applied that index answers 412, which is retried like above —
 * Vault's "retry stale requests" mitigation (docs: enterprise/consistency), which holds for performance secondaries
 * too and adds no load on the active node. `X-Vault-Inconsistent: forward-active-node` is not sent: Vault honours
 * forwarding headers only where the operator enabled `allow_forwarding_via_header` (off by default), and forwarding
 * does nothing for a performance secondary. No index, no header. A 403 invalidates the token once (it may have expired:
 * a login source logs
 * in again) and then is a PermissionError naming the policy line to add.
 */
import { z } from 'zod';
import { abortableSleep, backoffDelayMs, type Sleep } from '../kernel/backoff.ts';
import type { VaultTokenSource } from './vault-auth.ts';
import type { VaultRedirectPolicy } from './vault-redirect.ts';
import { checkVaultPath } from '../sources/vault-path.ts';
import { isVaultIndex } from '../sources/vault-index.ts';
import { vaultErrors, vaultRequest, VaultRequestError } from './vault-request.ts';

export interface KvVersionMetadata {
  /** RFC 3339, as Vault stamps it (nanoseconds). */
  createdTime: string;
  /** When the version was soft-deleted (or is scheduled to be, `delete_version_after`); null when it is not. */
  deletionTime: string | null;
  destroyed: boolean;
}

export interface KvMetadata {
  namespace: string;
  mount: string;
  key: string;
  /** 0 when every version was removed (metadata kept). */
  currentVersion: number;
  oldestVersion: number;
  createdTime: string;
  updatedTime: string;
  /** By version number; Vault keeps at most `max_versions` of them. */
  versions: Record<number, KvVersionMetadata>;
}

export interface MetadataListing {
  /** Keys under the prefix as Vault lists them: a trailing `/` is a folder. At most `limit`. */
  keys: string[];
  /** Vault had more keys than the limit: the rest were left out (say so; never silently). */
  truncated: boolean;
  /** How many keys Vault listed. */
  total: number;
}

export interface MetadataCallOptions {
  /** Enterprise namespace (`X-Vault-Namespace`) for this call; default: the client's. */
  namespace?: string;
  signal?: AbortSignal;
  /** Vault's storage index this read must see (`X-Vault-Index`): the change's, when it came from an event. */
  vaultIndex?: string;
}

export interface MetadataClientOptions {
  vaultAddr: string;
  auth: VaultTokenSource;
  /** Default `X-Vault-Namespace`. */
  namespace?: string;
  fetch?: typeof fetch;
  /** Per request (default 10 s). */
  timeoutMs?: number;
  /** Attempts per call, the first included (default 4). */
  maxAttempts?: number;
  retryBaseMs?: number;
  retryCapMs?: number;
  sleep?: Sleep;
  random?: () => number;
  redirects?: VaultRedirectPolicy;
  /** Keys one LIST may return before it is truncated (default 10,000). */
  maxListKeys?: number;
}

/** The token may not read or list metadata: names the policy line that would allow it. */
export class VaultPermissionError extends VaultRequestError {
  override readonly name = 'VaultPermissionError';
  /** An HCL line to add to the token's policy (infra/vault/reconcile-policy.hcl has the full policy). */
  readonly policyLine: string;
  constructor(message: string, policyLine: string) {
    super(message, { status: 403 });
    this.policyLine = policyLine;
  }
}

const RETRYABLE = new Set([412, 429, 500, 502, 503, 504]);
export const DEFAULT_MAX_LIST_KEYS = 10_000;

const VersionSchema = z.object({
  created_time: z.string().max(64),
  deletion_time: z.string().max(64).default(''),
  destroyed: z.boolean().default(false),
});
const MetadataSchema = z.object({
  data: z.object({
    current_version: z.number().int().min(0),
    oldest_version: z.number().int().min(0).default(0),
    created_time: z.string().max(64).default(''),
    updated_time: z.string().max(64).default(''),
    versions: z.record(z.string().regex(/^\d{1,10}$/), VersionSchema).default({}),
  }),
});
const ListSchema = z.object({ data: z.object({ keys: z.array(z.string().max(4096)).default([]) }) });

/** Vault's zero time means "not deleted". */
const NOT_SET = new Set(['', '0001-01-01T00:00:00Z']);

/** `a/b c/d` -> `a/b%20c/d`: each segment encoded, the slashes kept. */
const encodePath = (path: string): string => path.split('/').map(encodeURIComponent).join('/');
const trimSlashes = (s: string): string => s.replace(/^\/+|\/+$/g, '');

/** The policy line that grants reading and listing metadata under a mount (in a namespace: its two forms). */
export function metadataPolicyLine(mount: string, namespace = ''): string {
  const line = (prefix: string) =>
    `path "${prefix}${trimSlashes(mount)}/metadata/*" { capabilities = ["read", "list"] }`;
  return namespace
    ? `${line('')} (in namespace ${namespace}), or ${line(`${trimSlashes(namespace)}/`)} (in its parent)`
    : line('');
}

export class VaultMetadataClient {
  readonly #options: MetadataClientOptions;
  readonly #sleep: Sleep;
  /** Requests sent to Vault (each attempt counts), for figures and logs. */
  requests = 0;

  constructor(options: MetadataClientOptions) {
    this.#options = options;
    this.#sleep = options.sleep ?? abortableSleep;
  }

  /** The metadata of one key; undefined when Vault has no such key (or it is a KV v1 mount). */
  async readMetadata(mount: string, key: string, options: MetadataCallOptions = {}): Promise<KvMetadata | undefined> {
    const namespace = trimSlashes(options.namespace ?? this.#options.namespace ?? '');
    checkVaultPath('the mount', trimSlashes(mount));
    checkVaultPath('the key', trimSlashes(key));
    const path = `${encodePath(trimSlashes(mount))}/metadata/${encodePath(trimSlashes(key))}`;
    const answer = await this.#call('GET', path, mount, namespace, options);
    if (answer === undefined) return undefined;
    const parsed = MetadataSchema.safeParse(answer);
    if (!parsed.success)
      throw new VaultRequestError(
        `${path}: not KV v2 metadata (${parsed.error.issues[0]?.message ?? 'unexpected shape'}); is ${mount} a KV v2 mount?`,
      );
    const d = parsed.data.data;
    const versions: Record<number, KvVersionMetadata> = {};
    for (const [n, v] of Object.entries(d.versions))
      versions[Number(n)] = {
        createdTime: v.created_time,
        deletionTime: NOT_SET.has(v.deletion_time) ? null : v.deletion_time,
        destroyed: v.destroyed,
      };
    return {
      namespace,
      mount: trimSlashes(mount),
      key: trimSlashes(key),
      currentVersion: d.current_version,
      oldestVersion: d.oldest_version,
      createdTime: d.created_time,
      updatedTime: d.updated_time,
      versions,
    };
  }

  /** The keys directly under a prefix (folders end in `/`), at most `limit`; an absent prefix lists nothing. */
  async listMetadata(
    mount: string,
    prefix: string,
    options: MetadataCallOptions & { limit?: number } = {},
  ): Promise<MetadataListing> {
    const namespace = trimSlashes(options.namespace ?? this.#options.namespace ?? '');
    const folder = trimSlashes(prefix);
    checkVaultPath('the mount', trimSlashes(mount));
    if (folder !== '') checkVaultPath('the folder', folder);
    const path = `${encodePath(trimSlashes(mount))}/metadata/${folder ? `${encodePath(folder)}/` : ''}`;
    const answer = await this.#call('LIST', path, mount, namespace, options);
    if (answer === undefined) return { keys: [], truncated: false, total: 0 };
    const parsed = ListSchema.safeParse(answer);
    if (!parsed.success) throw new VaultRequestError(`${path}: not a key listing`);
    const limit = options.limit ?? this.#options.maxListKeys ?? DEFAULT_MAX_LIST_KEYS;
    const keys = parsed.data.data.keys;
    return { keys: keys.slice(0, limit), truncated: keys.length > limit, total: keys.length };
  }

  /** The parsed answer, or undefined for 404; throws VaultRequestError / VaultPermissionError. */
  async #call(
    method: 'GET' | 'LIST',
    path: string,
    mount: string,
    namespace: string,
    { signal, vaultIndex }: MetadataCallOptions,
  ): Promise<unknown> {
    // The index comes from the feed: only bounded base64 becomes a header (the parser checked it already; this is the
    // door).
    if (vaultIndex !== undefined && !isVaultIndex(vaultIndex))
      throw new VaultRequestError(`${path}: the vault index is not bounded base64: not sent`);
    const headers = vaultIndex === undefined ? undefined : { 'x-vault-index': vaultIndex };
    const request: MetadataRequest = { method, path, mount, namespace, headers, signal };
    const maxAttempts = this.#options.maxAttempts ?? 4;
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#attempt(request);
      if ('answer' in outcome) return outcome.answer;
      if ('denied' in outcome) {
        if (!reauthenticated) {
          // An expired token answers 403 too: a login source gets one more chance with a fresh token.
          reauthenticated = true;
          this.#options.auth.invalidate();
          attempt--;
          continue;
        }
        const verb = method === 'LIST' ? 'list' : 'read';
        throw new VaultPermissionError(
          `Vault refused to ${verb} ${namespace ? `${namespace}/` : ''}${path}: ${outcome.denied || 'permission denied'}. The token's policy needs: ${metadataPolicyLine(mount, namespace)} (see infra/vault/reconcile-policy.hcl)`,
          metadataPolicyLine(mount, namespace),
        );
      }
      if (attempt >= maxAttempts || signal?.aborted) throw outcome.retry;
      await this.#sleep(
        backoffDelayMs(
          attempt,
          this.#options.retryBaseMs ?? 200,
          this.#options.retryCapMs ?? 5000,
          this.#options.random,
        ),
        signal,
      );
    }
  }

  /**
   * One request: its parsed answer (undefined for 404), Vault's errors when it refused (401, 403), or a failure worth
   * another attempt; throws a failure that is not.
   */
  async #attempt(
    request: MetadataRequest,
  ): Promise<{ answer: unknown } | { denied: string } | { retry: VaultRequestError }> {
    const { method, path, mount, namespace, headers, signal } = request;
    try {
      this.requests++;
      // Only metadata of this mount, whatever the path resolves to (vault-path.ts checked its segments already).
      const pathPrefix = `${encodePath(trimSlashes(mount))}/metadata/`;
      const { status, text } = await vaultRequest({
        vaultAddr: this.#options.vaultAddr,
        method,
        path,
        pathPrefix,
        token: await this.#options.auth.token(),
        namespace,
        timeoutMs: this.#options.timeoutMs ?? 10_000,
        ...(headers ? { headers } : {}),
        ...(signal ? { signal } : {}),
        ...(this.#options.fetch ? { fetch: this.#options.fetch } : {}),
        ...(this.#options.redirects ? { redirects: this.#options.redirects } : {}),
      });
      if (status === 404) return { answer: undefined };
      if (status >= 200 && status < 300) return { answer: JSON.parse(text) as unknown };
      const errors = vaultErrors(text);
      if (status === 403 || status === 401) return { denied: errors };
      const failure = new VaultRequestError(`${method} ${path}: HTTP ${status}${errors ? `: ${errors}` : ''}`, {
        status,
      });
      if (!RETRYABLE.has(status)) throw failure;
      return { retry: failure };
    } catch (error) {
      if (error instanceof VaultPermissionError) throw error;
      if (!(error instanceof VaultRequestError)) throw error;
      if (error.status !== undefined && !RETRYABLE.has(error.status)) throw error;
      return { retry: error };
    }
  }
}

/** One metadata request, as every attempt of it sends it. */
interface MetadataRequest {
  method: 'GET' | 'LIST';
  path: string;
  mount: string;
  namespace: string;
  headers: Record<string, string> | undefined;
  signal: AbortSignal | undefined;
}
