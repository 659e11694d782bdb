import { parseArgs } from 'node:util';
import { executeRollouts } from '../kube/rollout-executor.ts';
import { planRollouts } from '../plan/planner.ts';
import { progressView } from '../report/rollout-progress.ts';
import { parseDuration } from '../routing/schema.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { INPUT_OPTIONS, loadChanges, printResults, reportRejected, stderrLogger, usageError } from './shared.ts';
import { slotStoreFromEnv } from '../slots/slot-store-from-env.ts';

/** Longest `--timeout`: like the routing table's deadlines, a day at most. */
const MAX_TIMEOUT_MS = 86_400_000;
/** Without --timeout the deadlines of the routing table end the wait; this only bounds the call. */
const UNBOUNDED_BUDGET_MS = MAX_TIMEOUT_MS + 60_000;

/**
 * `vault-rollout apply`: plan, restart, and (with --wait, the default on a terminal) follow every rollout to its
 * end. Exit 0 when all is well, 3 when a restart failed, 4 when a restart went through but its rollout failed or
 * timed out, 2 for unparsable records.
 */
export async function applyCommand(argv: string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { ...INPUT_OPTIONS, 'dry-run': { type: 'boolean', default: false }, wait: { type: 'boolean' }, timeout: { type: 'string' } },
      strict: true,
      allowPositionals: false,
      allowNegative: true,
    }));
  } catch (e) {
    return usageError(io, 'apply', e);
  }
  const timeoutMs = values.timeout === undefined ? undefined : parseDuration(values.timeout);
  if (values.timeout !== undefined && (timeoutMs === undefined || timeoutMs < 1000 || timeoutMs > MAX_TIMEOUT_MS)) return usageError(io, 'apply', '--timeout must be a duration from 1s to 24h, such as 90s or 10m');
  const wait = (values.wait ?? (io.stdoutIsTTY === true || timeoutMs !== undefined)) && !values['dry-run'];
  const loaded = await loadChanges(io, 'apply', values);
  if (typeof loaded === 'number') return loaded;
  const { table, parsed } = loaded;
  const plan = planRollouts(table, parsed.changes);
  const clients = cliClusterClients(io, values.routes ?? '');
  // The live view goes to stderr, so stdout stays the result (the table, or --json) alone.
  const view = wait ? progressView(io.stderr, io.stderrIsTTY === true && !values.json) : undefined;
  const slots = await slotStoreFromEnv(io.env);
  const results = await executeRollouts(table, plan.targets, {
    access: (name, config) => clients.get(name, config),
    ...(slots ? { slots } : {}),
    dryRun: values['dry-run'],
    logger: stderrLogger(io),
    ...(view ? { follow: { budgetMs: timeoutMs === undefined ? UNBOUNDED_BUDGET_MS : timeoutMs + 5_000, ...(timeoutMs === undefined ? {} : { timeoutMs }), onProgress: (r) => view.update(r) } } : {}),
  });
  view?.close();
  printResults(io, values.json, parsed, plan, results);
  reportRejected(io, 'apply', values.input, parsed);
  // Deferred (rollout.maxUnavailable, no slot before the end): not restarted, like a failed restart.
  if (results.some((r) => r.outcome === 'failed' || r.outcome === 'deferred')) return EXIT.targetsFailed;
  if (results.some((r) => r.rollout === 'failed' || r.rollout === 'timeout')) return EXIT.rolloutsFailed;
  return parsed.rejected.length > 0 ? EXIT.rejectedRecords : EXIT.ok;
}
