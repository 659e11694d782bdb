/**
 * A gate with `rollout.gate.approval`: once its wave passed the rest of the gate, the next wave waits for
 * `vault-rollout approve`. The gate records the request in the rotation store (the first one's time stays), notifies
 * once per rotation and wave with the exact command, and looks again later like any waiting gate; the approval is
 * read back from the store only (lib/rotations/approvals.ts), so no message can approve a wave.
 */
import { approveCommand, type ApprovalRequest } from '../rotations/approvals.ts';
import type { ChangeSet } from '../plan/waves.ts';
import type { Gate } from './gate-look.ts';
import { noticeApprovalRequested } from './rotation-notices.ts';
import type { WorkerDeps } from './worker-deps.ts';

/** The 1-based number of the wave a gate releases: the gate of wave index `gateWave` releases the one after it. */
export const waitingWave = (gateWave: number): number => gateWave + 2;

/**
 * When the wave after `gateWave` was approved, as the store holds it: undefined when it was not (or the table asks
 * no approval), false when the store could not be read (the gate is then redelivered).
 */
export async function approvalTime(
  deps: Pick<WorkerDeps, 'rotations' | 'telemetry'>,
  set: Pick<ChangeSet, 'key' | 'policy'>,
  gateWave: number,
): Promise<number | undefined | false> {
  const store = deps.rotations.approvals;
  if (set.policy.gate.approval !== true || store === undefined) return undefined;
  try {
    const record = await store.get(set.key, waitingWave(gateWave));
    return record?.approvedAt === undefined ? undefined : Date.parse(record.approvedAt);
  } catch (e) {
    deps.telemetry.warn("could not read the wave's approval; the gate will be redelivered", {
      rotation: set.key,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
}

/** Records that the next wave waits for approval and says so once. False: the store failed (redeliver the gate). */
export async function askApproval(gate: Gate): Promise<boolean> {
  const { deps, set, message, secrets, fields } = gate;
  const store = deps.rotations.approvals;
  if (store === undefined) {
    deps.telemetry.warn('this rotation store keeps no approvals; the wave waits', fields);
    return true;
  }
  const wanted: ApprovalRequest = {
    rotation: set.key,
    route: set.route,
    secrets,
    wave: waitingWave(message.wave),
    waves: set.waves.length,
    since: new Date(gate.now()).toISOString(),
  };
  let request: ApprovalRequest;
  try {
    request = await store.request(wanted);
  } catch (e) {
    deps.telemetry.warn('could not record the approval request; the gate will be redelivered', {
      ...fields,
      error: e instanceof Error ? e.name : String(e),
    });
    return false;
  }
  const command = approveCommand(set.key, request.wave);
  // Logged at every look (a person reading the log finds the command); notified once (the outbox keeps one per id).
  deps.telemetry.info('wave waits for approval', { ...fields, waiting: request.wave, since: request.since, command });
  await noticeApprovalRequested(deps, request, command);
  return true;
}
