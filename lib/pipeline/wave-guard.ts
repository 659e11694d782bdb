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
import type { Plan } from '../plan/planner.ts';
import { changeIdentity, type QueuedChange } from '../queue/rollout-message.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { changeSets } from '../plan/cluster-changes.ts';

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
 * Why a cluster message may not restart anything now, or undefined when it may: a halted change, or its cluster in a
 * wave of one of its rotations that no passed gate released. `planned` is the worker's own plan of the message (its
 * changes over every cluster); the message's table hash only explains a refusal.
 */
export async function clusterMessageRefusal(
  table: RoutingTable,
  store: RotationStore,
  cluster: string,
  planned: {
    message: { changes: readonly QueuedChange[]; table?: string };
    changes: readonly SecretChange[];
    plan: Plan;
  },
): Promise<string | undefined> {
  const halt = await haltOf(store, planned.message.changes);
  if (halt) return haltedReason(halt);
  if (!table.routes.some((r) => r.policy.waves !== undefined)) return undefined;
  const senderTable = planned.message.table;
  for (const set of changeSets(table, planned.changes, planned.plan)) {
    const wave = set.waves.findIndex((w) => w.clusters.includes(cluster));
    if (wave <= 0) continue;
    const released = await store.releasedWave(set.key);
    if (released >= wave) continue;
    const sender =
      senderTable !== undefined && senderTable !== table.hash
        ? ` (the sender planned with routing table ${senderTable}, this worker's is ${table.hash})`
        : '';
    return `cluster "${cluster}" is in wave ${wave + 1} of ${set.waves.length} of rotation ${set.key} (route ${set.route}), and no passed gate released that wave (released: up to wave ${released + 1})${sender}`;
  }
  return undefined;
}

/**
 * Records, for each rotation of a cluster message the guard let through, that the cluster's wave started now (the
 * first start written stays): the store's clock of that wave's gate. Only a wave that restarts starts it, so a gate
 * for a rotation nothing restarted (a forged one, for a version not written yet) finds no start and cannot halt it.
 */
export async function markWavesStarted(
  table: RoutingTable,
  store: RotationStore,
  cluster: string,
  planned: { changes: readonly SecretChange[]; plan: Plan },
  at: string,
): Promise<void> {
  if (!table.routes.some((r) => r.policy.waves !== undefined)) return;
  for (const set of changeSets(table, planned.changes, planned.plan)) {
    const wave = set.waves.findIndex((w) => w.clusters.includes(cluster));
    // A single wave has no gate to time it.
    if (wave >= 0 && set.waves.length > 1) await store.markWave(set.key, wave, 'startedAt', at);
  }
}
