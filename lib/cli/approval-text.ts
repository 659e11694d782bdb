/** What `apply` and `reset-version` say at an approval gate (lib/pipeline/foreground-approval.ts), on stderr. */
import type { AwaitingApproval } from '../pipeline/foreground-approval.ts';
import { approveCommand, type ApprovalRecord } from '../rotations/approvals.ts';
import { printable } from '../report/printable.ts';
import type { CliIo } from './io.ts';

/** Once per waiting wave: what waits, since when, and the exact command that lets it go on. */
export function printApprovalRequested(io: CliIo, command: string, r: ApprovalRecord, approve: string): void {
  io.stderr(
    `vault-rollout ${command}: wave ${r.wave} of ${r.waves} of rotation ${r.rotation} (${printable(r.secrets.join(', '))}) waits for approval (since ${r.since}); waiting here. Approve it with: ${approve}\n`,
  );
}

/** The rotations stopped at a wave nobody approved within its gate's timeout, and how to go on. */
export function printAwaitingApproval(io: CliIo, command: string, stopped: readonly AwaitingApproval[]): void {
  for (const r of stopped)
    io.stderr(
      `vault-rollout ${command}: STOPPED rotation ${r.rotation} (${printable(r.secrets.join(', '))}): wave ${r.wave} of ${r.waves} waits for approval since ${r.since}, past its gate timeout. Approve it with: ${r.command} — then run the same command again.\n`,
    );
}

/** `status`: each wave waiting, as `waits for approval (since …): vault-rollout approve …`. */
export function waitingText(waiting: readonly ApprovalRecord[]): string {
  if (waiting.length === 0) return '';
  const lines = waiting.map(
    (r) =>
      `  rotation ${r.rotation} (${printable(r.secrets.join(', '))}): wave ${r.wave} of ${r.waves} waits for approval (since ${r.since}): ${approveCommand(r.rotation, r.wave)}\n`,
  );
  return `\nWAITING FOR APPROVAL:\n${lines.join('')}`;
}
