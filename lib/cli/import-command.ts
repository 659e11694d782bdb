/**
 * `vault-rollout import`: reads what the clusters already declare (VSO, ESO, Reloader) with list permission only and
 * writes a routing table that does the same job across all of them; what cannot be mapped is listed with why.
 */
import { writeFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import {
  describeUnmapped,
  IMPORT_SOURCES,
  importRoutes,
  KvVersionConflictError,
  renderImport,
  type ImportCluster,
  type ImportResult,
  type ImportSource,
} from '../importer/import-routes.ts';
import type { ClusterInventory } from '../importer/import-sources.ts';
import { readInventory } from '../importer/import-inventory.ts';
import { kubeApiFor } from '../kube/kube-api.ts';
import { loadRoutingTable, RoutingTableError } from '../routing/routing-table.ts';
import { cliClusterClients } from './cluster-access.ts';
import { EXIT, type CliIo } from './io.ts';
import { usageError } from './shared.ts';
import { parse as parseYaml } from 'yaml';
import { fileErrorText } from '../kernel/file-errors.ts';
import { printData, withWaitIndicator } from './output.ts';
import { parseCommand, type Parsed } from './spec.ts';
import { importSpec as spec } from './specs.ts';

const CLUSTER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?):([A-Za-z0-9._/-]{1,253})=([A-Za-z0-9._-]{0,63})$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MAX_CLUSTERS = 100;

interface ImportArgs {
  clusters: Array<ImportCluster & { kubeconfigPath: string }>;
  from: Set<ImportSource>;
  /** --file: where to write the table (else standard output). */
  file: string | undefined;
  vaultAddr: string | undefined;
  namespaces: string[];
  vsoOperatorNamespace: string;
}

function parseImportArgs(values: Parsed<typeof spec>['values'], cwd: string): ImportArgs {
  if (values.cluster.length === 0) throw new Error('give at least one --cluster NAME=KUBECONFIG');
  if (values.cluster.length > MAX_CLUSTERS) throw new Error(`at most ${MAX_CLUSTERS} clusters`);
  const outDir = values.file === undefined ? cwd : dirname(resolve(cwd, values.file));
  const clusters = values.cluster.map((c) => {
    const at = c.indexOf('=');
    const name = c.slice(0, at);
    const file = c.slice(at + 1);
    if (at < 1 || file === '' || !CLUSTER_NAME.test(name))
      throw new Error(`--cluster ${c}: must be NAME=KUBECONFIG with a lowercase name`);
    const kubeconfigPath = resolve(cwd, file);
    return { name, kubeconfigPath, kubeconfig: relative(outDir, kubeconfigPath), labels: {} as Record<string, string> };
  });
  if (new Set(clusters.map((c) => c.name)).size !== clusters.length) throw new Error('a cluster name is given twice');
  for (const l of values.label) {
    const m = LABEL.exec(l);
    const cluster = clusters.find((c) => c.name === m?.[1]);
    if (!m || !cluster) throw new Error(`--label ${l}: must be CLUSTER:KEY=VALUE for a cluster given with --cluster`);
    cluster.labels[m[3] as string] = m[4] as string;
  }
  const from = values.from;
  const unknown = from.filter((f) => !(IMPORT_SOURCES as readonly string[]).includes(f));
  if (unknown.length > 0 || from.length === 0)
    throw new Error(`--from takes ${IMPORT_SOURCES.join(', ')} (comma-separated), not ${unknown.join(', ')}`);
  const bad = values.namespace.find((n) => !NAMESPACE.test(n));
  if (bad !== undefined) throw new Error(`--namespace ${bad}: not a namespace name`);
  const vsoOperatorNamespace = values['vso-operator-namespace'];
  if (!NAMESPACE.test(vsoOperatorNamespace))
    throw new Error(`--vso-operator-namespace ${vsoOperatorNamespace}: not a namespace name`);
  return {
    clusters,
    from: new Set(from as ImportSource[]),
    file: values.file,
    vaultAddr: values['vault-addr'],
    namespaces: values.namespace,
    vsoOperatorNamespace,
  };
}

export async function importCommand(argv: string[], io: CliIo, cwd = process.cwd()): Promise<number> {
  const parsed = parseCommand(spec, argv, io);
  if (typeof parsed === 'number') return parsed;
  let args: ImportArgs;
  try {
    args = parseImportArgs(parsed.values, cwd);
  } catch (e) {
    return usageError(io, 'import', e);
  }
  const inventories = await readInventories(io, args, parsed.values.quiet, cwd);
  if (typeof inventories === 'number') return inventories;
  const result = routesOf(io, args, inventories);
  if (typeof result === 'number') return result;
  const header = [
    `Imported by vault-rollout import (--from ${[...args.from].join(',')}) from ${args.clusters.map((c) => c.name).join(', ')}.`,
    `Kubeconfig paths are relative to this file; vault-rollout needs its own identity there (infra/rbac), not the importer's.`,
  ];
  const text = renderImport(result, header);
  for (const u of result.unmapped) io.stderr(`vault-rollout import: not imported: ${describeUnmapped(u)}\n`);
  const targets = result.routes.reduce((n, r) => n + r.targets.length, 0);
  parsed.info(
    `vault-rollout import: ${result.routes.length} routes, ${targets} targets, ${result.unmapped.length} objects not imported\n`,
  );
  return writeTable(io, parsed.values.output, args.file, text, cwd);
}

