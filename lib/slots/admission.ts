/**
 * The slots of one execution: before a bounded restart's patch, a lease in each of its scopes
 * (lib/slots/slot-store.ts);
 * when its rollout ends, the lease back. Acquires go one at a time, and a scope found full is not asked again until
 * a slot is released here or `reopen()` says another worker may have freed one: a rotation of 3,000 targets asks
 * the store about the few that can start, not about all 3,000 each time.
 */
import type { MaxUnavailable } from '../routing/schema.ts';
import { slotScopes, type SlotStore } from './slot-store.ts';

export type Admitted = { admitted: true } | { admitted: false; why: string };

export interface SlotClaim {
  holder: string;
  scopeKeys: string[];
}

export class Admission {
  private readonly store: SlotStore;
  private readonly onError: (what: string, error: unknown) => void;
  /** Scopes found full since the last release or reopen, with why. */
  private readonly full = new Map<string, string>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(store: SlotStore, onError: (what: string, error: unknown) => void) {
    this.store = store;
    this.onError = onError;
  }

  /** Takes a lease in every scope of the bound, or says which scope has none free (or that the store failed). */
  admit(cluster: string, holder: string, bound: MaxUnavailable, ttlMs: number): Promise<Admitted> {
    const scopes = slotScopes(cluster, bound);
    const attempt = async (): Promise<Admitted> => {
      const known = scopes.map((s) => this.full.get(s.key)).find((why) => why !== undefined);
      if (known !== undefined) return { admitted: false, why: known };
      try {
        const out = await this.store.acquire(holder, scopes, ttlMs);
        if (out.acquired) return { admitted: true };
        const why = out.full.key.startsWith('cluster:')
          ? `maxUnavailable.perCluster: ${out.held} of ${out.full.limit} rolling in cluster ${cluster}`
          : `maxUnavailable.fleet: ${out.held} of ${out.full.limit} rolling over the fleet`;
        this.full.set(out.full.key, why);
        return { admitted: false, why };
      } catch (e) {
        // The store is out of reach: nothing is restarted unbounded; the target waits for the next attempt.
        this.onError('could not take a rollout slot', e);
        return {
          admitted: false,
          why: `the slot store could not be reached (${e instanceof Error ? e.name : 'error'})`,
        };
      }
    };
    const next = this.queue.then(attempt, attempt);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Resolves when every admission asked for so far is decided (taken or refused). */
  async idle(): Promise<void> {
    await this.queue;
  }

  /** True when a scope of this bound was found full since the last release or reopen: not worth asking now. */
  knownFull(cluster: string, bound: MaxUnavailable): boolean {
    return slotScopes(cluster, bound).some((s) => this.full.has(s.key));
  }

  /** Gives the leases back; a failure leaves them to expire at their deadline. */
  async release(claim: SlotClaim): Promise<void> {
    try {
      await this.store.release(claim.holder, claim.scopeKeys);
    } catch (e) {
      this.onError('could not release a rollout slot (it expires at the rollout deadline)', e);
    } finally {
      this.full.clear();
    }
  }

  /** Another worker may have released slots since: ask the store again. */
  reopen(): void {
    this.full.clear();
  }

  /** When each holder of these scopes took its lease (the start of its rollout, for deadlines). */
  async leaseStarts(scopeKeys: readonly string[]): Promise<Map<string, number>> {
    const starts = new Map<string, number>();
    for (const key of scopeKeys) {
      try {
        for (const lease of await this.store.leases(key)) starts.set(lease.holder, lease.acquiredAt);
      } catch (e) {
        this.onError('could not read the rollout slots', e);
      }
    }
    return starts;
  }
}
