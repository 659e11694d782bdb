/**
 * Follows restarted workloads until their rollout is complete, failed or past its deadline — or until the caller's
 * time budget ends (a Lambda worker never sleeps past its own timeout), which leaves them `progressing`.
 *
 * One LIST-then-WATCH per (cluster, namespace, kind), shared by every workload followed there (also by those that
 * join while it runs: startFollower); 410 Gone relists, other errors reconnect with backoff, a denied watch falls
 * back to a LIST every few seconds. Level-triggered:
 * every answer is derived from the object the cluster holds now (its kind's health rule), so calling again with
 * the same (cluster, namespace, kind, name, restart token) — a re-delivered message, a follow-up after the budget —
 * gives the same answer without anything remembered in between.
 */
import type { KubeApi } from '../workloads/kube-port.ts';
import type { FollowedRollout, FollowOptions, FollowTarget } from './follow-model.ts';
import { SharedWatch } from './shared-watch.ts';

export {
  DEFAULT_ROLLOUT_TIMEOUT_MS,
  describeRollout,
  type FollowedRollout,
  type FollowOptions,
  type FollowTarget,
} from './follow-model.ts';

const realClock = { now: Date.now };

/**
 * Follows a fixed set of targets: every watch ends as soon as each of its targets has an answer. With a single
 * workload in a (cluster, namespace, kind), its watch is by name: the stream carries nothing else.
 */
export async function followRollouts(
  targets: readonly FollowTarget[],
  options: FollowOptions,
): Promise<Map<string, FollowedRollout>> {
  const follower = startFollower(options);
  const answers = targets.map(async (t) => [t.id, await follower.follow(t)] as const);
  follower.seal();
  return new Map(await Promise.all(answers));
}

export interface RolloutFollower {
  /**
   * Follows one more target in the shared LIST + WATCH of its (cluster, namespace, kind): a watch already open
   * answers from what it has seen, with no new request. Resolves with the target's answer (never rejects).
   */
  follow(target: FollowTarget): Promise<FollowedRollout>;
  /**
   * No more targets will join: each watch ends when its last target has an answer. Also happens when the budget ends.
   */
  seal(): void;
  /** Ends every watch now; a target still without an answer gets `progressing` (a process shutting down). */
  stop(): void;
}

/**
 * A follower that targets join while it runs (a freed `maxUnavailable` slot starts the next restart): the watches
 * stay open, idle ones included, until `seal()` or the end of the budget, so a workload restarted later joins its
 * (cluster, namespace, kind)'s watch instead of starting a LIST and a WATCH of its own.
 */
export function startFollower(options: FollowOptions): RolloutFollower {
  const clock = options.clock ?? realClock;
  const budgetEnd = clock.now() + Math.max(0, options.budgetMs);
  const groups = new Map<KubeApi, Map<string, SharedWatch>>();
  let sealed = false;
  const seal = () => {
    if (sealed) return;
    sealed = true;
    clearTimeout(budgetTimer);
    for (const byKey of groups.values()) for (const g of byKey.values()) g.sealed();
  };
  const budgetTimer = setTimeout(seal, Math.max(0, budgetEnd - clock.now()));
  return {
    follow(target) {
      const byKey = groups.get(target.api) ?? new Map<string, SharedWatch>();
      groups.set(target.api, byKey);
      const key = `${target.namespace}\u0000${target.descriptor.apiVersion}\u0000${target.descriptor.kind}`;
      let group = byKey.get(key);
      if (!group || group.ended())
        byKey.set(key, (group = new SharedWatch(target, options, clock, budgetEnd, () => sealed)));
      return group.join(target);
    },
    seal,
    stop() {
      seal();
      for (const byKey of groups.values()) for (const g of byKey.values()) g.stopped();
    },
  };
}