/** Every cluster's inventory, or the exit code when any cannot be read (each failure said on stderr). */
async function readInventories(
  io: CliIo,
  args: ImportArgs,
  quiet: boolean,
  cwd: string,
): Promise<ClusterInventory[] | number> {
  // Kubeconfig paths are absolute here, so the routing-table directory the resolver wants does not matter.
  const clients = cliClusterClients(io, resolve(cwd, 'import'));
  const read = await withWaitIndicator(io, quiet, `reading ${args.clusters.length} clusters`, () =>
    Promise.all(
      args.clusters.map(async (c): Promise<ClusterInventory | string> => {
        try {
          const access = await clients.get(c.name, { kubeconfig: { file: c.kubeconfigPath }, labels: {} });
          return await readInventory(c.name, kubeApiFor(access), {
            from: args.from,
            namespaces: args.namespaces,
            vsoOperatorNamespace: args.vsoOperatorNamespace,
          });
        } catch (e) {
          return `${c.name}: ${e instanceof Error ? ((e as NodeJS.ErrnoException).code !== undefined && (e as NodeJS.ErrnoException).path !== undefined ? fileErrorText((e as NodeJS.ErrnoException).path as string, e) : e.message) : String(e)}`;
        }
      }),
    ),
  );
  const failures = read.filter((r): r is string => typeof r === 'string');
  // A table missing one cluster's routes would look complete: nothing is written.
  if (failures.length > 0) {
    for (const f of failures) io.stderr(`vault-rollout import: cannot read cluster ${f}\n`);
    return EXIT.failure;
  }
  const inventories = read as ClusterInventory[];
  for (const inv of inventories)
    if (inv.missing.length > 0) io.stderr(`vault-rollout import: ${inv.cluster}: skipped ${inv.missing.join('; ')}\n`);
  return inventories;
}

/** The routes the inventories map to, or the exit code when they disagree (a KV version, the Vault server). */
function routesOf(io: CliIo, args: ImportArgs, inventories: ClusterInventory[]): ImportResult | number {
  let result: ImportResult;
  try {
    result = importRoutes(inventories, {
      clusters: args.clusters,
      from: args.from,
      vsoOperatorNamespace: args.vsoOperatorNamespace,
      ...(args.vaultAddr ? { vaultAddr: args.vaultAddr } : {}),
    });
  } catch (e) {
    if (!(e instanceof KvVersionConflictError)) throw e;
    // Whichever version the table chose, the other objects' routes would read the mount wrongly: nothing is written.
    for (const c of e.conflicts) io.stderr(`vault-rollout import: ${c}\n`);
    return EXIT.failure;
  }
  if (args.vaultAddr === undefined && result.servers.length > 1) {
    io.stderr(
      `vault-rollout import: the clusters read ${result.servers.length} Vault servers (${result.servers.join(', ')}); a routing table serves one: choose it with --vault-addr\n`,
    );
    return EXIT.failure;
  }
  return result;
}

/** Writes the table (stdout or --file, YAML or JSON) and fails when it does not validate as a routing table. */
async function writeTable(
  io: CliIo,
  output: Parsed<typeof spec>['values']['output'],
  file: string | undefined,
  text: string,
  cwd: string,
): Promise<number> {
  let problems: string | undefined;
  try {
    loadRoutingTable(text, file ?? 'import');
  } catch (e) {
    if (!(e instanceof RoutingTableError)) throw e;
    problems = e.message;
  }
  // The routing table is the data: YAML (with its comments) as it is written, or the same document as JSON.
  const render = (): string => (output === 'json' ? `${JSON.stringify(parseYaml(text), null, 2)}\n` : text);
  if (file === undefined)
    printData(
      io,
      output === 'json' ? 'json' : 'table',
      () => parseYaml(text) as unknown,
      () => text,
    );
  else {
    try {
      await writeFile(resolve(cwd, file), render(), { mode: 0o644 });
    } catch (e) {
      io.stderr(`vault-rollout import: cannot write the table: ${fileErrorText(file, e)}\n`);
      return EXIT.failure;
    }
  }
  if (problems !== undefined) {
    io.stderr(`vault-rollout import: the table written does not validate:\n${problems}\n`);
    return EXIT.failure;
  }
  return EXIT.ok;
}
