/**
 * One consumer's line of `vault-rollout status` (lib/status/fleet-status.ts): the version it records against the
 * current one, where its rollout stands, whether it is halted or skipped a change by keys, and so whether it is safe
 * to revoke.
 */
import { shellQuote } from '../kernel/shell-quote.ts';
import type { KeySkip } from '../plan/restart-record.ts';
import { notifyOnly } from '../plan/route-modes.ts';
import { rolloutTimeoutMs, type RoutingTable } from '../routing/routing-table.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import type { Health, RolloutState } from '../workloads/rollout-health.ts';
import type { KubeObject, WorkloadDescriptor } from '../workloads/workload-kinds.ts';
import { haltedReason, recordedFor, restartedAt, skipOf } from './listings.ts';
import type { ClusterListing, ConsumerState, ConsumerStatus, RunningPods } from './model.ts';
import { runningPods } from './running-pods.ts';

export const isNewer = (a: number | string, b: number | string): boolean =>
  typeof a === 'number' && typeof b === 'number' ? a > b : String(a) > String(b);

/** A listed object that consumes a path: the routes that target it, none when it only records the path. */
export interface ConsumerRow {
  routes: string[];
  cluster: string;
  descriptor: WorkloadDescriptor;
  obj: KubeObject;
  routed: boolean;
}

/** What the consumers of one path are judged against: its current version, and where that came from. */
export interface PathJudgement {
  readonly table: RoutingTable;
  readonly path: string;
  readonly current: number | string | null;
  readonly fromVault: boolean;
  readonly now: number;
}

/** The repair a person pastes: the path one shell-quoted word; none for a key no Vault path could be. */
function resetVersionCommand(path: string, current: number | string | null): string {
  if (vaultPathProblem(path) !== undefined) return 'vault-rollout reset-version (the key is no Vault path)';
  return `vault-rollout reset-version --path ${shellQuote(path)} --version ${shellQuote(String(current))}`;
}

/** The rollout as the object tells it, or timeout when it still progresses past the deadline of its routes. */
function rolloutOf(row: ConsumerRow, health: Health, at: PathJudgement): { rollout: RolloutState; detail: string } {
  if (health.state !== 'progressing') return { rollout: health.state, detail: health.message };
  const since = restartedAt(row.descriptor, row.obj);
  const deadline = rolloutTimeoutMs(at.table, row.cluster, row.routes);
  if (since === undefined || at.now - since <= deadline) return { rollout: health.state, detail: health.message };
  return {
    rollout: 'timeout',
    detail: `still progressing ${Math.round((at.now - since) / 60_000)} min after its restart (deadline ${Math.round(deadline / 60_000)} min): ${health.message}`,
  };
}

/** The recorded version against the current one; above Vault's own current version is a forged or replayed change. */
function versionState(recorded: number | string | null, at: PathJudgement): ConsumerState {
  const { current } = at;
  if (current === null) return recorded === null ? 'unknown' : 'current';
  if (recorded === null) return 'behind';
  if (at.fromVault && typeof recorded === 'number' && typeof current === 'number' && recorded > current)
    return 'poisoned';
  if (typeof recorded !== typeof current) return 'behind';
  return isNewer(current, recorded) ? 'behind' : 'current';
}

/** The status of one consumer of the path. */
export function consumerStatus(
  row: ConsumerRow,
  at: PathJudgement,
  listing: ClusterListing | undefined,
): ConsumerStatus {
  const { descriptor, obj, cluster } = row;
  const { path, current } = at;
  const recorded = recordedFor(descriptor, obj, path);
  const health = descriptor.health(obj);
  const followed = rolloutOf(row, health, at);
  const { rollout } = followed;
  let { detail } = followed;
  let state = versionState(recorded, at);
  if (state === 'behind')
    detail =
      recorded === null
        ? 'never restarted for this path'
        : `records ${JSON.stringify(recorded)}, current is ${JSON.stringify(current)}`;
  if (state === 'poisoned') {
    detail =
      `records version ${recorded}, above Vault's current_version ${current}: a forged or replayed change; ` +
      `repair with ${resetVersionCommand(path, current)}`;
  }
  const skip = unverifiedSkip(skipOf(obj, path), recorded, at.fromVault ? current : null);
  if (skip && state !== 'poisoned') {
    state = 'behind';
    detail = `skipped by keys (unverified): keys ${skip.skipped.join(', ')} unchanged in v${skip.v}, as a change claimed; not safe to revoke until reconcile confirms v${skip.v} with Vault`;
  }
  const announced = row.routed && notifyOnly(at.table, row.routes);
  if (announced && state === 'behind')
    detail = `${detail}; its routes are notify-only (mode: notify): vault-rollout announces the version and restarts nothing`;
  const halted = haltedReason(descriptor, obj, listing);
  const pods = runningPods(descriptor, obj, listing, path);
  const rolledOut = state === 'current' && (rollout === 'complete' || rollout === 'none') && halted === undefined;
  const ok = rolledOut && podsAllOnRecord(pods);
  if (rolledOut && !ok) detail = olderPodsDetail(pods as RunningPods, health.message);
  return {
    cluster,
    namespace: obj.metadata?.namespace ?? '',
    kind: obj.kind ?? descriptor.kind,
    name: obj.metadata?.name ?? '',
    recorded,
    state,
    rollout,
    ...(health.pods ? { pods: health.pods } : {}),
    ...(pods ? { runningPods: pods } : {}),
    ...(halted !== undefined ? { halted } : {}),
    ...(skip ? { skippedByKeys: skip } : {}),
    routed: row.routed,
    ...(announced ? { notifyOnly: true as const } : {}),
    ok,
    detail: halted !== undefined && state === 'current' ? `halted: ${halted}` : detail,
  };
}

/**
 * A key-level skip that stands between the record and current: newer than the version recorded, and (when Vault
 * answered) not above Vault's current version — a skip of a version Vault never had changes nothing the pods run.
 */
function unverifiedSkip(
  skip: KeySkip | undefined,
  recorded: number | string | null,
  vaultCurrent: number | string | null,
): KeySkip | undefined {
  if (skip === undefined || typeof recorded === 'string' || (recorded !== null && skip.v <= recorded)) return undefined;
  return typeof vaultCurrent === 'number' && skip.v > vaultCurrent ? undefined : skip;
}

/** Safe only when no pod runs an older revision, and the pods could be counted (undefined: the kind has none). */
const podsAllOnRecord = (pods: RunningPods | undefined): boolean =>
  pods === undefined || (pods.unread === undefined && pods.older === 0);

/** Why a consumer whose workload looks rolled out is still not safe: its older pods, or pods not counted. */
function olderPodsDetail(pods: RunningPods, rollout: string): string {
  if (pods.unread !== undefined) return `pods not counted (${pods.unread}); not safe to revoke until they can be`;
  return `${pods.older} pod(s) still run an older template (${pods.onRecorded} on the recorded version; the workload says: ${rollout})`;
}
