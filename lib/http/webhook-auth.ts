/**
 * Authentication of the webhook, checked on the raw body before anything parses it:
 * - HMAC: `X-Vault-Rollout-Timestamp: <unix seconds>` and `X-Vault-Rollout-Signature: sha256=<hex HMAC-SHA256(secret,
 *   "<timestamp>.<raw body>")>`, within 300 s of our clock, compared in constant time, each signature accepted once
 *   (within its window: per process in Lambda, across restarts in `serve`);
 * - a static bearer token, for senders that can only add fixed headers (OpenBao's http audit device, Fluent Bit);
 * - IAM: the Lambda Function URL (AWS_IAM) authenticated the caller before we run.
 */
import { timingSafeEqual } from 'node:crypto';
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../kernel/hmac-signature.ts';

// One signature for what the webhook receives and what notifications send (lib/kernel/hmac-signature.ts).
export { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER };
export const MAX_SKEW_SECONDS = 300;

export interface WebhookSecrets {
  /** HMAC secret; undefined = HMAC not accepted. */
  hmacSecret?: string;
  /** Bearer token; undefined = bearer not accepted. */
  bearerToken?: string;
  /** The platform authenticated the caller (Function URL AWS_IAM). */
  iam?: boolean;
  /** Accept requests without credentials: only `serve --insecure-no-auth` says so. Anything else fails closed. */
  insecureNoAuth?: boolean;
}

export type AuthOutcome = { ok: true; method: 'hmac' | 'bearer' | 'iam' | 'none' } | { ok: false; reason: string };

