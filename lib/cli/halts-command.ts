/**
 * `vault-rollout halts`: the rotations a wave's gate halted, from the rotation store every path that restarts reads
 * (lib/rotations), and the one way to clear a halt without writing a new version of the secret.
 *
 *   halts [list] [--json]      every halt: rotation, secrets, wave, the failing workload, why, what was not restarted;
 *                              and the latest clears: who cleared which halt, from which host, when
 *   halts clear ROTATION [--routes FILE]   clears it; the next change or reconcile of those versions starts again
 *                              from wave 1. Who cleared it (user, host, time) stays in the store, and with --routes
 *                              also as a RotationHaltCleared Event on the workload that failed the gate.
 *
 * Store: VAULT_ROLLOUT_STATE_TABLE (a Lambda deployment's DynamoDB table), VAULT_ROLLOUT_STATE_DB, else the local
 * state file that serve and apply use.
 */
import { hostname, userInfo } from 'node:os';
import { haltClearedEvent } from '../engine/events.ts';
import { kubeApiFor } from '../kube/kube-api.ts';
import { clearanceOf, type ClearedBy, type HaltClearance, type RotationHalt } from '../rotations/rotation-store.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { cliRotationStore, cliRotationStoreName } from './rotation-store.ts';
import { printable } from '../report/printable.ts';
import { table as renderTable } from '../report/table.ts';
import { loadRoutes, usageError } from './shared.ts';
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
  if (action === 'list' && rotation !== undefined) return usageError(io, 'halts', 'use: halts [list] [-o json|yaml] | halts clear ROTATION [--routes FILE]');
  if (action === 'clear' && (rotation === undefined || !ROTATION.test(rotation))) return usageError(io, 'halts', 'halts clear takes the ROTATION key that `halts` (or status, or the halt\'s log line) shows');
  // The table first: a clear whose Event cannot be recorded for want of a readable table is not started.
  const table = action === 'clear' && values.routes !== undefined ? await loadRoutes(io, values.routes) : undefined;
  if (typeof table === 'number') return table;
  const store = await cliRotationStore(io);
  try {
    if (action === 'clear') {
      const by = clearedBy(io.env);
      const cleared = await store.clear(rotation as string, by);
      if (!cleared) {
        io.stderr(`vault-rollout halts: no halt of rotation ${rotation as string} in ${cliRotationStoreName(io)}\n`);
        return EXIT.failure;
      }
      io.stdout(`Cleared the halt of rotation ${cleared.rotation} (${printable(cleared.secrets.join(', '))}; halted at wave ${cleared.wave} of ${cleared.waves}) as ${printable(by.user)} on ${printable(by.host)} at ${by.clearedAt}, recorded in ${cliRotationStoreName(io)}. The next change or reconcile of these versions starts again from wave 1.\n`);
      if (table) await recordClearEvent(io, table, values.routes as string, clearanceOf(cleared, by));
      else io.stderr(`vault-rollout halts: no Event recorded in cluster ${cleared.failing.cluster}: give --routes FILE to record who cleared the halt on ${cleared.failing.kind} ${cleared.failing.namespace}/${cleared.failing.name} too\n`);
      return EXIT.ok;
    }
    const halts = await store.halts();
    const clearances = (await store.clearances?.()) ?? [];
    printData(io, values.output, () => ({ store: cliRotationStoreName(io), halts, clearances }), () => haltsText(halts, cliRotationStoreName(io)) + clearancesText(clearances));
    return EXIT.ok;
  } finally {
    store.close?.();
  }
}

/** Who runs this: the operating system's user (the environment's when the system has no name for the uid), the host. */
export function clearedBy(env: CliIo['env'], now: () => number = Date.now): ClearedBy {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = env.USER || env.LOGNAME || `uid ${process.getuid?.() ?? '?'}`;
  }
  return { user: user.slice(0, 256), host: hostname().slice(0, 256), clearedAt: new Date(now()).toISOString() };
}

/** The clear's Event on the workload that failed the gate; best effort: the clear and its trail in the store stand. */
async function recordClearEvent(io: CliIo, table: Exclude<Awaited<ReturnType<typeof loadRoutes>>, number>, routesFile: string, c: HaltClearance): Promise<void> {
  const { cluster, namespace, kind, name } = c.failing;
  const config = table.clusters.get(cluster);
  if (!config) {
    io.stderr(`vault-rollout halts: no Event recorded: cluster ${cluster} is not in ${routesFile}\n`);
    return;
  }
  try {
    const api = kubeApiFor(await cliClusterClients(io, routesFile).get(cluster, config));
    await api.create(haltClearedEvent(c));
    io.stdout(`Recorded a RotationHaltCleared Event on ${kind} ${namespace}/${name} in ${cluster}.\n`);
  } catch (e) {
    io.stderr(`vault-rollout halts: could not record the RotationHaltCleared Event in ${cluster}: ${classifyKubeError(e).reason}\n`);
  }
}

const LISTED_CLEARANCES = 10;

export function clearancesText(clearances: readonly HaltClearance[]): string {
  if (clearances.length === 0) return '';
  const rows = clearances.slice(0, LISTED_CLEARANCES).map((c) => [c.rotation, c.clearedAt, c.user, c.host, c.secrets.join(', '), `${c.wave} of ${c.waves}`].map(printable));
  return `\nLatest clears (${Math.min(clearances.length, LISTED_CLEARANCES)} of ${clearances.length} kept; -o json lists them all):\n${renderTable(['ROTATION', 'CLEARED AT', 'BY', 'HOST', 'SECRETS', 'WAVE'], rows)}`;
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
