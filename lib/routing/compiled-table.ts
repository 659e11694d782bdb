/**
 * The routing table as the deployed functions load it: `npm run package` checks the YAML (with file:line errors)
 * and writes the checked document — the schema's output, whatever fields it has — as JSON; the functions then
 * load it with one JSON.parse and the compilation (no YAML parser, no schema pass, at every cold start).
 * The document is carried whole, not field by field, so a field added to the schema travels without a change here.
 */
import { createHash } from 'node:crypto';
import { compileCheckedDocument, parseRoutingTable, RoutingTableError, type RoutingTable } from './routing-table.ts';
import type { RoutingTableDocument } from './schema.ts';

/** Bumped when the compiled form (or the meaning of the document in it) changes: an older function refuses it. */
export const COMPILED_TABLE_FORMAT = 'vault-rollout/compiled-routing-table/v1';

export interface CompiledTableFile {
  format: typeof COMPILED_TABLE_FORMAT;
  /** The YAML it was compiled from (as given to `package`) and the SHA-256 of its text, to trace a deployment back. */
  source: { file: string; sha256: string };
  document: RoutingTableDocument;
}

/**
 * Checks the YAML table (throws RoutingTableError with file:line problems) and returns its compiled JSON text.
 * `withoutKubeconfigs`: the table of a function that never reaches a cluster (the intake: http, logs): every cluster's
 * `file` or `inline` kubeconfig is left out, so no kubeconfig content (and no path to a packaged one) is in it. Such a
 * cluster has neither kubeconfig nor eks there, and reaching it fails with that reason; planning needs only its name
 * and labels. References that are no credential themselves (`env`, `ssm`, `secretsManager`, `eks`) stay.
 */
export function compileRoutingTable(
  yamlText: string,
  file: string,
  options: { withoutKubeconfigs?: boolean } = {},
): string {
  const { document } = parseRoutingTable(yamlText, file);
  const compiled: CompiledTableFile = {
    format: COMPILED_TABLE_FORMAT,
    source: { file, sha256: createHash('sha256').update(yamlText).digest('hex') },
    document: options.withoutKubeconfigs ? withoutKubeconfigContent(document) : document,
  };
  return `${JSON.stringify(compiled)}\n`;
}

/** The document with each `file` and `inline` kubeconfig removed (see compileRoutingTable). */
export function withoutKubeconfigContent(document: RoutingTableDocument): RoutingTableDocument {
  const clusters = Object.fromEntries(
    Object.entries(document.clusters).map(([name, cluster]) => {
      const source = cluster.kubeconfig;
      if (source === undefined || !('file' in source || 'inline' in source)) return [name, cluster];
      const { kubeconfig: _withheld, context: _context, ...rest } = cluster;
      return [name, rest];
    }),
  );
  return { ...document, clusters };
}

/** Whether a routing table file's text is the compiled form (JSON with our format), not YAML. */
export const isCompiledTable = (text: string): boolean => text.startsWith(`{"format":"${COMPILED_TABLE_FORMAT}"`);

/**
 * Loads a compiled table. `file` is where it lies: kubeconfig files named in it are relative to its directory, as
 * they were to the YAML's (`package` writes it beside the YAML).
 */
export function loadCompiledRoutingTable(text: string, file: string): RoutingTable {
  let compiled: Partial<CompiledTableFile>;
  try {
    compiled = JSON.parse(text) as Partial<CompiledTableFile>;
  } catch (e) {
    throw new RoutingTableError([
      { file, line: 1, column: 1, field: '', message: `not a compiled routing table: ${(e as Error).message}` },
    ]);
  }
  if (
    compiled.format !== COMPILED_TABLE_FORMAT ||
    typeof compiled.document !== 'object' ||
    compiled.document === null
  ) {
    throw new RoutingTableError([
      {
        file,
        line: 1,
        column: 1,
        field: 'format',
        message: `not a compiled routing table of format ${COMPILED_TABLE_FORMAT} (found ${JSON.stringify(compiled.format)}): compile it with npm run package`,
      },
    ]);
  }
  return compileCheckedDocument(compiled.document, file);
}
