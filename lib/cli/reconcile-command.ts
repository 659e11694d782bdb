/**
 * `vault-rollout reconcile --routes FILE`: compare Vault's current versions (metadata only) with what every routed
 * workload records, and send what is behind through the same queue and worker as a change from the feed. The
 * queue: SQS with --queue-url (or VAULT_ROLLOUT_QUEUE_URL), where the deployed worker takes it; otherwise an
 * in-process queue worked here until empty, like `serve`. --dry-run reads everything and changes nothing.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import type { RolloutResult } from '../engine/types.ts';

/** A result as the worker logs it (the fields a report needs). */
type WorkedResult = Pick<RolloutResult, 'cluster' | 'namespace' | 'kind' | 'name' | 'outcome' | 'reason'>;
import { memoryTelemetry } from '../kernel/telemetry.ts';
import { reconcile, type ReconcileReport } from '../pipeline/reconcile.ts';
import { memoryRolloutQueue } from '../queue/sqlite-queue.ts';
import type { RolloutQueue } from '../queue/rollout-message.ts';
import { SqsRolloutQueue } from '../queue/sqs-queue.ts';
import { jsonLinesLog } from '../kernel/log.ts';
import { startLocalWorker } from '../runtime/local-worker.ts';
import { cliVaultConnection } from './vault-connection.ts';
import { VaultMetadataClient } from '../vault/metadata-client.ts';
import { table as renderTable } from '../report/table.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { counted, printData, withWaitIndicator } from './output.ts';
import { parseCommand } from './spec.ts';
import { reconcile as spec } from './specs.ts';
import { cliRotationStore, refusedForOtherStore } from './rotation-store.ts';

