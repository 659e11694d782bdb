/**
 * `vault-rollout status`: may the old credential be revoked? Per routed path, Vault's current version (when Vault
 * can be read) and, per cluster and workload, what it records and where its rollout stands. Exit 0 when every
 * consumer of the selected paths runs the current version and is rolled out, 1 otherwise; `--wait` polls until
 * that holds or the timeout passes.
 */
import { shellAssignment } from '../kernel/shell-quote.ts';
import { rename, writeFile } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { readFleet, type FleetReadStats } from '../kube/fleet-reader.ts';
import { jsonLinesLog } from '../kernel/log.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import { cliVaultConnection } from './vault-connection.ts';
import { printableJson, printableYaml } from '../report/printable.ts';
import { statusJson, statusLines, statusText } from '../report/status-report.ts';
import { safeToRevoke } from '../report/safe-to-revoke.ts';
import { PatternError, compilePattern } from '../routing/path-pattern.ts';
import {
  fleetStatus,
  listRequests,
  selectedPaths,
  type FleetStatus,
  type VaultAnswer,
} from '../status/fleet-status.ts';
import { VaultMetadataClient } from '../vault/metadata-client.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';
import { ConcurrencyLimiter } from '../kernel/limiter.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { loadRoutes, usageError } from './shared.ts';
import { colourize, colourOn } from './output.ts';
import { parseCommand, formatDuration, type Parsed, type Values } from './spec.ts';
import { status as spec } from './specs.ts';
import { fileErrorText } from '../kernel/file-errors.ts';
import { haltsText } from './halts-command.ts';
import { waitingText } from './approval-text.ts';
import type { ApprovalRecord } from '../rotations/approvals.ts';
import { cliRotationStoreName, cliRotationStoreToRead } from './rotation-store.ts';
import type { RotationHalt, RotationStore } from '../rotations/rotation-store.ts';
import type { RoutingTable } from '../routing/routing-table.ts';
import type { ClusterClients } from '../kube/cluster-clients.ts';
import { renderStatusPage, type StatusPageInput } from '../report/status-page.ts';
import { pathRotations } from '../status/rotation-waves.ts';

/** Vault reads in flight at once. */
const VAULT_CONCURRENCY = 8;

export interface StatusDeps {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  stats?: FleetReadStats;
}

type StatusValues = Values<typeof spec>;

