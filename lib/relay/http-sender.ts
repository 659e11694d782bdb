/**
 * Batches to the function's HTTP intake (lib/http/app.ts): `POST <base>/v1/vault/audit` or `/v1/vault/events`,
 * NDJSON, signed with HMAC-SHA256 over "<timestamp>.<body>" (lib/http/webhook-auth.ts) and/or carrying a bearer
 * token. The answer decides what happens to the batch: 2xx delivered; 429 and 5xx (503: queue down) retried,
 * honouring Retry-After; 413 split; 400 and other final 4xx dropped; 401/403/404 retried loudly — a wrong secret
 * or URL is fixed by a human, and dropping would lose changes.
 */
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../http/webhook-auth.ts';
import type { BatchSender, SendOutcome } from './batch-sender.ts';
import type { RequestSigner } from '../aws/sigv4-signer.ts';
import { INTAKE_PATHS, type RecordKind } from './record-kind.ts';

export interface HttpSenderOptions {
  /**
   * The function URL (its origin and any base path), or one of its endpoints' full URLs (`…/v1/vault/audit`,
   * `…/v1/vault/events`): either way the base is kept and the intake path of each batch appended.
   */
  baseUrl: string;
  hmacSecret?: string;
  bearerToken?: string;
  /** Signs each request last (SigV4 for an IAM-authenticated Function URL), over the final headers and body. */
  signer?: RequestSigner;
  timeoutMs?: number;
  fetch?: typeof fetch;
  now?: () => number;
}

const MAX_ERROR_CHARS = 300;

/** Retry-After as milliseconds: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export class HttpBatchSender implements BatchSender {
  readonly target: string;
  readonly #options: HttpSenderOptions;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  #lastBody = '';
  #lastTimestamp = 0;

  constructor(options: HttpSenderOptions) {
    this.#options = options;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#now = options.now ?? Date.now;
    this.target = intakeBase(options.baseUrl);
  }

  async send(kind: RecordKind, body: string, signal: AbortSignal): Promise<SendOutcome> {
    const headers = this.#headers(body);
    const url = `${this.target}${INTAKE_PATHS[kind]}`;
    // Signed per attempt: a SigV4 signature is valid for 5 minutes, and a batch may wait longer in the spool.
    let sent = headers;
    if (this.#options.signer) {
      try {
        sent = await this.#options.signer({ url, method: 'POST', headers, body });
      } catch (error) {
        // The SDK's credential errors say which providers failed, never a key.
        return {
          type: 'retry',
          reason: `cannot sign the request with the relay host's AWS credentials: ${(error as Error).message}`,
          loud: true,
        };
      }
    }
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, {
        method: 'POST',
        headers: sent,
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.#options.timeoutMs ?? 30_000)]),
      });
      text = await response.text();
    } catch (error) {
      // fetch says "fetch failed"; the cause names it (ECONNREFUSED, a timeout, "bad port"). Never the body.
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { type: 'retry', reason: `network: ${cause?.code ?? cause?.message ?? (error as Error).name}` };
    }
    return this.#outcomeOf(response, text);
  }

  /** The request's headers: content type, and the HMAC signature and/or bearer token when configured. */
  #headers(body: string): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/x-ndjson',
      'user-agent': 'vault-rollout-relay',
    };
    if (this.#options.hmacSecret !== undefined) {
      // The function accepts each signature once, and a signature is the body and the second: a retry of the same
      // body gets a later timestamp than the attempt before. Retries back off, so this runs ahead of the clock by a
      // few seconds at most (the function allows 300).
      let timestamp = Math.floor(this.#now() / 1000);
      if (body === this.#lastBody) timestamp = Math.max(timestamp, this.#lastTimestamp + 1);
      this.#lastBody = body;
      this.#lastTimestamp = timestamp;
      headers[TIMESTAMP_HEADER] = String(timestamp);
      headers[SIGNATURE_HEADER] = sign(this.#options.hmacSecret, String(timestamp), body);
    }
    if (this.#options.bearerToken !== undefined) headers.authorization = `Bearer ${this.#options.bearerToken}`;
    return headers;
  }

  /** What the answer means for the batch (the file comment's table). */
  #outcomeOf(response: Response, text: string): SendOutcome {
    const status = response.status;
    if (status >= 200 && status < 300) return { type: 'delivered', summary: summaryOf(text) };
    const error = errorOf(text);
    if (status === 413) return { type: 'too-large' };
    if (status === 429 || status >= 500) {
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), this.#now());
      return {
        type: 'retry',
        reason: `HTTP ${status}${error ? `: ${error}` : ''}`,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    }
    if (status === 401 || status === 403 || status === 404 || status === 407) {
      const hint =
        status === 404
          ? 'check --to (the function URL)'
          : this.#options.signer
            ? "check the relay host's AWS credentials: their identity needs lambda:InvokeFunctionUrl on the function (and the clock)"
            : 'check VAULT_ROLLOUT_WEBHOOK_SECRET / VAULT_ROLLOUT_WEBHOOK_TOKEN against the function, and the clocks (300 s skew allowed)';
      return { type: 'retry', reason: `HTTP ${status}${error ? `: ${error}` : ''}; ${hint}`, loud: true };
    }
    return { type: 'rejected', error: `HTTP ${status}${error ? `: ${error}` : ''}` };
  }
}

/** The function's base URL from what the user gave `--to`: the base itself, or the full URL of an intake endpoint. */
export function intakeBase(to: string): string {
  const url = new URL(to);
  let path = url.pathname.replace(/\/+$/, '');
  for (const endpoint of Object.values(INTAKE_PATHS))
    if (path.endsWith(endpoint)) path = path.slice(0, -endpoint.length);
  return `${url.origin}${path}`;
}

function summaryOf(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as Record<string, unknown>;
    const { accepted, ignored, rejected, queued } = value;
    return { accepted, ignored, rejected, queued };
  } catch {
    return undefined;
  }
}

/** The function's `error` (it never quotes the input), shortened. */
function errorOf(text: string): string {
  try {
    const value = JSON.parse(text) as { error?: unknown };
    if (typeof value.error === 'string') return value.error.slice(0, MAX_ERROR_CHARS);
  } catch {
    // not JSON: a proxy's page, say
  }
  return '';
}
