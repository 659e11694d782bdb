/**
 * Repeated failed authentications from one peer are slowed down: past MAX_FAILURES refusals within a window, the
 * peer's requests are answered 429 with Retry-After until the window ends, before any credential is looked at, so a
 * guesser gets a bounded number of tries a minute. Nothing waits: the answer is immediate (a sleep would hold a
 * connection and a worker for every guess). A success clears the peer's count.
 *
 * Bounded: at most MAX_PEERS peers are remembered; past it, expired windows go first, then the oldest.
 */

export const FAILURE_WINDOW_MS = 60_000;
export const MAX_FAILURES = 20;
export const MAX_PEERS = 10_000;

interface Window {
  startedAt: number;
  failures: number;
}

export class FailedAuthLimiter {
  readonly #peers = new Map<string, Window>();
  readonly #maxFailures: number;
  readonly #windowMs: number;

  constructor(options: { maxFailures?: number; windowMs?: number } = {}) {
    this.#maxFailures = options.maxFailures ?? MAX_FAILURES;
    this.#windowMs = options.windowMs ?? FAILURE_WINDOW_MS;
  }

  /** Seconds the peer must wait before it is heard again; undefined when it may try now. */
  retryAfterSeconds(peer: string | undefined, now: number): number | undefined {
    if (peer === undefined) return undefined;
    const window = this.#peers.get(peer);
    if (window === undefined || now - window.startedAt >= this.#windowMs) return undefined;
    if (window.failures < this.#maxFailures) return undefined;
    return Math.max(1, Math.ceil((window.startedAt + this.#windowMs - now) / 1000));
  }

  /** Counts one refused request of the peer. An unknown peer (no address) is not counted: it cannot be told apart. */
  failed(peer: string | undefined, now: number): void {
    if (peer === undefined) return;
    const window = this.#peers.get(peer);
    if (window === undefined || now - window.startedAt >= this.#windowMs) {
      this.#peers.delete(peer);
      this.#evict(now);
      this.#peers.set(peer, { startedAt: now, failures: 1 });
    } else window.failures += 1;
  }

  succeeded(peer: string | undefined): void {
    if (peer !== undefined) this.#peers.delete(peer);
  }

  #evict(now: number): void {
    if (this.#peers.size < MAX_PEERS) return;
    for (const [peer, window] of this.#peers) if (now - window.startedAt >= this.#windowMs) this.#peers.delete(peer);
    while (this.#peers.size >= MAX_PEERS) this.#peers.delete(this.#peers.keys().next().value ?? '');
  }
}
