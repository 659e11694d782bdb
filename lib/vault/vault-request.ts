/**
 * One HTTP request to Vault's API, shared by the logins (lib/vault/vault-auth.ts, lib/vault/auth.ts) and the
 * metadata client: `X-Vault-Token` and `X-Vault-Namespace` headers, a timeout, a bounded answer, and redirects
 * followed here rather than by fetch, which would carry the token (or a secret ID) to any host over any scheme.
 * TLS is Node's: certificates are always verified (system CAs plus NODE_EXTRA_CA_CERTS for a private CA).
 */
import { checkVaultRedirect, MAX_VAULT_REDIRECTS, type VaultRedirectPolicy } from './vault-redirect.ts';
import { VaultPathError } from '../sources/vault-path.ts';
import { METRICS, observeMetric, requestOutcome } from '../kernel/telemetry.ts';

export interface VaultRequest {
  vaultAddr: string;
  method: 'GET' | 'POST' | 'LIST' | 'PUT';
  /** API path after `/v1/`, e.g. `secret/metadata/app`. */
  path: string;
  token?: string;
  /** `X-Vault-Namespace` (Enterprise); empty or undefined for the root namespace. */
  namespace?: string;
  body?: object;
  /** Extra headers (an AWS IAM login signs some). */
  headers?: Record<string, string>;
  fetch?: typeof fetch;
  signal?: AbortSignal;
  timeoutMs?: number;
  redirects?: VaultRedirectPolicy;
  /** The most an answer may hold; a longer one is refused (default 8 MiB). */
  maxBytes?: number;
  /**
   * The API path (after `/v1/`, encoded as sent, e.g. `secret/metadata/`) that every URL of this request must stay
   * under once resolved, the first and any redirect's: one that resolves elsewhere is refused before it is sent.
   */
  pathPrefix?: string;
}

export interface VaultAnswer {
  status: number;
  text: string;
}

export class VaultRequestError extends Error {
  override readonly name: string = 'VaultRequestError';
  /** The HTTP status, or undefined when no answer came (network, timeout, redirect refused). */
  readonly status: number | undefined;
  constructor(message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.status = options.status;
  }
}

export const DEFAULT_VAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_VAULT_MAX_BYTES = 8 * 1024 * 1024;

/** Vault's `errors` name the problem ("permission denied"), never a credential. */
export function vaultErrors(text: string): string {
  try {
    return ((JSON.parse(text) as { errors?: unknown[] }).errors ?? []).map(String).join('; ');
  } catch {
    return '';
  }
}

/** Sends one request (following only allowed 307/308 redirects); any HTTP status is an answer, not an error. */
export async function vaultRequest(request: VaultRequest): Promise<VaultAnswer> {
  // Latency and errors by outcome; never the path (observeMetric: a no-op unless a Prometheus registry is installed).
  const started = performance.now();
  try {
    const answer = await vaultRequestOnce(request);
    const outcome = requestOutcome(answer.status);
    observeMetric(METRICS.vaultRequestDuration, performance.now() - started, { outcome });
    if (outcome !== 'ok') observeMetric(METRICS.vaultRequestErrors, 1, { outcome });
    return answer;
  } catch (e) {
    const outcome = requestOutcome(e instanceof VaultRequestError ? e.status : undefined);
    observeMetric(METRICS.vaultRequestDuration, performance.now() - started, { outcome });
    observeMetric(METRICS.vaultRequestErrors, 1, { outcome });
    throw e;
  }
}

async function vaultRequestOnce(request: VaultRequest): Promise<VaultAnswer> {
  const fetchImpl = request.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = { ...request.headers };
  if (request.body !== undefined) headers['content-type'] = 'application/json';
  if (request.token !== undefined) headers['x-vault-token'] = request.token;
  if (request.namespace) headers['x-vault-namespace'] = request.namespace;
  const timeout = AbortSignal.timeout(request.timeoutMs ?? DEFAULT_VAULT_TIMEOUT_MS);
  const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
  const base = request.vaultAddr.replace(/\/+$/, '');
  let url = `${base}/v1/${request.path}`;
  // URL resolution removes `.` and `..` segments: the path checked is the one fetch will send.
  const under =
    request.pathPrefix === undefined
      ? undefined
      : `${new URL(base).pathname.replace(/\/+$/, '')}/v1/${request.pathPrefix}`;
  const refuseOutside = (to: URL): void => {
    if (under !== undefined && !to.pathname.startsWith(under))
      throw new VaultPathError(`${request.path}: resolves to ${to.pathname}, outside ${under}: refused, not sent`);
  };
  refuseOutside(new URL(url));
  let response: Response;
  try {
    for (let hops = 0; ; hops++) {
      response = await fetchImpl(url, {
        method: request.method,
        headers,
        ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        redirect: 'manual',
        signal,
      });
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || location === null) break;
      await response.body?.cancel();
      if (hops >= MAX_VAULT_REDIRECTS)
        throw new VaultRequestError(`${request.path}: more than ${MAX_VAULT_REDIRECTS} redirects`);
      // Only 307/308 keep the method and body; Vault's standby redirect is a 307.
      if (response.status !== 307 && response.status !== 308)
        throw new VaultRequestError(`${request.path}: HTTP ${response.status} redirect: only 307/308 are followed`);
      const next = checkVaultRedirect(url, location, request.redirects);
      if (!next.ok) throw new VaultRequestError(`${request.path}: ${next.reason}`);
      refuseOutside(next.url);
      url = next.url.toString();
    }
    const text = await readBounded(response, request.maxBytes ?? DEFAULT_VAULT_MAX_BYTES, request.path);
    return { status: response.status, text };
  } catch (error) {
    if (error instanceof VaultRequestError || error instanceof VaultPathError) throw error;
    const reason = timeout.aborted
      ? `no answer within ${request.timeoutMs ?? DEFAULT_VAULT_TIMEOUT_MS} ms`
      : error instanceof Error
        ? `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ''}`
        : String(error);
    throw new VaultRequestError(`${request.path}: ${reason}`, { cause: error });
  }
}

async function readBounded(response: Response, maxBytes: number, path: string): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > maxBytes) {
    await response.body?.cancel();
    throw new VaultRequestError(`${path}: the answer is ${declared} bytes, more than ${maxBytes}`, {
      status: response.status,
    });
  }
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes)
      throw new VaultRequestError(`${path}: the answer is more than ${maxBytes} bytes`, { status: response.status });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
