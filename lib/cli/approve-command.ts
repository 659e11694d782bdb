/**
 * `vault-rollout approve`: the person's half of `rollout.gate.approval`. A gate whose wave passed the rest of its
 * checks records a request in the rotation store; this records who approved it and when, on a request only, and the
 * gate (serve, the Lambda worker, an `apply` waiting in the foreground) reads it back at its next look.
 *
 *   approve ROTATION [--wave N] [--by WHO]   approves the waiting wave (no --wave: the rotation's one waiting wave)
 *   approve --list                          the waves waiting: rotation, wave, since when, secrets
 *
 * Store: VAULT_ROLLOUT_STATE_TABLE (a Lambda deployment's DynamoDB table), VAULT_ROLLOUT_STATE_DB, else the local
 * state file that serve and apply use.
 */
import {
  APPROVER,
  approveCommand as approveText,
  type ApprovalRecord,
  type ApprovalStore,
} from '../rotations/approvals.ts';
import { printable } from '../report/printable.ts';
import { table as renderTable } from '../report/table.ts';
import { clearedBy } from './halts-command.ts';
import { EXIT, type CliIo } from './io.ts';
import { printData } from './output.ts';
import { cliRotationStoreName, cliRotationStoreToRead } from './rotation-store.ts';
import { usageError } from './shared.ts';
import { parseCommand } from './spec.ts';
import { approve as spec } from './specs.ts';

/** A rotation key as the store writes it: hex, bounded. */
const ROTATION = /^[0-9a-f]{8,64}$/;
const USE = 'use: approve ROTATION [--wave N] [--by WHO] | approve --list';

export async function approveCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const [rotation] = args.args;
  if (values.list === (rotation !== undefined)) return usageError(io, 'approve', USE);
  if (rotation !== undefined && !ROTATION.test(rotation))
    return usageError(
      io,
      'approve',
      'approve takes the ROTATION key that the approval request, status or --list shows',
    );
  const by = values.by ?? clearedBy(io.env).user;
  if (!APPROVER.test(by))
    return usageError(io, 'approve', '--by takes a name of 1-128 letters, digits, spaces and . _ @ + : / \\ -');
  // Neither a list nor an approval creates the store: where nothing was recorded, nothing waits.
  const store = await cliRotationStoreToRead(io);
  const name = cliRotationStoreName(io);
  try {
    const approvals = store?.approvals;
    if (values.list) {
      const pending = (await approvals?.pending()) ?? [];
      printData(
        io,
        values.output,
        () => ({ store: name, pending }),
        () => pendingText(pending, name),
      );
      return EXIT.ok;
    }
    return await approveWave(io, approvals, { rotation: rotation as string, wave: values.wave, by, store: name });
  } finally {
    store?.close?.();
  }
}

/** Approves one waiting wave; a rotation that waits for nothing, or a wave that does not wait, is a clear error. */
async function approveWave(
  io: CliIo,
  approvals: ApprovalStore | undefined,
  asked: { rotation: string; wave: number | undefined; by: string; store: string },
): Promise<number> {
  const { rotation, store } = asked;
  const requests = (await approvals?.ofRotation(rotation)) ?? [];
  const waiting = requests.filter((r) => r.approvedAt === undefined);
  const fail = (why: string) => (io.stderr(`vault-rollout approve: ${why}\n`), EXIT.failure);
  if (requests.length === 0) return fail(`no wave of rotation ${rotation} waits for approval in ${store}`);
  const wave = asked.wave ?? (waiting.length === 1 ? waiting[0]?.wave : undefined);
  if (wave === undefined)
    return fail(
      waiting.length === 0
        ? `no wave of rotation ${rotation} waits for approval (${approvedText(requests)})`
        : `rotation ${rotation} has ${waiting.length} waves waiting (${waiting.map((r) => r.wave).join(', ')}): give --wave N`,
    );
  const request = requests.find((r) => r.wave === wave);
  if (request === undefined)
    return fail(
      `wave ${wave} of rotation ${rotation} does not wait for approval (waiting: ${waiting.map((r) => r.wave).join(', ') || 'none'})`,
    );
  if (request.approvedAt !== undefined) {
    io.stdout(`Wave ${wave} of rotation ${rotation} was already approved (${approvedText([request])}).\n`);
    return EXIT.ok;
  }
  const approved = await approvals?.approve(rotation, wave, asked.by, new Date().toISOString());
  const secrets = printable(request.secrets.join(', '));
  io.stdout(
    `Approved wave ${wave} of ${request.waves} of rotation ${rotation} (${secrets}) as ${approvedText(approved ? [approved] : [])}, recorded in ${store}. ` +
      'Its gate starts the wave at its next look.\n',
  );
  return EXIT.ok;
}

const approvedText = (records: readonly ApprovalRecord[]): string =>
  records
    .filter((r) => r.approvedAt !== undefined)
    .map((r) => `wave ${r.wave} by ${printable(r.approvedBy ?? '?')} at ${r.approvedAt}`)
    .join('; ');

export function pendingText(pending: readonly ApprovalRecord[], store: string): string {
  if (pending.length === 0) return `No wave waits for approval (${store}).\n`;
  const rows = pending.map((r) =>
    [r.rotation, `${r.wave} of ${r.waves}`, r.since, r.secrets.join(', '), approveText(r.rotation, r.wave)].map(
      printable,
    ),
  );
  return renderTable(['ROTATION', 'WAVE', 'WAITING SINCE', 'SECRETS', 'APPROVE WITH'], rows);
}
