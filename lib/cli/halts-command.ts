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
import { BREAKER_STATE, breakerKey } from '../plan/restart-breaker.ts';
import { clearanceOf, type ClearedBy, type HaltClearance } from '../rotations/rotation-store.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { cliRotationStoreName, cliRotationStoreToRead } from './rotation-store.ts';
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
  const use = 'use: halts [list] [-o json|yaml] | halts clear ROTATION [--routes FILE]';
  if (action === 'list' && rotation !== undefined) return usageError(io, 'halts', use);
  if (action === 'clear' && (rotation === undefined || !ROTATION.test(rotation)))
    return usageError(
      io,
      'halts',
      "halts clear takes the ROTATION key that `halts` (or status, or the halt's log line) shows",
    );
  // The table first: a clear whose Event cannot be recorded for want of a readable table is not started.
  const table =
    action === 'clear' && values.routes !== undefined
      ? await loadRoutes(io, values.routes, { command: 'halts', values: values['cluster-kubeconfig'] })
      : undefined;
  if (typeof table === 'number') return table;
  // Neither a read nor a clear creates the store: where nothing was recorded, there is no halt to list or clear.
  const store = await cliRotationStoreToRead(io);
  try {
    const routes = table && { table, file: values.routes as string };
    if (action === 'clear') return await clearHalt(io, store, rotation as string, routes);
    const halts = store === undefined ? [] : await store.halts();
    const clearances = (await store?.clearances?.()) ?? [];
    const name = cliRotationStoreName(io);
    const text = () => haltsText(halts, name) + clearancesText(clearances);
    printData(io, values.output, () => ({ store: name, halts, clearances }), text);
    return EXIT.ok;
  } finally {
    store?.close?.();
  }
}

type Routes = { table: RoutingTable; file: string } | undefined;

/** Clears the halt, keeping who cleared it in the store, and with a routing table as an Event in the cluster. */
async function clearHalt(
  io: CliIo,
  store: RotationStore | undefined,
  rotation: string,
  routes: Routes,
): Promise<number> {
  const by = clearedBy(io.env);
  const cleared = await store?.clear(rotation, by);
  if (!cleared) {
    io.stderr(`vault-rollout halts: no halt of rotation ${rotation} in ${cliRotationStoreName(io)}\n`);
    return EXIT.failure;
  }
  const what = `${printable(cleared.secrets.join(', '))}; halted at wave ${cleared.wave} of ${cleared.waves}`;
  const who = `as ${printable(by.user)} on ${printable(by.host)} at ${by.clearedAt}`;
  io.stdout(
    `Cleared the halt of rotation ${cleared.rotation} (${what}) ${who}, recorded in ${cliRotationStoreName(io)}. ` +
      'The next change or reconcile of these versions starts again from wave 1.\n',
  );
  const { cluster, kind, namespace, name } = cleared.failing;
  if (cleared.failing.state === BREAKER_STATE && store?.resetRestarts) {
    // A breaker's halt: clearing it resets the breaker, so the next restart of the workload goes.
    await store.resetRestarts(breakerKey(cleared.failing));
    io.stdout(`Reset the restart breaker of ${printable(`${kind} ${namespace}/${name} in ${cluster}`)}.\n`);
  }
  if (routes) await recordClearEvent(io, routes, clearanceOf(cleared, by));
  else {
    const on = `${kind} ${namespace}/${name} in ${cluster}`;
    io.stderr(`vault-rollout halts: no Event recorded on ${on}: give --routes FILE to record one\n`);
  }
  return EXIT.ok;
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
async function recordClearEvent(io: CliIo, routes: NonNullable<Routes>, c: HaltClearance): Promise<void> {
  const { cluster, namespace, kind, name } = c.failing;
  const config = routes.table.clusters.get(cluster);
  if (!config) {
    io.stderr(`vault-rollout halts: no Event recorded: cluster ${cluster} is not in ${routes.file}\n`);
    return;
  }
  try {
    const api = kubeApiFor(await cliClusterClients(io, routes.file).get(cluster, config));
    await api.create(haltClearedEvent(c));
    io.stdout(`Recorded a RotationHaltCleared Event on ${kind} ${namespace}/${name} in ${cluster}.\n`);
  } catch (e) {
    const reason = classifyKubeError(e).reason;
    io.stderr(`vault-rollout halts: could not record the RotationHaltCleared Event in ${cluster}: ${reason}\n`);
  }
}

const LISTED_CLEARANCES = 10;

export function clearancesText(clearances: readonly HaltClearance[]): string {
  if (clearances.length === 0) return '';
  const wave = (c: HaltClearance) => `${c.wave} of ${c.waves}`;
  const row = (c: HaltClearance) => [c.rotation, c.clearedAt, c.user, c.host, c.secrets.join(', '), wave(c)];
  const rows = clearances.slice(0, LISTED_CLEARANCES).map((c) => row(c).map(printable));
  const shown = Math.min(clearances.length, LISTED_CLEARANCES);
  const table = renderTable(['ROTATION', 'CLEARED AT', 'BY', 'HOST', 'SECRETS', 'WAVE'], rows);
  return `\nLatest clears (${shown} of ${clearances.length} kept; -o json lists them all):\n${table}`;
}

export function haltsText(halts: readonly RotationHalt[], store: string): string {
  if (halts.length === 0) return `No halted rotation (${store}).\n`;
  const rows = halts.map((h) =>
    [
      h.rotation,
      h.haltedAt,
      h.secrets.join(', '),
      `${h.wave} of ${h.waves}`,
      `${h.failing.kind} ${h.failing.namespace}/${h.failing.name} in ${h.failing.cluster}`,
      h.notRestarted.join(', '),
      h.why,
    ].map(printable),
  );
  return `${renderTable(['ROTATION', 'HALTED AT', 'SECRETS', 'WAVE', 'FAILING', 'NOT RESTARTED', 'WHY'], rows)}\nFix the cause, then either write a fixed version of the secret (it starts again from wave 1) or run: vault-rollout halts clear ROTATION (${store}).\n`;
}

/** What `apply` and `reset-version` say about halts met in the foreground. */
export function printForegroundHalts(
  io: CliIo,
  command: string,
  halts: readonly RotationHalt[],
  refused: ReadonlyArray<{ rotation: string; reason: string }>,
  store: string,
): void {
  for (const r of refused) io.stderr(`vault-rollout ${command}: not started: ${printable(r.reason)}\n`);
  for (const h of halts)
    io.stderr(
      `vault-rollout ${command}: HALTED rotation ${h.rotation} (${printable(h.secrets.join(', '))}) at wave ${h.wave} of ${h.waves}: ${printable(h.why)}. Not restarted: ${h.notRestarted.join(', ') || 'none'}. Recorded in ${store}; clear with: vault-rollout halts clear ${h.rotation}\n`,
    );
}