export async function reconcileCommand(argv: string[], io: CliIo): Promise<number> {
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  if (values.routes === undefined)
    return usageError(io, 'reconcile', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  // --vault-addr, else VAULT_ADDR (its spec reads the variable).
  const vaultAddr = values['vault-addr'];
  if (!vaultAddr || !/^https?:\/\//.test(vaultAddr) || !URL.canParse(vaultAddr))
    return usageError(io, 'reconcile', 'give --vault-addr (or VAULT_ADDR): http(s)://HOST:PORT');
  const maxPaths = values['max-paths'];
  const table = await loadRoutes(io, values.routes, { command: 'reconcile', values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  // Worked here, it restarts like apply; with --queue-url the deployment's worker checks its own store's halts.
  const workedHere = values['queue-url'] === undefined;
  if (workedHere && refusedForOtherStore(io, 'reconcile', table, values['dry-run'])) return EXIT.failure;

  const log = jsonLinesLog(io.stderr, Date.now, 'reconcile', values.quiet);
  const redirects = { allowedHosts: values['vault-redirect-hosts'] };
  let connection;
  try {
    connection = await cliVaultConnection(io, { vaultAddr, log, redirects });
  } catch (e) {
    io.stderr(`vault-rollout reconcile: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
  const auth = { source: connection.auth };
  const vault = new VaultMetadataClient({
    vaultAddr,
    auth: connection.auth,
    redirects,
    ...(connection.fetch ? { fetch: connection.fetch } : {}),
    ...(io.env.VAULT_NAMESPACE ? { namespace: io.env.VAULT_NAMESPACE } : {}),
  });
  const clients = cliClusterClients(io, values.routes);
  const access = (name: string, config: Parameters<typeof clients.get>[1]) => clients.get(name, config);

  const queueUrl = values['queue-url'];
  // Halts hold here too: a halted rotation's changes are not queued (VAULT_ROLLOUT_STATE_TABLE for a Lambda deployment).
  const rotations = await cliRotationStore(io);
  const local = queueUrl === undefined ? memoryRolloutQueue() : undefined;
  const region = io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  const queue: RolloutQueue =
    local ??
    new SqsRolloutQueue({ client: new SQSClient({ region: region ?? 'us-east-1' }), queueUrl: queueUrl as string });
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
    auth.source.stop();
  }
  const seconds = (performance.now() - started) / 1000;

  // Without SQS the queued changes are worked here, by the same worker as in Lambda, until the queue is empty.
  const results: WorkedResult[] = [];
  if (local && report.queued.messages > 0) {
    const telemetry = memoryTelemetry();
    // The same worker, waves and gates as serve's: a gate queues the next wave on this in-memory queue.
    const worker = startLocalWorker(
      local,
      { table, rotations, queue: local, telemetry, executor: { access } },
      { pollMs: 50, retryDelayMs: 1000 },
    );
    await withWaitIndicator(io, values.quiet, `restarting what is behind (${report.queued.messages} messages)`, () =>
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
  }

  printData(
    io,
    values.output,
    () =>
      JSON.parse(
        JSON.stringify({
          ...report,
          plan: { targets: report.plan.targets.length, problems: report.plan.problems },
          results,
          vaultRequests: vault.requests,
          seconds: Number(seconds.toFixed(3)),
        }),
      ) as unknown,
    () => reconcileText(report, results, vault.requests, seconds, queueUrl),
  );
  const failed =
    report.pathErrors.length > 0 ||
    report.routes.some((r) => r.status === 'error' || r.status === 'unexpandable') ||
    report.workloads.some((w) => w.state === 'failed');
  if (results.some((r) => r.outcome === 'failed')) return EXIT.targetsFailed;
  return failed ? EXIT.failure : EXIT.ok;
}

export function reconcileText(
  report: ReconcileReport,
  results: readonly WorkedResult[],
  vaultRequests: number,
  seconds: number,
  queueUrl?: string,
): string {
  const out: string[] = [];
  out.push(`Routes (${report.routes.length}), expanded against Vault's KV v2 metadata:`);
  out.push(
    renderTable(
      ['ROUTE', 'PATTERN', 'MOUNT', 'PATHS', 'LISTS', 'NOTE'],
      report.routes.map((r) => [
        r.route,
        r.namespace ? `${r.namespace}/${r.pattern}` : r.pattern,
        r.mount ?? '-',
        String(r.paths),
        String(r.lists),
        r.truncated ? `TRUNCATED: ${r.truncated}` : (r.reason ?? ''),
      ]),
    ),
  );
  const kv1 = report.routes.filter((r) => r.status === 'kv1');
  if (kv1.length > 0)
    out.push(
      `KV v1 (no versions): reconcile cannot see changes of ${kv1.map((r) => r.route).join(', ')}; only the change feed restarts for them.`,
    );
  for (const e of report.pathErrors) out.push(`ERROR ${e.path}: ${e.error}`);
  out.push('', `Paths (${report.paths.length}): current versions`);
  if (report.paths.length > 0)
    out.push(
      renderTable(
        ['PATH', 'VERSION', 'STATE', 'SINCE'],
        report.paths.map((p) => [
          p.path,
          String(p.version),
          p.operation === 'write' ? 'current' : `${p.operation}d`,
          p.time,
        ]),
      ),
    );
  const counts = Object.fromEntries(
    ['current', 'recorded', 'behind', 'failed'].map((s) => [s, report.workloads.filter((w) => w.state === s).length]),
  );
  out.push(
    '',
    `Workloads (${report.workloads.length}): ${counts.current} current, ${counts.recorded} running the current version (recorded without a restart), ${counts.behind} behind, ${counts.failed} failed`,
  );
  const shown = report.workloads.filter((w) => w.state !== 'current');
  if (shown.length > 0)
    out.push(
      renderTable(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'STATE', 'PATHS', 'DETAIL'],
        shown.map((w) => [
          w.cluster,
          w.namespace,
          w.kind,
          w.name,
          w.state.toUpperCase(),
          w.paths.join(', '),
          w.detail ?? '',
        ]),
      ),
    );
  for (const p of report.plan.problems) out.push(`plan problem: route ${p.route}, ${p.path}: ${p.error}`);
  for (const h of report.halted)
    out.push(
      '',
      `HALTED, not queued: rotation ${h.rotation} (${h.secrets.join(', ')}) halted at wave ${h.wave} of ${h.waves}: ${h.why}. Clear it with: vault-rollout halts clear ${h.rotation}`,
    );
  if (report.dryRun)
    out.push(
      '',
      `DRY RUN: nothing recorded, nothing queued; ${counted(counts.behind ?? 0, 'workload')} would restart.`,
    );
  else if (queueUrl)
    out.push(
      '',
      `Queued ${counted(report.queued.changes, 'change')} in ${counted(report.queued.messages, 'message')} on ${queueUrl}.`,
    );
  else if (results.length > 0) {
    out.push(
      '',
      `Worked here (no --queue-url): ${counted(report.queued.changes, 'change')} in ${counted(report.queued.messages, 'message')}:`,
    );
    out.push(
      renderTable(
        ['CLUSTER', 'NAMESPACE', 'KIND', 'NAME', 'OUTCOME', 'REASON'],
        results.map((r) => [r.cluster, r.namespace, r.kind, r.name, r.outcome, r.reason]),
      ),
    );
  } else out.push('', 'Nothing is behind: nothing queued.');
  out.push(`Vault: ${vaultRequests} requests; ${seconds.toFixed(2)} s.`);
  return `${out.join('\n')}\n`;
}
