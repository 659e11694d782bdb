/**
 * A small cache of values that expire: concurrent callers share one in-flight creation, a value is created again
 * once the clock reaches its refresh time minus a margin, and a failed creation is never kept (the next caller
 * tries again). Cluster accesses, EKS tokens and assumed-role credentials all follow this one rule.
 */

/** Epoch milliseconds now; injected so tests can move time. */
export type Clock = () => number;

/** Refresh this long before a value's own refresh time, so no request starts with credentials about to lapse. */
export const REFRESH_MARGIN_MS = 60_000;

interface Entry<V> {
  /** What the value was made from (e.g. a config fingerprint); a different version replaces the entry. */
  version: string;
  promise: Promise<V>;
  settled: boolean;
  refreshAfter: number | undefined;
}

export interface RefreshingCacheOptions<V> {
  clock: Clock;
  /** Epoch ms after which the value must be created again; undefined = never. */
  refreshAfterOf: (value: V) => number | undefined;
  marginMs?: number;
}

export class RefreshingCache<V> {
  readonly #entries = new Map<string, Entry<V>>();
  readonly #clock: Clock;
  readonly #refreshAfterOf: (value: V) => number | undefined;
  readonly #marginMs: number;

  constructor(options: RefreshingCacheOptions<V>) {
    this.#clock = options.clock;
    this.#refreshAfterOf = options.refreshAfterOf;
    this.#marginMs = options.marginMs ?? REFRESH_MARGIN_MS;
  }

  /** The cached value for key, or the one create() makes when there is none, it is stale or its version differs. */
  get(key: string, version: string, create: () => Promise<V>): Promise<V> {
    const current = this.#entries.get(key);
    if (current !== undefined && current.version === version && !this.#isStale(current)) return current.promise;
    return this.#create(key, version, create);
  }

  delete(key: string): boolean {
    return this.#entries.delete(key);
  }

  #isStale(entry: Entry<V>): boolean {
    // An entry still being created is never stale: its callers wait for it rather than start another.
    return entry.settled && entry.refreshAfter !== undefined && this.#clock() >= entry.refreshAfter - this.#marginMs;
  }

  #create(key: string, version: string, create: () => Promise<V>): Promise<V> {
    const entry = { version, settled: false, refreshAfter: undefined } as Entry<V>;
    // In the map before create() runs: a create() that throws at once must still find and remove its entry.
    this.#entries.set(key, entry);
    entry.promise = this.#settle(key, entry, create);
    return entry.promise;
  }

  async #settle(key: string, entry: Entry<V>, create: () => Promise<V>): Promise<V> {
    try {
      const value = await create();
      entry.refreshAfter = this.#refreshAfterOf(value);
      entry.settled = true;
      return value;
    } catch (error) {
      // Only forget our own entry: a newer one (another version) may already have replaced it.
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
      throw error;
    }
  }
}
