/**
 * `vault-rollout halts`: the rotations a wave's gate halted, from the rotation store every path that restarts reads
 * (lib/rotations), and the one way to clear a halt without writing a new version of the secret.
 *
 *   halts [list] [--json]      every halt: rotation, secrets, wave, the failing workload, why, what was not restarted
 *   halts clear ROTATION       clears it; the next change or reconcile of those versions starts again from wave 1
 *
 * Store: VAULT_ROLLOUT_STATE_TABLE (a Lambda deployment's DynamoDB table), VAULT_ROLLOUT_STATE_DB, else the local
 * state file that serve and apply use.
 */
import type { RotationHalt } from '../rotations/rotation-store.ts';
import { EXIT, type CliIo } from './io.ts';
import { cliRotationStoreName, cliRotationStoreToRead } from './rotation-store.ts';
import { printable } from '../report/printable.ts';
import { table as renderTable } from '../report/table.ts';
import { usageError } from './shared.ts';
import { printData } from './output.ts';
import { parseCommand } from './spec.ts';
import { halts as spec } from './specs.ts';

/** A rotation key as the store writes it: hex, bounded. */
const ROTATION = /^[0-9a-f]{8,64}$/;

export async function haltsCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const [action = 'list', rotation] = args.args;
  if (action === 'list' && rotation !== undefined) return usageError(io, 'halts', 'use: halts [list] [-o json|yaml] | halts clear ROTATION');
  if (action === 'clear' && (rotation === undefined || !ROTATION.test(rotation))) return usageError(io, 'halts', 'halts clear takes the ROTATION key that `halts` (or status, or the halt\'s log line) shows');
  if (action !== 'clear') {
    const store = await cliRotationStoreToRead(io);
    try {
      const halts = store === undefined ? [] : await store.halts();
      const name = cliRotationStoreName(io);
      printData(io, values.output, () => ({ store: name, halts }), () => haltsText(halts, name));
      return EXIT.ok;
    } finally {
      store?.close?.();
    }
  }
  const store = await cliRotationStoreToRead(io);
  try {
    const cleared = store === undefined ? undefined : await store.clear(rotation as string);
    if (!cleared) {
      io.stderr(`vault-rollout halts: no halt of rotation ${rotation as string} in ${cliRotationStoreName(io)}\n`);
      return EXIT.failure;
    }
    io.stdout(`Cleared the halt of rotation ${cleared.rotation} (${cleared.secrets.join(', ')}; halted at wave ${cleared.wave} of ${cleared.waves}). The next change or reconcile of these versions starts again from wave 1.\n`);
    return EXIT.ok;
  } finally {
    store?.close?.();
  }
}

export function haltsText(halts: readonly RotationHalt[], store: string): string {
  if (halts.length === 0) return `No halted rotation (${store}).\n`;
  const rows = halts.map((h) => [h.rotation, h.haltedAt, h.secrets.join(', '), `${h.wave} of ${h.waves}`, `${h.failing.kind} ${h.failing.namespace}/${h.failing.name} in ${h.failing.cluster}`, h.notRestarted.join(', '), h.why].map(printable));
  return `${renderTable(['ROTATION', 'HALTED AT', 'SECRETS', 'WAVE', 'FAILING', 'NOT RESTARTED', 'WHY'], rows)}\nFix the cause, then either write a fixed version of the secret (it starts again from wave 1) or run: vault-rollout halts clear ROTATION (${store}).\n`;
}

/** What `apply` and `reset-version` say about halts met in the foreground. */
export function printForegroundHalts(io: CliIo, command: string, halts: readonly RotationHalt[], refused: ReadonlyArray<{ rotation: string; reason: string }>, store: string): void {
  for (const r of refused) io.stderr(`vault-rollout ${command}: not started: ${printable(r.reason)}\n`);
  for (const h of halts) io.stderr(`vault-rollout ${command}: HALTED rotation ${h.rotation} (${printable(h.secrets.join(', '))}) at wave ${h.wave} of ${h.waves}: ${printable(h.why)}. Not restarted: ${h.notRestarted.join(', ') || 'none'}. Recorded in ${store}; clear with: vault-rollout halts clear ${h.rotation}\n`);
}
