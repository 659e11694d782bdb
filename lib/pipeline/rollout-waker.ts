/**
 * Wakes a held message early: in a long-lived process (`serve`, `worker`), a continuation or gate held
 * in the queue to look again later is woken the moment a watch sees one of the rollouts it waits on end, instead of
 * at its next look — so a rollout's last pod Ready reaches the log and its Event within a watch event and a receive.
 *
 * One LIST + WATCH per (cluster, namespace, kind), shared by every held message that waits on a workload there
 * (the follower of lib/engine/rollout-follower.ts, kept open). A follower lives WATCH_LIFETIME_MS, then a new one
 * opens with the cluster's current credentials; a wait that outlives it is woken at the end (one look more, which
 * holds the message again and watches again). The wake is a hint: the look decides, from the cluster, what is done.
 * Lambda has no process to keep a watch in: there the held message comes back at its delay.
 */
import { startFollower, type RolloutFollower } from '../engine/rollout-follower.ts';
import type { Telemetry } from '../kernel/telemetry.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterAccess, KubeApi } from '../workloads/kube-port.ts';
import { SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { withKubeApi, type ExecutorSettings } from './kube-executor.ts';
import type { WatchedWorkload } from './worker-deps.ts';

/** How long one follower (its watches) serves before a fresh one takes over with current credentials. */
export const WATCH_LIFETIME_MS = 10 * 60_000;

/** Held messages watched at once; past it a message waits for its delay (a bound on what a flood of waits costs). */
export const MAX_WATCHED = 10_000;

const descriptorFor = (kind: string): WorkloadDescriptor | undefined =>
  (WORKLOAD_KINDS as Record<string, WorkloadDescriptor>)[kind] ??
  (SYNC_KINDS as Record<string, WorkloadDescriptor>)[kind];

export class RolloutWaker {
  readonly #table: RoutingTable;
  readonly #executor: ExecutorSettings;
  readonly #log: Pick<Telemetry, 'warn'>;
  readonly #apis = new WeakMap<ClusterAccess, KubeApi>();
  readonly #followers = new Map<KubeApi, { follower: RolloutFollower; until: number }>();
  #watched = 0;
  #closed = false;

  constructor(table: RoutingTable, executor: ExecutorSettings, log: Pick<Telemetry, 'warn'>) {
    this.#table = table;
    this.#executor = executor;
    this.#log = log;
  }

  /** Calls `wake` once, when the first of these workloads' rollouts ends (or its watch gives up). Never throws. */
  watch(workloads: readonly WatchedWorkload[], wake: () => void): void {
    if (workloads.length === 0 || this.#watched >= MAX_WATCHED || this.#closed) return;
    this.#watched++;
    let woken = false;
    const once = () => {
      if (woken) return;
      woken = true;
      this.#watched--;
      // A process stopping wakes nothing: the held message comes back at its delay, to the next process.
      if (!this.#closed) wake();
    };
    for (const w of workloads) {
      void this.#follow(w).then(
        (followed) => (followed ? once() : undefined),
        (e: unknown) =>
          this.#log.warn('could not watch a rollout; the held message comes back at its delay', {
            cluster: w.cluster,
            error: e instanceof Error ? e.message.slice(0, 200) : String(e),
          }),
      );
    }
  }

  /** Ends every watch (a process stopping): nothing is woken any more. */
  close(): void {
    this.#closed = true;
    for (const { follower } of this.#followers.values()) follower.stop();
    this.#followers.clear();
  }

  /** Resolves true when the workload's rollout has an answer from the watch; false when it cannot be watched. */
  async #follow(w: WatchedWorkload): Promise<boolean> {
    const descriptor = descriptorFor(w.kind);
    const config = this.#table.clusters.get(w.cluster);
    if (!descriptor || !config || this.#closed) return false;
    const options = withKubeApi(this.#executor);
    const access = await options.access(w.cluster, config);
    if (this.#closed) return false;
    let api = this.#apis.get(access);
    if (!api) this.#apis.set(access, (api = options.apiFor(access)));
    const now = Date.now();
    let current = this.#followers.get(api);
    if (!current || current.until <= now) {
      current?.follower.seal();
      current = { follower: startFollower({ budgetMs: WATCH_LIFETIME_MS }), until: now + WATCH_LIFETIME_MS };
      this.#followers.set(api, current);
      for (const [key, f] of this.#followers) if (f.until <= now) this.#followers.delete(key);
    }
    // No deadline of its own here: the look decides timeouts. Any answer (complete, failed, or the follower's end)
    // wakes.
    await current.follower.follow({
      id: `${w.namespace}/${w.kind}/${w.name}`,
      cluster: w.cluster,
      api,
      descriptor,
      namespace: w.namespace,
      name: w.name,
      restartToken: w.restartToken,
      startedAt: now,
      timeoutMs: 2 * WATCH_LIFETIME_MS,
    });
    return true;
  }
}
