/**
 * Who may read GET /status (serve --status-page): the holder of its own read-only credential,
 * VAULT_ROLLOUT_STATUS_TOKEN, never the intake's write token or HMAC key (whoever reads the page must not be able to
 * send changes). As `Authorization: Bearer`, or as the password of HTTP Basic (any user name) so a browser's own
 * prompt works — Basic only where it cannot be read on the way: over TLS, from a loopback peer (kubectl
 * port-forward), or behind a TLS-terminating proxy the operator vouches for (--status-behind-tls-proxy, which trusts
 * its X-Forwarded-Proto: https). Elsewhere the browser is not asked (no challenge) and Basic is refused.
 */
import { timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

/** Shortest intake or status secret accepted: 32 characters, as `openssl rand -hex 16` prints. */
export const MIN_SECRET_LENGTH = 32;

export interface StatusAccess {
  /** The page's read-only credential; undefined: refused, unless the whole listener runs --insecure-no-auth. */
  token?: string;
  insecureNoAuth?: boolean;
  /** The listener is reached only through a TLS-terminating proxy that sets X-Forwarded-Proto. */
  behindTlsProxy?: boolean;
}

/** Where the request came from and how: what decides whether Basic may be taken. */
export interface RequestChannel {
  url: string;
  /** The peer's address (serve: the socket's); undefined when unknown. */
  peer?: string;
  header: (name: string) => string | undefined;
}

export type StatusOutcome = { ok: true } | { ok: false; reason: string };

function equalConstantTime(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** 127.0.0.0/8, ::1 and their IPv4-mapped spelling. */
export function isLoopbackPeer(peer: string | undefined): boolean {
  if (peer === undefined) return false;
  const address = peer.replace(/^::ffff:/i, '');
  if (isIP(address) === 4) return address.startsWith('127.');
  return address === '::1';
}

/** Whether a Basic password would cross the network encrypted (or not at all). */
export function basicAllowed(channel: RequestChannel, access: StatusAccess): boolean {
  if (channel.url.startsWith('https:') || isLoopbackPeer(channel.peer)) return true;
  return access.behindTlsProxy === true && (channel.header('x-forwarded-proto') ?? '').toLowerCase() === 'https';
}

const NOT_ACCEPTED: StatusOutcome = { ok: false, reason: 'the status token is not accepted' };
const BASIC = /^Basic\s+([A-Za-z0-9+/=]{1,4096})$/i;
const BEARER = /^Bearer\s+(.+)$/i;

export function authenticateStatus(channel: RequestChannel, access: StatusAccess): StatusOutcome {
  if (access.token === undefined) {
    if (access.insecureNoAuth === true) return { ok: true };
    return { ok: false, reason: 'no status credential is configured: set VAULT_ROLLOUT_STATUS_TOKEN' };
  }
  const authorization = channel.header('authorization');
  if (authorization === undefined) return { ok: false, reason: 'missing credentials: send Authorization: Bearer' };
  const bearer = BEARER.exec(authorization);
  if (bearer) return equalConstantTime(bearer[1] ?? '', access.token) ? { ok: true } : NOT_ACCEPTED;
  const basic = BASIC.exec(authorization);
  if (!basic) return { ok: false, reason: 'send Authorization: Bearer with the status token' };
  if (!basicAllowed(channel, access)) {
    const reason =
      'HTTP Basic is taken only over TLS or from loopback (elsewhere it crosses the network readable): ' +
      'use https, kubectl port-forward, or Authorization: Bearer';
    return { ok: false, reason };
  }
  const decoded = Buffer.from(basic[1] ?? '', 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && equalConstantTime(decoded.slice(colon + 1), access.token) ? { ok: true } : NOT_ACCEPTED;
}

/**
 * The start-up checks of serve's secrets: each at least MIN_SECRET_LENGTH characters (a short one is guessed), and
 * the status token none of the intake's (a page reader must not be able to write). Undefined when all is well.
 */
export function secretsProblem(secrets: {
  hmacSecret?: string;
  bearerToken?: string;
  statusToken?: string;
}): string | undefined {
  const named: Array<[string, string | undefined]> = [
    ['VAULT_ROLLOUT_WEBHOOK_SECRET', secrets.hmacSecret],
    ['VAULT_ROLLOUT_WEBHOOK_TOKEN', secrets.bearerToken],
    ['VAULT_ROLLOUT_STATUS_TOKEN', secrets.statusToken],
  ];
  for (const [name, value] of named) {
    if (value !== undefined && value.length < MIN_SECRET_LENGTH) {
      return (
        `${name} is ${value.length} characters, fewer than ${MIN_SECRET_LENGTH}: a short secret can be guessed; ` +
        'make one with openssl rand -hex 32'
      );
    }
  }
  const status = secrets.statusToken;
  if (status !== undefined && (status === secrets.bearerToken || status === secrets.hmacSecret)) {
    return (
      "VAULT_ROLLOUT_STATUS_TOKEN is the intake's secret: the page's readers would be able to send changes; " +
      'give the status page a token of its own'
    );
  }
  return undefined;
}