function equalConstantTime(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  // Length differences leak only the length of what the caller sent.
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Where a signature is remembered for its window: accepted once, refused as a replay after. */
export interface ReplayWindow {
  /** True the first time a signature is seen within its window. */
  firstTime(signature: string, nowSeconds: number): boolean;
}

/** How long a signature is remembered: its timestamp is accepted up to MAX_SKEW_SECONDS either side of the clock. */
export const REPLAY_WINDOW_SECONDS = 2 * MAX_SKEW_SECONDS;

/**
 * Signatures seen within the skew window, in this process's memory: what Lambda's http function uses (each container
 * its own; docs/explanation/security-model.md says why a replay across containers changes nothing). `serve` keeps its
 * window
 * in its queue file instead (storedReplayWindow), so a restart does not forget it.
 */
export class ReplayGuard implements ReplayWindow {
  readonly #seen = new Map<string, number>();
  readonly #limit: number;
  constructor(limit = 100_000) {
    this.#limit = limit;
  }

  firstTime(signature: string, nowSeconds: number): boolean {
    if (this.#seen.size >= this.#limit)
      for (const [s, until] of this.#seen) if (until < nowSeconds) this.#seen.delete(s);
    const until = this.#seen.get(signature);
    if (until !== undefined && until >= nowSeconds) return false;
    if (this.#seen.size >= this.#limit) this.#seen.delete(this.#seen.keys().next().value ?? '');
    this.#seen.set(signature, nowSeconds + REPLAY_WINDOW_SECONDS);
    return true;
  }
}

/** A durable store of keys, each remembered until a time (serve: its SQLite queue file). */
export interface SeenKeys {
  /** Records `key` until `untilSeconds`; false when it is already recorded and not yet expired at `nowSeconds`. */
  firstSeen(key: string, nowSeconds: number, untilSeconds: number): boolean;
}

/** The replay window kept in a durable store shared by whatever authenticates against it. */
export function storedReplayWindow(store: SeenKeys): ReplayWindow {
  return {
    firstTime: (signature, nowSeconds) => store.firstSeen(signature, nowSeconds, nowSeconds + REPLAY_WINDOW_SECONDS),
  };
}

/** The form of every signature `sign` makes: anything else cannot match, whatever the body. */
const SIGNATURE_FORMAT = /^sha256=[0-9a-f]{64}$/;

/**
 * What the headers alone decide, before a byte of the body is read: a bearer token is checked in full; HMAC's
 * timestamp (format and window) and the signature's form are checked, the signature itself needs the body; no
 * credentials at all is refused. `ok: true` means only "worth reading the body": `authenticate` decides.
 */
export function authenticateHeaders(
  headers: (name: string) => string | undefined,
  secrets: WebhookSecrets,
  nowSeconds: number,
): { ok: true } | { ok: false; reason: string } {
  if (secrets.iam) return { ok: true };
  const signature = headers(SIGNATURE_HEADER);
  if (secrets.hmacSecret !== undefined && signature !== undefined) {
    const checked = hmacHeaders(signature, headers(TIMESTAMP_HEADER), nowSeconds);
    return 'reason' in checked ? checked : { ok: true };
  }
  const outcome = credentialsOtherThanHmac(headers, secrets);
  return outcome.ok ? { ok: true } : outcome;
}

/** The HMAC headers' own checks: a refusal, or the timestamp the signature is to be checked with. */
function hmacHeaders(
  signature: string,
  timestamp: string | undefined,
  nowSeconds: number,
): { ok: false; reason: string } | { timestamp: string } {
  if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp))
    return { ok: false, reason: `${TIMESTAMP_HEADER} must be unix seconds` };
  if (Math.abs(nowSeconds - Number(timestamp)) > MAX_SKEW_SECONDS)
    return { ok: false, reason: `${TIMESTAMP_HEADER} is more than ${MAX_SKEW_SECONDS} s from the server's clock` };
  if (!SIGNATURE_FORMAT.test(signature))
    return { ok: false, reason: `${SIGNATURE_HEADER} must be sha256=<64 hex digits>` };
  return { timestamp };
}

export function authenticate(
  headers: (name: string) => string | undefined,
  body: Uint8Array,
  secrets: WebhookSecrets,
  nowSeconds: number,
  replay: ReplayWindow,
): AuthOutcome {
  if (secrets.iam) return { ok: true, method: 'iam' };
  const signature = headers(SIGNATURE_HEADER);
  if (secrets.hmacSecret !== undefined && signature !== undefined) {
    const checked = hmacHeaders(signature, headers(TIMESTAMP_HEADER), nowSeconds);
    if ('reason' in checked) return checked;
    if (!equalConstantTime(signature, sign(secrets.hmacSecret, checked.timestamp, body)))
      return { ok: false, reason: 'the signature does not match the body' };
    if (!replay.firstTime(signature, nowSeconds))
      return { ok: false, reason: 'this signature was already used (replay)' };
    return { ok: true, method: 'hmac' };
  }
  return credentialsOtherThanHmac(headers, secrets);
}

/** Bearer, none configured, or missing credentials: decided by the headers alone. */
function credentialsOtherThanHmac(headers: (name: string) => string | undefined, secrets: WebhookSecrets): AuthOutcome {
  const authorization = headers('authorization');
  if (secrets.bearerToken !== undefined && authorization !== undefined) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization);
    if (match && equalConstantTime(match[1] ?? '', secrets.bearerToken)) return { ok: true, method: 'bearer' };
    return { ok: false, reason: 'the bearer token is not accepted' };
  }
  if (secrets.hmacSecret === undefined && secrets.bearerToken === undefined) {
    // No scheme configured is a misconfiguration, not an invitation: refuse unless unauthenticated use was asked for.
    return secrets.insecureNoAuth === true
      ? { ok: true, method: 'none' }
      : { ok: false, reason: 'no authentication is configured on this endpoint: every request is refused' };
  }
  const accepted = [
    secrets.hmacSecret !== undefined ? `${SIGNATURE_HEADER} with ${TIMESTAMP_HEADER}` : '',
    secrets.bearerToken !== undefined ? 'Authorization: Bearer' : '',
  ]
    .filter(Boolean)
    .join(' or ');
  return { ok: false, reason: `missing credentials: send ${accepted}` };
}
