/**
 * `rollout.gate.approval` in the foreground (`apply --wait`, `reset-version`): at a gate that asks for approval the
 * command records the request in the rotation store, as the queue's gate does, says once which command approves it,
 * and waits, reading the store again every few seconds, so `vault-rollout approve` run in another terminal (or by
 * another person) lets it go on. The wait is bounded by the gate's `timeout`, counted from the request: past it the
 * rotation stops here, not halted, its request still in the store; approve it, then run the same command again (the
 * waves already on the version are unchanged and pass their gates at once).
 */
import type { ChangeSet } from '../plan/waves.ts';
import { approveCommand, type ApprovalRecord, type ApprovalRequest } from '../rotations/approvals.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import { waitingWave } from './gate-approval.ts';

/** A rotation the foreground stopped at a wave nobody approved in time. */
export interface AwaitingApproval extends ApprovalRequest {
  command: string;
}

export interface ForegroundApproval {
  rotations: RotationStore;
  now: () => number;
  /** Once per waiting wave: the request as the store holds it, and the command that approves it. */
  onApprovalRequested?: (request: ApprovalRecord, command: string) => void;
}

/** When the wave after `gateWave` was approved (undefined: not yet, or the table asks no approval). */
export async function foregroundApprovedAt(
  deps: ForegroundApproval,
  set: ChangeSet,
  gateWave: number,
): Promise<number | undefined> {
  if (set.policy.gate.approval !== true) return undefined;
  const record = await deps.rotations.approvals?.get(set.key, waitingWave(gateWave));
  return record?.approvedAt === undefined ? undefined : Date.parse(record.approvedAt);
}

/**
 * The gate asks for approval: the request recorded (the first one's time stays) and reported once per wave. Returns
 * the rotation as awaiting approval once the wait is past the gate's timeout, else undefined (wait and look again).
 */
export async function requestInForeground(
  deps: ForegroundApproval,
  set: ChangeSet,
  gateWave: number,
  secrets: string[],
  reported: Set<number>,
): Promise<AwaitingApproval | undefined> {
  const store = deps.rotations.approvals;
  if (store === undefined) throw new Error('this rotation store keeps no approvals: a gate with approval cannot pass');
  const wanted: ApprovalRequest = {
    rotation: set.key,
    route: set.route,
    secrets,
    wave: waitingWave(gateWave),
    waves: set.waves.length,
    since: new Date(deps.now()).toISOString(),
  };
  const request = await store.request(wanted);
  const command = approveCommand(set.key, request.wave);
  if (!reported.has(request.wave)) {
    reported.add(request.wave);
    deps.onApprovalRequested?.(request, command);
  }
  if (deps.now() - Date.parse(request.since) < set.policy.gate.timeoutMs) return undefined;
  return { ...stripApproval(request), command };
}

const stripApproval = (r: ApprovalRecord): ApprovalRequest => ({
  rotation: r.rotation,
  route: r.route,
  secrets: r.secrets,
  wave: r.wave,
  waves: r.waves,
  since: r.since,
});
