import { formatProblem, loadRoutingTable, RoutingTableError } from '../routing/routing-table.ts';
import type { ConfigProblem, RoutingTable } from '../routing/routing-table.ts';
import { InputFormats, parseStream, type InputFormat } from '../sources/parse.ts';
import type { RolloutResult } from '../engine/types.ts';
import type { Plan } from '../plan/planner.ts';
import { resultsJson, resultsText } from '../report/results-report.ts';
import type { ParseResult } from '../sources/secret-change.ts';
import { isIPv4 } from 'node:net';
import { EXIT, type CliIo } from './io.ts';
import { counted, printData } from './output.ts';
import { fileErrorText } from '../kernel/file-errors.ts';
import { usageError } from './spec.ts';
import { allowOverriddenCredentials, applyClusterKubeconfigs, ClusterKubeconfigError } from './cluster-kubeconfig.ts';

export { usageError } from './spec.ts';

/** A routing table read and checked: the table, or why not (the file could not be read, or its problems). */
export type RoutesRead = { table: RoutingTable } | { unreadable: string } | { problems: ConfigProblem[] };

/** Reads and checks the routing table, keeping what went wrong for the caller to print its way. */
export async function readRoutes(io: CliIo, file: string): Promise<RoutesRead> {
  let text: string;
  try {
    text = await io.readText(file);
  } catch (e) {
    return { unreadable: fileErrorText(file, e) };
  }
  try {
    return { table: loadRoutingTable(text, file) };
  } catch (e) {
    if (e instanceof RoutingTableError) return { problems: e.problems };
    throw e;
  }
}

/** A command's --cluster-kubeconfig values, applied to the table it loads. */
export interface ClusterKubeconfigFlag {
  command: string;
  values: readonly string[] | undefined;
}

/**
 * Loads the routing table (with the command's --cluster-kubeconfig overrides), or prints why not and returns the
 * exit code.
 */
export async function loadRoutes(
  io: CliIo,
  file: string,
  overrides?: ClusterKubeconfigFlag,
): Promise<RoutingTable | number> {
  const read = await readRoutes(io, file);
  if (!('table' in read)) {
    const who = io.command === undefined ? 'vault-rollout' : `vault-rollout ${io.command}`;
    if ('unreadable' in read) io.stderr(`${who}: cannot read the routing table: ${read.unreadable}\n`);
    else {
      const count = counted(read.problems.length, 'problem');
      io.stderr(`${read.problems.map(formatProblem).join('\n')}\n${who}: ${file}: invalid routing table: ${count}\n`);
    }
    return EXIT.failure;
  }
  if (overrides === undefined) return read.table;
  try {
    const table = applyClusterKubeconfigs(read.table, overrides.values, io.env);
    io.env = allowOverriddenCredentials(io.env, overrides.values);
    return table;
  } catch (e) {
    if (e instanceof ClusterKubeconfigError) return usageError(io, overrides.command, e);
    throw e;
  }
}

/** What plan and apply say when standard input is a terminal: they would otherwise wait without a word. */
export const STDIN_HINT = 'reading change records from standard input; pipe a file or use --input FILE; Ctrl-D to end';

/** Loads the routing table and reads the change records, or prints why not and returns the exit code. */
export async function loadChanges(
  io: CliIo,
  command: string,
  values: {
    routes?: string | undefined;
    input: string;
    format: string;
    quiet: boolean;
    'cluster-kubeconfig'?: readonly string[];
  },
): Promise<{ table: RoutingTable; parsed: ParseResult } | number> {
  if (values.routes === undefined) return usageError(io, command, 'missing --routes FILE (or VAULT_ROLLOUT_ROUTES)');
  if (!(InputFormats as readonly string[]).includes(values.format))
    return usageError(io, command, `--format must be one of ${InputFormats.join(', ')}`);
  const table = await loadRoutes(io, values.routes, { command, values: values['cluster-kubeconfig'] });
  if (typeof table === 'number') return table;
  if (values.input === '-' && io.stdinIsTTY === true && !values.quiet)
    io.stderr(`vault-rollout ${command}: ${STDIN_HINT}\n`);
  try {
    return {
      table,
      parsed: await parseStream(io.openInput(values.input), {
        format: values.format as InputFormat,
        mounts: table.mounts,
      }),
    };
  } catch (e) {
    io.stderr(
      `vault-rollout ${command}: cannot read the change records: ${fileErrorText(values.input === '-' ? 'standard input' : values.input, e)}\n`,
    );
    return EXIT.failure;
  }
}

/** Names every record that could not be parsed, on stderr. */
export function reportRejected(io: CliIo, command: string, input: string, parsed: ParseResult): void {
  for (const r of parsed.rejected)
    io.stderr(`vault-rollout ${command}: ${input === '-' ? 'stdin' : input}: ${r.record}: ${r.error}\n`);
}

/** Resolves on SIGINT, SIGTERM or the abort signal (tests run long-lived commands in process), whichever first. */
export function untilStopped(signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    if (signal?.aborted) stop();
    else signal?.addEventListener('abort', stop, { once: true });
  });
}

/** Executor warnings on stderr (fields carry paths, names and reasons only). */
export function stderrLogger(io: CliIo): { warn(message: string, fields?: Record<string, unknown>): void } {
  return { warn: (m, f) => io.stderr(`warning: ${m}${f ? ` ${JSON.stringify(f)}` : ''}\n`) };
}

/** The results of `apply` and `reset-version`: the table, or the document as JSON or YAML (-o). */
export function printResults(
  io: CliIo,
  output: string,
  parsed: ParseResult,
  plan: Plan,
  results: RolloutResult[],
): void {
  printData(
    io,
    output,
    () => resultsJson(parsed, plan, results),
    () => resultsText(parsed, plan, results),
  );
}

/**
 * The flag that lets `serve --insecure-no-auth` listen on, and `relay --audit-listen tcp://…` bind, an address other
 * hosts can reach: without it both refuse to start, because whatever reaches such a listener can restart workloads.
 */
export const UNAUTHENTICATED_ACCESS_FLAG = 'i-understand-unauthenticated-access';

/** A host only this machine reaches: `localhost`, 127.0.0.0/8, ::1 (bracketed or not, or IPv4-mapped). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice('::ffff:'.length) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}
