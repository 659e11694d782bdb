/**
 * One vocabulary for what went wrong talking to a cluster, from HTTP statuses and socket/TLS errors, with
 * whether a retry can help. Messages name the failure, never a credential or the request body.
 */
import { ApiException } from '@kubernetes/client-node';

export const FailureReasons = [
  'forbidden',
  'unauthorized',
  'not found',
  'conflict',
  'invalid',
  'throttled',
  'server error',
  'unreachable',
  'timeout',
  'tls',
  'credentials',
  'error',
] as const;
export type FailureReason = (typeof FailureReasons)[number];

export interface KubeFailure {
  reason: FailureReason;
  status?: number;
  retryable: boolean;
  /** From a Retry-After header, in ms. */
  retryAfterMs?: number;
  detail: string;
}

const TLS_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_SIGNATURE_FAILURE',
  'ERR_SSL_WRONG_VERSION_NUMBER',
  'EPROTO',
]);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'ECONNABORTED',
]);
const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Retry-After is seconds or an HTTP date. */
export function parseRetryAfter(value: string | undefined, now: number): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The error codes along an error's cause chain (undici wraps socket errors in "fetch failed"). */
function codes(e: unknown): string[] {
  const out: string[] = [];
  for (let at: unknown = e, depth = 0; at && depth < 5; depth++) {
    const { code, name } = at as { code?: unknown; name?: unknown };
    if (typeof code === 'string') out.push(code);
    if (name === 'TimeoutError' || name === 'AbortError') out.push('ETIMEDOUT');
    at = (at as { cause?: unknown }).cause;
  }
  return out;
}

function statusMessage(body: unknown): string {
  const message = typeof body === 'object' && body !== null ? (body as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message.slice(0, 300) : '';
}

export function classifyKubeError(e: unknown, now = Date.now()): KubeFailure {
  if (e instanceof ApiException) {
    const status = e.code;
    const detail = statusMessage(e.body) || `HTTP ${status}`;
    const header = (name: string) => e.headers?.[name] ?? e.headers?.[name.toLowerCase()];
    const base = { status, detail };
    if (status === 401) return { ...base, reason: 'unauthorized', retryable: false };
    if (status === 403) return { ...base, reason: 'forbidden', retryable: false };
    if (status === 404) return { ...base, reason: 'not found', retryable: false };
    // A conflict is not retried as it is: the caller reads the object again and decides again.
    if (status === 409) return { ...base, reason: 'conflict', retryable: false };
    if (status === 422 || status === 400 || status === 415) return { ...base, reason: 'invalid', retryable: false };
    const retryAfterMs = parseRetryAfter(header('Retry-After'), now);
    if (status === 429)
      return { ...base, reason: 'throttled', retryable: true, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
    if (status >= 500)
      return {
        ...base,
        reason: 'server error',
        retryable: true,
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      };
    return { ...base, reason: 'error', retryable: false };
  }
  const found = codes(e);
  const tls = found.find((c) => TLS_CODES.has(c) || c.startsWith('ERR_TLS') || c.startsWith('ERR_SSL'));
  if (tls) return { reason: 'tls', retryable: false, detail: `TLS verification failed (${tls})` };
  const timeout = found.find((c) => TIMEOUT_CODES.has(c));
  if (timeout) return { reason: 'timeout', retryable: true, detail: `no answer in time (${timeout})` };
  const unreachable = found.find((c) => UNREACHABLE_CODES.has(c));
  if (unreachable) return { reason: 'unreachable', retryable: true, detail: `cannot connect (${unreachable})` };
  return { reason: 'error', retryable: false, detail: e instanceof Error ? e.message.slice(0, 300) : String(e) };
}
