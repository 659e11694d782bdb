/**
 * `vault-rollout reset-version`: repairs a poisoned record. A forged change with a huge version (from a log group or
 * an audit socket someone else could write to) leaves `vault-rollout.io/versions` above Vault's real version, and
 * every real rotation of that path is then `skipped: older version`. This records the version the operator read
 * from Vault (`vault kv metadata get` → current_version) on every workload the path's routes target, replacing a
 * higher record. The record lives in the pod template, so each workload whose record changes restarts once — and
 * comes up with the current secret.
 */
import { applyInForeground } from '../pipeline/foreground-waves.ts';
import { cliRotationStore, cliRotationStoreName, refusedForOtherStore } from './rotation-store.ts';
import { printForegroundHalts } from './halts-command.ts';
import { printApprovalRequested, printAwaitingApproval } from './approval-text.ts';
import { planRollouts } from '../plan/planner.ts';
import { guessMount, trimSlashes, underMount } from '../sources/kv-mounts.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, printResults, stderrLogger, usageError } from './shared.ts';
import { parseCommand } from './spec.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import { resetVersion as spec } from './specs.ts';

export async function resetVersionCommand(argv: string[], io: CliIo, now: () => number = Date.now): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined || values.path === undefined || values.version === undefined)
    return usageError(
      io,
      'reset-version',
      "give --routes FILE, --path MOUNT/KEY and --version N (Vault's current_version of the path)",
    );
  // A KV v2 version: a whole number from 1 (its spec bounds it).
  const version = values.version;
  const table = await loadRoutes(io, values.routes, { command: 'reset-version', values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  if (refusedForOtherStore(io, 'reset-version', table, values['dry-run'])) return EXIT.failure;

  const change = resetChange(table, values['vault-namespace'], values.path, version, now);
  if (typeof change === 'string') return usageError(io, 'reset-version', change);
  const { path } = change;
  const plan = planRollouts(table, [change]);
  const only = new Set(values.cluster);
  for (const name of only)
    if (!table.clusters.has(name))
      return usageError(io, 'reset-version', `--cluster ${name} is not in the routing table`);
  const targets = plan.targets.filter((t) => only.size === 0 || only.has(t.cluster));
  if (targets.length === 0) {
    io.stderr(
      `vault-rollout reset-version: no route of ${values.routes} targets ${path}${only.size > 0 ? ` in ${[...only].join(', ')}` : ''}\n`,
    );
    return EXIT.failure;
  }
  const clients = cliClusterClients(io, values.routes);
  // The same waves, gates and halts as every other path that restarts (lib/pipeline/foreground-waves.ts).
  const rotations = await cliRotationStore(io);
  const { results, halts, refused, awaitingApproval } = await applyInForeground([change], plan, {
    table,
    rotations,
    only: (t) => only.size === 0 || only.has(t.cluster),
    onApprovalRequested: (request, command) => printApprovalRequested(io, 'reset-version', request, command),
    executor: {
      access: (name, config) => clients.get(name, config),
      dryRun: values['dry-run'],
      overrideRecorded: true,
      logger: stderrLogger(io),
    },
    followWaves: { budgetMs: 86_400_000 },
  });
  rotations.close?.();
  const parsed = { changes: [change], ignored: [], rejected: [] };
  const shown = { ...plan, targets };
  printResults(io, values.output, parsed, shown, results);
  printForegroundHalts(io, 'reset-version', halts, refused, cliRotationStoreName(io));
  printAwaitingApproval(io, 'reset-version', awaitingApproval);
  if (refused.length > 0 || results.some((r) => r.outcome === 'failed')) return EXIT.targetsFailed;
  if (halts.length > 0) return EXIT.rolloutsFailed;
  return awaitingApproval.length > 0 ? EXIT.awaitingApproval : EXIT.ok;
}

/**
 * The change that records `version` for the path: a write as the audit feed would report it, marked as this command's.
 * Returns why not when the path names a mount rather than a secret under it.
 */
function resetChange(
  table: RoutingTable,
  vaultNamespace: string,
  pathFlag: string,
  version: number,
  now: () => number,
): SecretChange | string {
  // --vault-namespace, else VAULT_NAMESPACE (the spec reads it, as the vault CLI does), else the root namespace.
  const namespace = trimSlashes(vaultNamespace);
  const path = trimSlashes(pathFlag.replace(/^([^/]+)\/(data|metadata)\//, '$1/'));
  const mount = guessMount(table.mounts, namespace, path);
  const key = underMount(path, mount) ?? '';
  if (key === '') return `--path "${path.slice(0, 200)}" names a mount, not a secret under it`;
  const time = new Date(now()).toISOString();
  return {
    namespace,
    mount,
    key,
    path,
    operation: 'write',
    version,
    kvVersion: 2,
    kvVersionFrom: 'routes',
    source: 'audit',
    via: 'direct',
    id: `reset-version-${version}`,
    time,
    record: '--path',
  };
}
