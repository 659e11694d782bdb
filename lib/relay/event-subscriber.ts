/**
 * One WebSocket subscription to Vault's event notifications (Enterprise 1.16+; 1.15 beta):
 * `GET /v1/sys/events/subscribe/<event type pattern>?json=true[&namespaces=…][&filter=…]` with `X-Vault-Token`.
 *
 * A standby node answers 307 with the active node's address: followed only to the same host or a host named in
 * `redirects.allowedHosts`, and never from wss to ws (vault-redirect.ts) — the token header goes with the redirect,
 * and ws itself drops only Authorization and Cookie across hosts. A dropped connection is reopened with jittered
 * exponential backoff; the backoff starts over once a connection stayed up. A ping goes out every
 * `pingIntervalMs`; a connection that answered none since the previous ping is terminated and reopened — a
 * half-open TCP connection would otherwise wait silently forever. Vault does not replay events missed while
 * disconnected: pair the subscription with an audit source when every change matters.
 */
import { abortableSleep, backoffDelayMs, type Sleep } from '../kernel/backoff.ts';
import type { RelayLog } from '../kernel/log.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import { checkVaultRedirect, MAX_VAULT_REDIRECTS, type VaultRedirectPolicy } from '../vault/vault-redirect.ts';
import { tlsRequestOptions, type VaultTls } from '../vault/vault-tls.ts';
// `ws`, not Node's global WebSocket: the subscription needs ping/pong to notice a dead peer, a per-connection CA
// (VAULT_CACERT) and a hook on each redirect, none of which the WHATWG WebSocket API offers.
import type { ClientRequest } from 'node:http';
import WebSocket from 'ws';

export interface EventSubscriberOptions {
  vaultAddr: string;
  /** An event type or pattern: `kv-v2/*`, `kv-v1/*`, `kv*`. */
  eventType: string;
  namespaces?: readonly string[];
  /** A go-bexpr filter, e.g. `data_path matches "secret/data/payments/.*"`. */
  filter?: string;
  auth: VaultTokenSource;
  /** `X-Vault-Namespace`: the namespace the subscription is made in (Enterprise). */
  vaultNamespace?: string;
  /** One event notification, as received (a JSON document). */
  onMessage: (text: string) => void;
  log: RelayLog;
  pingIntervalMs?: number;
  handshakeTimeoutMs?: number;
  reconnectBaseMs?: number;
  reconnectCapMs?: number;
  /** A connection up this long resets the backoff. */
  stableAfterMs?: number;
  sleep?: Sleep;
  random?: () => number;
  /** Where a redirect may lead (same host by default; never wss to ws). */
  redirects?: VaultRedirectPolicy;
  /** TLS to Vault (VAULT_CACERT, VAULT_CLIENT_CERT...), as for every other Vault request. */
  tls?: VaultTls;
}

export function subscribeUrl(
  vaultAddr: string,
  eventType: string,
  namespaces: readonly string[] = [],
  filter?: string,
): string {
  const url = new URL(
    `${vaultAddr.replace(/\/+$/, '')}/v1/sys/events/subscribe/${eventType.split('/').map(encodeURIComponent).join('/')}`,
  );
  url.protocol = url.protocol === 'https:' ? 'wss:' : url.protocol === 'http:' ? 'ws:' : url.protocol;
  url.searchParams.set('json', 'true');
  for (const namespace of namespaces) url.searchParams.append('namespaces', namespace);
  if (filter) url.searchParams.set('filter', filter);
  return url.toString();
}

interface ConnectionEnd {
  opened: boolean;
  upMs: number;
  status?: number;
  error?: string;
  code?: number;
}

export class EventSubscriber {
  readonly #options: EventSubscriberOptions;
  readonly #stopping = new AbortController();
  readonly #sleep: Sleep;
  #running: Promise<void> | undefined;
  /** Connections opened so far (for tests and logs). */
  connections = 0;

  constructor(options: EventSubscriberOptions) {
    this.#options = options;
    this.#sleep = options.sleep ?? abortableSleep;
  }

  start(): void {
    this.#running ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#running;
  }

