/**
 * Rollout slots: how many workloads may be rolling at once (`rollout.maxUnavailable`). A restart takes one lease in
 * each of its scopes (`cluster:<name>`, `fleet`) atomically, before its patch, and gives them back when its rollout
 * is seen complete, failed or past its deadline. A lease expires on its own at the rollout's deadline, so a worker
 * killed between the two never holds a slot for longer than the rollout could have.
 *
 * The fleet bound spans clusters that concurrent workers (Lambda invocations, `serve` pollers) work at the same
 * time, so the slots live in a store every worker shares: DynamoDB in Lambda, SQLite (node:sqlite) for `serve`.
 */
import type { MaxUnavailable } from '../routing/schema.ts';
import type { WorkloadRef } from '../workloads/workload-ref.ts';

export interface SlotScope {
  /** `cluster:<name>` or `fleet`. */
  key: string;
  /** Leases this scope may hold at once. */
  limit: number;
}

export interface Lease {
  holder: string;
  /** Epoch ms when the lease was taken (just before the patch): the rollout's deadline counts from it. */
  acquiredAt: number;
  expiresAt: number;
}

export type AcquireResult = { acquired: true } | { acquired: false; full: SlotScope; held: number };

export interface SlotStore {
  /**
   * Takes one lease in every scope or none (atomic across scopes). Idempotent per holder: a holder that holds a
   * live lease in a scope keeps it (its acquiredAt and expiry unchanged) and takes none more there.
   */
  acquire(holder: string, scopes: readonly SlotScope[], ttlMs: number): Promise<AcquireResult>;
  /** Gives back the holder's leases in these scopes; a lease already expired or gone is nothing to do. */
  release(holder: string, scopeKeys: readonly string[]): Promise<void>;
  /** The live leases of a scope. */
  leases(scopeKey: string): Promise<Lease[]>;
  close?(): void;
}

export const FLEET_SCOPE = 'fleet';
export const clusterScope = (cluster: string): string => `cluster:${cluster}`;

/** The scopes one restart in `cluster` takes a lease in under this bound. */
export function slotScopes(cluster: string, bound: MaxUnavailable): SlotScope[] {
  return [
    ...(bound.perCluster === undefined ? [] : [{ key: clusterScope(cluster), limit: bound.perCluster }]),
    ...(bound.fleet === undefined ? [] : [{ key: FLEET_SCOPE, limit: bound.fleet }]),
  ];
}

/**
 * Who holds a lease: the workload and the restart it belongs to. The restart token is derived from the changes, so
 * a re-delivered message or a follow-up names the same holder and finds its own lease.
 */
export const slotHolder = (w: WorkloadRef & { restartToken: string }): string =>
  `${w.cluster}/${w.namespace}/${w.kind}/${w.name}@${w.restartToken.slice(0, 32)}`;

/** How long past its rollout's deadline a lease lives: a margin for the clocks of the workers and the store. */
export const LEASE_MARGIN_MS = 5_000;
