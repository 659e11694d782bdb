/**
 * The wave guard: what the worker checks, against the rotation store, before it restarts anything. A
 * message is a claim, never a command, so the worker does not take its `wave` on trust:
 *
 * - a message (cluster or gate) carrying a change of a halted rotation is refused, whoever sent it — the intake, a
 *   reconcile run, a relay, a forged sender — until an operator clears the halt (`vault-rollout halts clear`);
 * - a cluster message is planned again into its change sets (the same sets the intake and the gate compute, since it
 *   carries the whole set): in each set its cluster falls in some wave; the first wave may restart at once, a later
 *   wave only once a passed gate released it (the store's `releasedWave`);
 * - a gate for a later wave is refused unless that wave was released: a gate can never skip the waves before it.
 *
 * A refused message is dead-lettered with the reason (never silently dropped, never executed).
 */
import type { Plan, RolloutTarget } from '../plan/planner.ts';
import { targetWave } from '../plan/target-waves.ts';
import type { ChangeSet } from '../plan/waves.ts';
import { qualify } from '../sources/kv-mounts.ts';
import { changeIdentity, type QueuedChange } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { changeSets, secretIdentity } from '../plan/cluster-changes.ts';

/** Why a message of a halted rotation is refused, and what clears it. */
export function haltedReason(halt: RotationHalt): string {
  return `rotation ${halt.rotation} (${halt.secrets.slice(0, 5).join(', ')}${halt.secrets.length > 5 ? ', …' : ''}) halted at wave ${halt.wave} of ${halt.waves} at ${halt.haltedAt}: ${halt.why.slice(0, 300)}; write a fixed version of the secret, or clear the halt with \`vault-rollout halts clear ${halt.rotation}\``;
}

/** The first halt naming any of these changes, or undefined. */
export async function haltOf(
  store: RotationStore,
  changes: readonly QueuedChange[],
): Promise<RotationHalt | undefined> {
  const halts = await store.haltsOf(changes.map(changeIdentity));
  return halts.sort((a, b) => a.haltedAt.localeCompare(b.haltedAt))[0];
}

/**
 * Why a cluster message may not restart anything now, or undefined when it may: a halted change, its cluster's
 * targets all in a wave of one of its rotations that no passed gate released, or a claim (`wave`) of a wave no
 * passed gate released. `planned` is the worker's own plan of the message (its changes over every cluster); the
 * message's table hash only explains a refusal.
 */
export async function clusterMessageRefusal(
  table: RoutingTable,
  store: RotationStore,
  cluster: string,
  planned: {
    message: { changes: readonly QueuedChange[]; table?: string; wave?: number };
    changes: readonly SecretChange[];
    plan: Plan;
  },
): Promise<string | undefined> {
  const halt = await haltOf(store, planned.message.changes);
  if (halt) return haltedReason(halt);
  if (!table.routes.some((r) => r.policy.waves !== undefined)) return undefined;
  const senderTable = planned.message.table;
  const sender =
    senderTable !== undefined && senderTable !== table.hash
      ? ` (the sender planned with routing table ${senderTable}, this worker's is ${table.hash})`
      : '';
  const claimed = planned.message.wave ?? 0;
  for (const { set, waves } of clusterWaves(table, cluster, planned)) {
    const wave = Math.min(...waves.values());
    if (wave <= 0 && claimed <= 0) continue;
    const released = await store.releasedWave(set.key);
    if (released < wave)
      return `cluster "${cluster}" is in wave ${wave + 1} of ${set.waves.length} of rotation ${set.key} (route ${set.route}), and no passed gate released that wave (released: up to wave ${released + 1})${sender}`;
    // A message only narrows what it restarts; one naming a later wave than released is a forged or stale claim.
    if (set.waves.length > 1 && released < claimed)
      return `the message claims wave ${claimed + 1} of ${set.waves.length} of rotation ${set.key} (route ${set.route}), which no passed gate released (released: up to wave ${released + 1})${sender}`;
  }
  return undefined;
}

/** Per change set of the message, the wave of each of its targets in this cluster (sets with none left out). */
function clusterWaves(
  table: RoutingTable,
  cluster: string,
  planned: { changes: readonly SecretChange[]; plan: Plan },
  targets: readonly RolloutTarget[] = planned.plan.targets.filter((t) => t.cluster === cluster),
): Array<{ set: ChangeSet; waves: Map<RolloutTarget, number> }> {
  return changeSets(table, planned.changes, planned.plan).flatMap((set) => {
    const inSet = new Set(set.changes.map((c) => secretIdentity({ ...c, path: qualify(c.namespace, c.path) })));
    const waves = new Map<RolloutTarget, number>();
    for (const t of targets) {
      if (!t.secrets.some((s) => inSet.has(secretIdentity(s)))) continue;
      const wave = targetWave(set.waves, t);
      if (wave >= 0) waves.set(t, wave);
    }
    return waves.size === 0 ? [] : [{ set, waves }];
  });
}

/**
 * The message's targets in its cluster that may restart now: those whose wave, in every rotation of theirs, a
 * passed gate released (or the first). Only waves that select targets split a cluster; without them every target
 * of a cluster the guard let through may restart.
 */
export async function releasedTargets(
  table: RoutingTable,
  store: RotationStore,
  cluster: string,
  planned: { changes: readonly SecretChange[]; plan: Plan; targets: RolloutTarget[] },
): Promise<RolloutTarget[]> {
  if (!table.routes.some((r) => r.policy.waveTargets !== undefined)) return planned.targets;
  const held = new Set<RolloutTarget>();
  for (const { set, waves } of clusterWaves(table, cluster, planned, planned.targets)) {
    if (Math.max(...waves.values()) <= 0) continue;
    const released = await store.releasedWave(set.key);
    for (const [t, wave] of waves) if (wave > released) held.add(t);
  }
  return planned.targets.filter((t) => !held.has(t));
}

/**
 * Records, for each rotation of a cluster message the guard let through, that the wave it restarts (the latest of
 * its targets' waves) started now (the first start written stays): the store's clock of that wave's gate. Only a
 * wave that restarts starts it, so a gate for a rotation nothing restarted (a forged one, for a version not written
 * yet) finds no start and cannot halt it.
 */
export async function markWavesStarted(
  table: RoutingTable,
  store: RotationStore,
  cluster: string,
  planned: { changes: readonly SecretChange[]; plan: Plan; targets: readonly RolloutTarget[] },
  at: string,
): Promise<void> {
  if (!table.routes.some((r) => r.policy.waves !== undefined)) return;
  for (const { set, waves } of clusterWaves(table, cluster, planned, planned.targets)) {
    // A single wave has no gate to time it.
    if (set.waves.length > 1) await store.markWave(set.key, Math.max(...waves.values()), 'startedAt', at);
  }
}
