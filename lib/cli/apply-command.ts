import { applyInForeground, wavedRotations } from '../pipeline/foreground-waves.ts';
import { planRollouts } from '../plan/planner.ts';
import { progressView } from '../report/rollout-progress.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadChanges, printResults, reportRejected, stderrLogger } from './shared.ts';
import { parseCommand } from './spec.ts';
import { apply as spec } from './specs.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';
import { cliRotationStore, cliRotationStoreName, refusedForOtherStore } from './rotation-store.ts';
import { printForegroundHalts } from './halts-command.ts';
import { printApprovalRequested, printAwaitingApproval } from './approval-text.ts';
import type { RolloutResult } from '../engine/types.ts';
import { waitsForWindow } from '../plan/restart-window.ts';

/** Longest `--timeout`: like the routing table's deadlines, a day at most. */
const MAX_TIMEOUT_MS = 86_400_000;
/** Without --timeout the deadlines of the routing table end the wait; this only bounds the call. */
const UNBOUNDED_BUDGET_MS = MAX_TIMEOUT_MS + 60_000;

/**
 * `vault-rollout apply`: plan, restart, and (with --wait, the default on a terminal and for a table with waves)
 * follow every rollout to its end. A rotation with `rollout.waves` runs wave by wave, each gate decided here as the
 * queue's gates decide it, and halts where they would (lib/pipeline/foreground-waves.ts); `--no-wait` refuses it
 * rather than ignore its waves. A change of a halted rotation is refused. Exit 0 when all is well, 3 when a restart
 * failed (or a halt refused the rotation), 4 when a rollout failed or timed out or a gate halted, 2 for unparsable
 * records, 5 when a wave waited for approval past its gate's timeout. At an approval gate apply waits, as it waits at
 * every gate, printing the command that approves the wave: a person running a rotation by hand is there to approve
 * it (or to ask someone), and a second run after an approval would only repeat what this one already did.
 */
export async function applyCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  // --timeout: from 1 s to a day (MAX_TIMEOUT_MS), checked by its spec.
  const timeoutMs = values.timeout;
  const loaded = await loadChanges(io, 'apply', values);
  if (typeof loaded === 'number') return loaded;
  const { table, parsed } = loaded;
  if (refusedForOtherStore(io, 'apply', table, values['dry-run'])) return EXIT.failure;
  const plan = planRollouts(table, parsed.changes);
  const waved = wavedRotations(table, parsed.changes, plan);
  const wait =
    (values.wait ?? (io.stdoutIsTTY === true || timeoutMs !== undefined || waved.length > 0)) && !values['dry-run'];
  if (!wait && !values['dry-run'] && waved.length > 0) {
    io.stderr(
      `vault-rollout apply: ${waved.map((s) => `route ${s.route} rolls out in ${s.waves.length} waves (${s.waves.map((w) => w.clusters.join(',')).join(' -> ')})`).join('; ')}: --no-wait would restart every wave at once. Run apply --wait (each wave and its gate run here), or send the change to serve or the queue.\n`,
    );
    return EXIT.usage;
  }
  const clients = cliClusterClients(io, values.routes ?? '');
  // The live view goes to stderr, so stdout stays the result (the table, or --json) alone.
  const view = !wait ? undefined : liveView(io, values.quiet, values.output);
  const slots = await slotStoreFromEnv(io.env);
  // Halts and released waves: shared with serve, the worker and status (VAULT_ROLLOUT_STATE_TABLE / _DB, else the state
  // file).
  const rotations = await cliRotationStore(io);
  const logger = stderrLogger(io);
  const { results, halts, refused, windows, awaitingApproval } = await applyInForeground(parsed.changes, plan, {
    table,
    rotations,
    log: { info: () => undefined, warn: (m, f) => logger.warn(m, f) },
    onApprovalRequested: (request, command) => printApprovalRequested(io, 'apply', request, command),
    executor: {
      access: (name, config) => clients.get(name, config),
      ...(slots ? { slots } : {}),
      dryRun: values['dry-run'],
      logger,
      ...(view
        ? {
            follow: {
              budgetMs: timeoutMs === undefined ? UNBOUNDED_BUDGET_MS : timeoutMs + 5_000,
              ...(timeoutMs === undefined ? {} : { timeoutMs }),
              onProgress: (r) => view.update(r),
            },
          }
        : {}),
    },
  });
  view?.close();
  rotations.close?.();
  printResults(io, values.output, parsed, plan, results);
  reportRejected(io, 'apply', values.input, parsed);
  printForegroundHalts(io, 'apply', halts, refused, cliRotationStoreName(io));
  printWindowDeferrals(io, windows ?? []);
  printAwaitingApproval(io, 'apply', awaitingApproval);
  const exit = applyExit(results, halts.length, refused.length, parsed.rejected.length);
  return exit === EXIT.ok && awaitingApproval.length > 0 ? EXIT.awaitingApproval : exit;
}

/** The rotations a closed maintenance window deferred, and what to do then. */
function printWindowDeferrals(io: CliIo, windows: ReadonlyArray<{ route: string; wave: number; opensAt: number }>) {
  for (const w of windows)
    io.stderr(
      `vault-rollout apply: route ${w.route}, wave ${w.wave}: deferred: ${waitsForWindow(w.opensAt)}; apply it again then, or send the change to serve or the queue, which restart it when the window opens\n`,
    );
}

/** --quiet: followed all the same, without the live view. */
function liveView(
  io: CliIo,
  quiet: boolean,
  output: string,
): Pick<ReturnType<typeof progressView>, 'update' | 'close'> {
  return quiet
    ? { update: () => undefined, close: () => undefined }
    : progressView(io.stderr, io.stderrIsTTY === true && output === 'table');
}

/** apply's exit code: refused or failed restarts first, then halts and failed rollouts, then unparsable records. */
function applyExit(results: readonly RolloutResult[], halts: number, refused: number, rejected: number): number {
  if (refused > 0) return EXIT.targetsFailed;
  if (halts > 0) return EXIT.rolloutsFailed;
  // Deferred (rollout.maxUnavailable, no slot before the end; a closed maintenance window): not restarted, like a
  // failed restart.
  if (results.some((r) => r.outcome === 'failed' || r.outcome === 'deferred')) return EXIT.targetsFailed;
  if (results.some((r) => r.rollout === 'failed' || r.rollout === 'timeout')) return EXIT.rolloutsFailed;
  return rejected > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
