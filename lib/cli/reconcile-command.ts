/**
 * `vault-rollout reconcile --routes FILE`: compare Vault's current versions (metadata only) with what every routed
 * workload records, and send what is behind through the same queue and worker as a change from the feed. The
 * queue: SQS with --queue-url (or VAULT_ROLLOUT_QUEUE_URL), where the deployed worker takes it; otherwise an
 * in-process queue worked here until empty, like `serve`. --dry-run reads everything and changes nothing.
 */
import { waitsForWindow } from '../plan/restart-window.ts';
import { SQSClient } from '@aws-sdk/client-sqs';
import { memoryTelemetry } from '../kernel/telemetry.ts';
import { reconcile, type ReconcileReport } from '../pipeline/reconcile.ts';
import { memoryRolloutQueue } from '../queue/sqlite-queue.ts';
import type { LocalRolloutQueue } from '../queue/local-queue.ts';
import type { RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import type { ClusterClients } from '../kube/cluster-clients.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import type { RolloutQueue } from '../queue/rollout-message.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import { jsonLinesLog } from '../kernel/log.ts';
import { startLocalWorker } from '../runtime/local-worker.ts';
import { cliVaultConnection } from './vault-connection.ts';
import { VaultMetadataClient } from '../vault/metadata-client.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { printData, withWaitIndicator } from './output.ts';
import { reconcileText, type WorkedResult } from './reconcile-text.ts';
import { parseCommand, type Values } from './spec.ts';
import { reconcile as spec } from './specs.ts';
import { cliRotationStore, refusedForOtherStore } from './rotation-store.ts';

type ReconcileValues = Values<typeof spec>;

export async function reconcileCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const routes = values.routes;
  if (routes === undefined) return usageError(io, 'reconcile', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  // --vault-addr, else VAULT_ADDR (its spec reads the variable).
  const vaultAddr = values['vault-addr'];
  if (!vaultAddr || !/^https?:\/\//.test(vaultAddr) || !URL.canParse(vaultAddr))
    return usageError(io, 'reconcile', 'give --vault-addr (or VAULT_ADDR): http(s)://HOST:PORT');
  const maxPaths = values['max-paths'];
  const table = await loadRoutes(io, routes, { command: 'reconcile', values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  // Worked here, it restarts like apply; with --queue-url the deployment's worker checks its own store's halts.
  const workedHere = values['queue-url'] === undefined;
  if (workedHere && refusedForOtherStore(io, 'reconcile', table, values['dry-run'])) return EXIT.failure;
  const opened = await openReconcileVault(io, values, vaultAddr);
  if (typeof opened === 'number') return opened;
  const { vault, auth } = opened;
  const clients = cliClusterClients(io, routes);
  const access: ClusterAccessFor = (name, config) => clients.get(name, config);
  const queueUrl = values['queue-url'];
  // Halts hold here too: a halted rotation's changes are not queued (VAULT_ROLLOUT_STATE_TABLE for a Lambda
  // deployment).
  const rotations = await cliRotationStore(io);
  const { local, queue } = reconcileQueue(io, queueUrl);
  const started = performance.now();
  let report: ReconcileReport;
  try {
    report = await withWaitIndicator(
      io,
      values.quiet,
      `reading ${table.routes.length} routes from Vault and the clusters`,
      () =>
        reconcile({
          table,
          vault,
          access,
          queue,
          rotations,
          now: Date.now,
          dryRun: values['dry-run'],
          ...(maxPaths ? { limits: { maxPaths } } : {}),
        }),
    );
  } finally {
    auth.stop();
  }
  const seconds = (performance.now() - started) / 1000;
  // Without SQS the queued changes are worked here, by the same worker as in Lambda, until the queue is empty.
  const results =
    local && report.queued.messages > 0 ? await workHere(io, values, { local, table, rotations, access, report }) : [];
  printReconcileReport(io, values, { report, results, vaultRequests: vault.requests, seconds, queueUrl });
  const failed =
    report.pathErrors.length > 0 ||
    report.routes.some((r) => r.status === 'error' || r.status === 'unexpandable') ||
    report.workloads.some((w) => w.state === 'failed');
  if (results.some((r) => r.outcome === 'failed')) return EXIT.targetsFailed;
  return failed ? EXIT.failure : EXIT.ok;
}

/** SQS with --queue-url, where the deployed worker takes it; otherwise an in-memory queue worked here. */
function reconcileQueue(
  io: CliIo,
  queueUrl: string | undefined,
): { local: LocalRolloutQueue | undefined; queue: RolloutQueue } {
  const local = queueUrl === undefined ? memoryRolloutQueue() : undefined;
  const region = io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  const queue: RolloutQueue =
    local ??
    new SqsRolloutQueue({ client: new SQSClient({ region: region ?? 'us-east-1' }), queueUrl: queueUrl as string });
  return { local, queue };
}

type ClusterAccessFor = (name: string, config: ClusterConfig) => ReturnType<ClusterClients['get']>;

/** Vault's metadata client and its token source (stop it when done), or the exit code. */
async function openReconcileVault(
  io: CliIo,
  values: ReconcileValues,
  vaultAddr: string,
): Promise<{ vault: VaultMetadataClient; auth: VaultTokenSource } | number> {
  const log = jsonLinesLog(io.stderr, Date.now, 'reconcile', values.quiet);
  const redirects = { allowedHosts: values['vault-redirect-hosts'] };
  let connection;
  try {
    connection = await cliVaultConnection(io, { vaultAddr, log, redirects });
  } catch (e) {
    io.stderr(`vault-rollout reconcile: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
  const vault = new VaultMetadataClient({
    vaultAddr,
    auth: connection.auth,
    redirects,
    ...(connection.fetch ? { fetch: connection.fetch } : {}),
    ...(io.env.VAULT_NAMESPACE ? { namespace: io.env.VAULT_NAMESPACE } : {}),
  });
  return { vault, auth: connection.auth };
}

/** Works the in-memory queue here until it is empty; returns each restart's result as the worker logged it. */
async function workHere(
  io: CliIo,
  values: ReconcileValues,
  o: {
    local: LocalRolloutQueue;
    table: RoutingTable;
    rotations: RotationStore;
    access: ClusterAccessFor;
    report: ReconcileReport;
  },
): Promise<WorkedResult[]> {
  const { local } = o;
  const results: WorkedResult[] = [];
  const telemetry = memoryTelemetry();
  // The same worker, waves and gates as serve's: a gate queues the next wave on this in-memory queue.
  // A closed maintenance window is not waited for here (it may be days away): said, and left to a later run.
  const windowClosed = (w: { cluster: string; window: string; opensAt: string }) =>
    io.stderr(
      `vault-rollout reconcile: cluster ${w.cluster}: deferred: ${waitsForWindow(Date.parse(w.opensAt))} (${w.window}); a run then restarts it\n`,
    );
  const worker = startLocalWorker(
    local,
    { table: o.table, rotations: o.rotations, queue: local, telemetry, executor: { access: o.access }, windowClosed },
    { pollMs: 50, retryDelayMs: 1000 },
  );
  await withWaitIndicator(io, values.quiet, `restarting what is behind (${o.report.queued.messages} messages)`, () =>
    worker.idle(),
  );
  await worker.stop();
  for (const line of telemetry.lines) {
    if (line.message === 'rollout message done')
      results.push(
        ...((line.fields?.results ?? []) as WorkedResult[]).map((r) => ({
          ...r,
          cluster: String(line.fields?.cluster),
        })),
      );
  }
  return results;
}

/** The report as --output says: JSON/YAML data, or the text tables. */
function printReconcileReport(
  io: CliIo,
  values: ReconcileValues,
  o: {
    report: ReconcileReport;
    results: WorkedResult[];
    vaultRequests: number;
    seconds: number;
    queueUrl: string | undefined;
  },
): void {
  const { report, results, vaultRequests, seconds } = o;
  printData(
    io,
    values.output,
    () =>
      JSON.parse(
        JSON.stringify({
          ...report,
          plan: { targets: report.plan.targets.length, problems: report.plan.problems },
          results,
          vaultRequests,
          seconds: Number(seconds.toFixed(3)),
        }),
      ) as unknown,
    () => reconcileText(report, results, vaultRequests, seconds, o.queueUrl),
  );
}