export async function statusCommand(argv: string[], io: CliIo, deps: StatusDeps = {}): Promise<number> {
  const now = deps.now ?? Date.now;
  const args = parseCommand(spec, argv, io);
  if (typeof args === 'number') return args;
  const { values } = args;
  const routes = values.routes;
  if (routes === undefined) return usageError(io, 'status', 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  const refused = checkStatusFlags(values, io);
  if (refused !== undefined) return refused;
  const table = await loadRoutes(io, routes, { command: 'status', values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  const only = new Set(values.cluster);
  for (const name of only)
    if (!table.clusters.has(name)) return usageError(io, 'status', `--cluster ${name} is not in the routing table`);
  const opened = await openVault(values, io);
  if (typeof opened === 'number') return opened;
  const { vault, auth } = opened;
  const source = openStatusSource(
    io,
    table,
    routes,
    { ...(values.path !== undefined ? { path: values.path } : {}), clusters: only, ...(vault ? { vault } : {}) },
    deps,
    now,
  );
  const answering = values['safe-to-revoke'] ? safeToRevokeSource(source, values.path ?? '') : source;
  const emit = statusEmitter(args, io, table, answering, now);
  try {
    if (!values.wait) {
      const status = await answering.read();
      await emit(status);
      return status.ok ? EXIT.ok : EXIT.failure;
    }
    return await waitForStatus(args, io, answering, emit, deps);
  } catch (e) {
    if (!(e instanceof StatusFileError)) throw e;
    io.stderr(`vault-rollout status: cannot write the output: ${e.message}\n`);
    return EXIT.failure;
  } finally {
    auth?.stop();
    source.close();
  }
}

/**
 * --safe-to-revoke: the same reads, judged by the one path's answer (lib/report/safe-to-revoke.ts), so --wait waits
 * for it and the exit code is it: a path no route targets is not safe, where the table would have nothing to fail.
 */
function safeToRevokeSource(source: StatusSource, path: string): StatusSource {
  return {
    ...source,
    read: async () => {
      const status = await source.read();
      return { ...status, ok: safeToRevoke(status, status.halts, path).safe };
    },
  };
}

/** The checks of the flags before anything is read (--file named, --path a valid pattern). */
function checkStatusFlags(values: StatusValues, io: CliIo): number | undefined {
  if (values.file === '') return usageError(io, 'status', '--file takes a file name');
  if (values['safe-to-revoke'] && (values.path === undefined || /[*{]/.test(values.path)))
    return usageError(
      io,
      'status',
      '--safe-to-revoke answers for one path: give --path with a literal path (no * or {})',
    );
  if (values.path !== undefined) {
    // A pattern's `*` and `**` are segments like any other: `.`, `..` or an empty segment would name another path.
    const problem = vaultPathProblem(values.path.replace(/^\/+/, ''));
    if (problem !== undefined) return usageError(io, 'status', `--path: ${problem}`);
    try {
      compilePattern(values.path.replace(/^\/+/, ''));
    } catch (e) {
      if (e instanceof PatternError) return usageError(io, 'status', `--path: ${e.message}`);
      throw e;
    }
  }
  return undefined;
}

/** Vault's metadata client when --vault-addr (or VAULT_ADDR) is given, nothing without; or the exit code. */
async function openVault(
  values: StatusValues,
  io: CliIo,
): Promise<{ vault?: VaultMetadataClient; auth?: VaultTokenSource } | number> {
  // --vault-addr, else VAULT_ADDR (its spec reads the variable).
  const vaultAddr = values['vault-addr'];
  if (!vaultAddr) return {};
  if (!URL.canParse(vaultAddr) || !/^https?:\/\//.test(vaultAddr))
    return usageError(io, 'status', `--vault-addr must be http(s)://HOST:PORT`);
  const opened = await statusVault(io, vaultAddr, values['vault-namespace'], values.quiet);
  if ('error' in opened) {
    io.stderr(
      `vault-rollout status: ${opened.error}. Without Vault, leave out --vault-addr: status then compares what the clusters record\n`,
    );
    return EXIT.failure;
  }
  return { vault: opened.vault, auth: opened.auth };
}

/**
 * Writes one status as --output says, to stdout or --file. The file is written whole (a temporary file renamed over
 * it), so a web server or a reader never sees half a page.
 */
function statusEmitter(
  args: Parsed<typeof spec>,
  io: CliIo,
  table: RoutingTable,
  source: StatusSource,
  now: () => number,
): (status: StatusSnapshot) => Promise<void> {
  const { values } = args;
  const output = values.output;
  const render = (status: StatusSnapshot): string => {
    if (values['safe-to-revoke']) return `${printableJson(safeToRevoke(status, status.halts, values.path ?? ''), 2)}\n`;
    const stored = { halts: status.halts, awaitingApproval: status.awaitingApproval };
    if (output === 'json') return `${printableJson({ ...statusJson(status), ...stored }, 2)}\n`;
    if (output === 'yaml') return printableYaml({ ...statusJson(status), ...stored });
    if (output === 'html')
      return statusPage(table, status, {
        store: source.store,
        generatedAt: now(),
        source: 'vault-rollout status --output html',
      });
    const text = `${statusText(status)}${status.halts.length > 0 ? `\nHALTED rotations (${cliRotationStoreName(io)}):\n${haltsText(status.halts, cliRotationStoreName(io))}` : ''}${waitingText(status.awaitingApproval ?? [])}`;
    // Colour on a terminal's stdout only: never in a --file.
    return values.file === undefined && colourOn(io) ? colourize(text) : text;
  };
  return async (status) => {
    const rendered = render(status);
    if (values.file === undefined) return io.stdout(rendered);
    const target = resolvePath(values.file);
    const partial = `${target}.${process.pid}.tmp`;
    try {
      await writeFile(partial, rendered, { mode: 0o644 });
      await rename(partial, target);
    } catch (e) {
      throw new StatusFileError(fileErrorText(values.file, e));
    }
    args.info(`vault-rollout status: wrote ${values.file} (${output}, ${Buffer.byteLength(rendered)} bytes)\n`);
  };
}

/**
 * --wait: polls until every consumer is current and complete, or the timeout, showing progress on stderr (a live
 * table on a terminal, else a line per change); then emits the last status.
 */
async function waitForStatus(
  args: Parsed<typeof spec>,
  io: CliIo,
  source: StatusSource,
  emit: (status: StatusSnapshot) => Promise<void>,
  deps: StatusDeps,
): Promise<number> {
  const now = deps.now ?? Date.now;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  // --timeout (1s to 24h) and --interval (500ms to 1m): bounded by their specs.
  const { timeout: timeoutMs, interval: intervalMs, output } = args.values;
  const started = now();
  const terminal = io.stderrIsTTY === true && output === 'table';
  const said = new Map<string, string>();
  let drawn = 0;
  for (;;) {
    const status = await source.read();
    const waited = now() - started;
    if (status.ok || waited >= timeoutMs) {
      if (drawn > 0) io.stderr(`\x1b[${drawn}A\r\x1b[J`);
      if (!status.ok)
        io.stderr(
          `vault-rollout status: not every consumer is current and complete after ${Math.round(waited / 1000)} s (--timeout ${formatDuration(timeoutMs)})\n`,
        );
      await emit(status);
      return status.ok ? EXIT.ok : EXIT.failure;
    }
    if (terminal) {
      // The live view: the whole table, redrawn in place.
      const frame = `Waiting ${Math.round(waited / 1000)} s of ${formatDuration(timeoutMs)} for every consumer to be current and complete\n${statusText(status)}`;
      args.info(`${drawn > 0 ? `\x1b[${drawn}A\r\x1b[J` : ''}${frame}`);
      drawn = frame.split('\n').length - 1;
    } else args.info(statusLines(status, said));
    await sleep(Math.min(intervalMs, Math.max(0, timeoutMs - waited)));
  }
}

/** --file could not be written (the message says why, in words). */
class StatusFileError extends Error {}

/**
 * Vault's metadata client for status (and serve's status page): VAULT_TOKEN, or AppRole, as cliVaultConnection reads
 * them.
 */
export async function statusVault(
  io: CliIo,
  vaultAddr: string,
  namespace: string | undefined,
  quiet = false,
): Promise<{ vault: VaultMetadataClient; auth: VaultTokenSource } | { error: string }> {
  let connection;
  try {
    connection = await cliVaultConnection(io, {
      vaultAddr,
      log: jsonLinesLog((t) => io.stderr(t), Date.now, 'status', quiet),
      ...(namespace ? { namespace } : {}),
    });
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  return {
    auth: connection.auth,
    vault: new VaultMetadataClient({
      vaultAddr,
      auth: connection.auth,
      timeoutMs: 5_000,
      maxAttempts: 2,
      ...(connection.fetch ? { fetch: connection.fetch } : {}),
    }),
  };
}

/**
 * What `status` reads once: the fleet's status, the store's halts (a halt is never "safe to revoke") and the waves
 * waiting for approval.
 */
export type StatusSnapshot = FleetStatus & { halts: RotationHalt[]; awaitingApproval?: ApprovalRecord[] };

export interface StatusSource {
  read(): Promise<StatusSnapshot>;
  /** The rotation store's name and the environment that points the CLI at it (for the commands the page shows). */
  store: { name: string; env?: string };
  close(): void;
}

/**
 * The one way `status` and `serve --status-page` read the fleet: the LISTs (readFleet), Vault's current versions
 * when a client is given, fleetStatus, and the halts of the rotation store. `serve` passes its own store and cluster
 * clients (one of each per process); the CLI opens them. With --path, the halts whose secrets start with its
 * literal prefix.
 */
export function openStatusSource(
  io: CliIo,
  table: RoutingTable,
  routesFile: string,
  options: {
    path?: string;
    clusters: ReadonlySet<string>;
    vault?: VaultMetadataClient;
    rotations?: RotationStore;
    clients?: ClusterClients;
  },
  deps: StatusDeps = {},
  now: () => number = Date.now,
): StatusSource {
  const clients = options.clients ?? cliClusterClients(io, routesFile);
  const requests = listRequests(table, options.clusters);
  const statusOptions = { ...(options.path !== undefined ? { path: options.path } : {}), clusters: options.clusters };
  const prefix = options.path?.split(/[*{]/)[0] ?? '';
  const own = options.rotations === undefined;
  let rotations: Promise<RotationStore | undefined> | undefined = options.rotations
    ? Promise.resolve(options.rotations)
    : undefined;
  // Quoted: the page offers the commands it is in for copying, and a file path may hold anything.
  const storeVariable = (['VAULT_ROLLOUT_STATE_TABLE', 'VAULT_ROLLOUT_STATE_DB'] as const).find((name) => io.env[name]);
  const env = storeVariable ? shellAssignment(storeVariable, io.env[storeVariable] ?? '') : undefined;
  return {
    store: { name: cliRotationStoreName(io), ...(env ? { env } : {}) },
    async read() {
      const listings = await readFleet(
        table,
        requests,
        { access: (name, config) => clients.get(name, config) },
        deps.stats,
      );
      const answers = options.vault
        ? await readVault(options.vault, selectedPaths(table, listings, statusOptions).paths)
        : new Map<string, VaultAnswer>();
      const status = fleetStatus(table, listings, answers, { ...statusOptions, now: now() });
      // Read only: a store file not there yet holds no halt, and is looked for again at the next read (--wait).
      rotations ??= cliRotationStoreToRead(io);
      const store = await rotations;
      if (store === undefined) rotations = undefined;
      const all = store === undefined ? [] : await store.halts();
      const halts = all.filter((h) => h.secrets.some((x) => x.startsWith(prefix)));
      const pending = (await store?.approvals?.pending()) ?? [];
      const awaitingApproval = pending.filter((a) => a.secrets.some((x) => x.startsWith(prefix)));
      return { ...status, halts, awaitingApproval, ok: status.ok && halts.length === 0 };
    },
    close() {
      if (own) void rotations?.then((r) => r?.close?.());
    },
  };
}

/**
 * The status page of a snapshot (lib/report/status-page.ts): one renderer for `serve --status-page` and `status
 * --output html`.
 */
export function statusPage(
  table: RoutingTable,
  snapshot: StatusSnapshot,
  page: Omit<StatusPageInput, 'status' | 'rotations'>,
): string {
  return renderStatusPage({
    ...page,
    status: snapshot,
    rotations: pathRotations(table, snapshot.paths, snapshot.halts),
  });
}

/** Vault's current version of each KV v2 path, a bounded number of reads at once; KV v1 paths are not asked. */
async function readVault(
  vault: VaultMetadataClient,
  paths: ReadonlyArray<{ path: string; vaultNamespace: string; mount: string; key: string; kvVersion: 1 | 2 }>,
): Promise<Map<string, VaultAnswer>> {
  const answers = new Map<string, VaultAnswer>();
  const limiter = new ConcurrencyLimiter(VAULT_CONCURRENCY);
  await Promise.all(
    paths
      .filter((p) => p.kvVersion === 2)
      .map((p) =>
        limiter.run(async () => {
          try {
            const m = await vault.readMetadata(p.mount, p.key, { namespace: p.vaultNamespace });
            if (!m) return void answers.set(p.path, { absent: true });
            const v = m.versions[m.currentVersion];
            answers.set(p.path, {
              currentVersion: m.currentVersion,
              ...(v ? { createdTime: v.createdTime } : {}),
              ...(v?.destroyed
                ? { gone: 'destroyed' as const }
                : v?.deletionTime && Date.parse(v.deletionTime) <= Date.now()
                  ? { gone: 'deleted' as const }
                  : {}),
            });
          } catch (e) {
            answers.set(p.path, { error: e instanceof Error ? e.message.slice(0, 300) : String(e) });
          }
        }),
      ),
  );
  return answers;
}