  async #run(): Promise<void> {
    const { log, eventType } = this.#options;
    const signal = this.#stopping.signal;
    let failures = 0;
    while (!signal.aborted) {
      let end: ConnectionEnd;
      try {
        end = await this.#connectOnce(await this.#options.auth.token());
      } catch (error) {
        if (signal.aborted) break;
        end = { opened: false, upMs: 0, error: (error as Error).message };
      }
      if (signal.aborted) break;
      if (end.status === 401 || end.status === 403) {
        // An expired or revoked token, or a policy without `subscribe`: a new login may help, a human may be needed.
        log.error(
          'Vault refused the event subscription: check the token and its policy (infra/vault/events-policy.hcl)',
          { eventType, status: end.status },
        );
        this.#options.auth.invalidate();
      } else if (end.status === 404 || end.status === 405) {
        // Community Vault answers the subscribe request as an ordinary (unknown) API path since 1.16: the event
        // WebSocket is Enterprise only there, and OpenBao removed it. Retrying cannot help; a new feed can.
        log.error(
          'this Vault server has no event notifications (Vault Enterprise 1.16+ and community 1.13-1.15 have them; community 1.16+ and OpenBao do not): feed the relay from an audit device instead (--audit-file or --audit-listen)',
          { eventType, status: end.status },
        );
      }
      failures = end.opened && end.upMs >= (this.#options.stableAfterMs ?? 10_000) ? 1 : failures + 1;
      const delay = backoffDelayMs(
        failures,
        this.#options.reconnectBaseMs ?? 500,
        this.#options.reconnectCapMs ?? 30_000,
        this.#options.random,
      );
      log.warn('event subscription closed: reconnecting (events published meanwhile are not replayed by Vault)', {
        eventType,
        ...(end.status ? { status: end.status } : {}),
        ...(end.code ? { code: end.code } : {}),
        ...(end.error ? { error: end.error } : {}),
        retryInMs: delay,
      });
      await this.#sleep(delay, signal);
    }
  }

  #connectOnce(token: string): Promise<ConnectionEnd> {
    const { vaultAddr, eventType, namespaces, filter, vaultNamespace, log, onMessage } = this.#options;
    const headers: Record<string, string> = { 'X-Vault-Token': token };
    if (vaultNamespace) headers['X-Vault-Namespace'] = vaultNamespace;
    const url = subscribeUrl(vaultAddr, eventType, namespaces, filter);
    const socket = new WebSocket(url, {
      headers,
      followRedirects: true,
      maxRedirects: MAX_VAULT_REDIRECTS,
      handshakeTimeout: this.#options.handshakeTimeoutMs ?? 10_000,
      ...tlsRequestOptions(this.#options.tls),
    });
    return new Promise((resolve) => {
      let openedAt: number | undefined;
      let status: number | undefined;
      let error: string | undefined;
      const pings = pingWatch(socket, this.#options.pingIntervalMs ?? 30_000, () => {
        log.warn('no pong from Vault since the last ping: the connection is dead, terminating it', { eventType });
        socket.terminate();
      });
      const stop = (): void => socket.terminate();
      this.#stopping.signal.addEventListener('abort', stop, { once: true });
      socket.on('redirect', (to, request) => this.#onRedirect(url, to, request));
      socket.on('open', () => {
        openedAt = Date.now();
        this.connections += 1;
        log.info('subscribed to Vault events', { eventType, vault: new URL(vaultAddr).host });
        pings.start();
      });
      socket.on('message', (data) => {
        pings.answered();
        onMessage(
          Array.isArray(data)
            ? Buffer.concat(data).toString('utf8')
            : Buffer.from(data as ArrayBuffer).toString('utf8'),
        );
      });
      socket.on('error', (e) => {
        const match = /Unexpected server response: (\d{3})/.exec(e.message);
        if (match) status = Number(match[1]);
        error = e.message;
      });
      socket.on('close', (code) => {
        pings.stop();
        this.#stopping.signal.removeEventListener('abort', stop);
        resolve({
          opened: openedAt !== undefined,
          upMs: openedAt === undefined ? 0 : Date.now() - openedAt,
          ...(status !== undefined ? { status } : {}),
          ...(error !== undefined ? { error } : {}),
          ...(openedAt !== undefined ? { code } : {}),
        });
      });
    });
  }

  /** Before a redirected request is sent: follows it only to where the redirect policy allows. */
  #onRedirect(url: string, to: string, request: ClientRequest): void {
    const { log, eventType } = this.#options;
    // Called before the redirected request is sent: destroying it sends nothing, and ws closes with our error.
    const next = checkVaultRedirect(url, to, this.#options.redirects);
    if (!next.ok) {
      log.error(`event subscription: ${next.reason}`, { eventType });
      request.destroy(new Error(next.reason));
      return;
    }
    log.info('following a redirect to the active Vault node', { eventType, to: next.url.host });
  }
}

/**
 * The connection's liveness: once started, a ping every intervalMs; a ping with no pong (or message) before the next
 * is a dead connection, handed to onDead.
 */
function pingWatch(socket: WebSocket, intervalMs: number, onDead: () => void) {
  let answered = true;
  let pinger: NodeJS.Timeout | undefined;
  socket.on('pong', () => (answered = true));
  return {
    answered: () => void (answered = true),
    start: () => {
      pinger = setInterval(() => {
        if (!answered) return onDead();
        answered = false;
        socket.ping();
      }, intervalMs);
    },
    stop: () => clearInterval(pinger),
  };
}
