/**
 * Vault audit device entries (file, socket, syslog devices; OpenBao's http device posts the same JSON).
 * Only successful `response` entries can be changes: the request entry is written before Vault knows whether
 * the write succeeded, and only the response carries the new KV v2 version.
 */
import { z } from 'zod';
import { guessMount, inferKvVersion, kvMeaning, qualify, trimSlashes, underMount } from './kv-mounts.ts';
import { changed, describeIssues, ignore, isObject, reject, type RecordContext, type RecordOutcome } from './record.ts';

export const AuditEntrySchema = z.object({
  type: z.enum(['request', 'response']),
  // Fluent Bit's parser may consume `time` into its own `date` (epoch seconds); minimal entries may lack both.
  time: z.string().optional(),
  date: z.number().optional(),
  error: z.string().optional(),
  request: z.object({
    id: z.string().default(''),
    operation: z.string(),
    path: z.string(),
    mount_type: z.string().optional(),
    mount_point: z.string().optional(),
    namespace: z.object({ id: z.string().optional(), path: z.string().optional() }).optional(),
  }),
  response: z.object({ data: z.record(z.string(), z.unknown()).nullish() }).nullish(),
});
export type AuditEntry = z.infer<typeof AuditEntrySchema>;

export function isAuditEntry(v: unknown): v is Record<string, unknown> {
  return isObject(v) && (v.type === 'request' || v.type === 'response') && 'request' in v;
}

function responseVersion(entry: AuditEntry): number | null {
  const version = entry.response?.data?.version;
  return typeof version === 'number' && Number.isSafeInteger(version) && version >= 0 ? version : null;
}

function epochSecondsToIso(seconds: number | undefined): string {
  const date = new Date((seconds ?? Number.NaN) * 1000);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

export function parseAuditEntry(value: unknown, ctx: RecordContext): RecordOutcome {
  const parsed = AuditEntrySchema.safeParse(value);
  if (!parsed.success) return reject(`not a valid audit entry: ${describeIssues(parsed.error.issues)}`);
  const entry = parsed.data;
  const { request } = entry;
  if (entry.type === 'request') return ignore('request-entry', 'request entries precede the outcome; the response is acted on');
  if (entry.error) return ignore('failed-request', 'the request failed');

  const namespace = trimSlashes(request.namespace?.path ?? '');
  const path = trimSlashes(request.path);
  if (path === 'sys' || path.startsWith('sys/')) return ignore('sys', 'sys/ path');
  if (path === 'auth' || path.startsWith('auth/')) return ignore('auth', 'auth/ path');
  if (request.mount_type !== undefined && request.mount_type !== 'kv') return ignore('not-kv', `mount type ${request.mount_type}`);

  const version = responseVersion(entry);
  let mount: string;
  if (request.mount_point !== undefined) {
    // mount_point carries the namespace prefix; request.path does not.
    const qualified = trimSlashes(request.mount_point);
    mount = namespace !== '' && qualified.startsWith(`${namespace}/`) ? qualified.slice(namespace.length + 1) : qualified;
  } else {
    mount = guessMount(ctx.mounts, namespace, path);
  }
  const rest = underMount(path, mount);
  if (rest === undefined || mount === '') return reject(`request.path is not under its mount_point ${JSON.stringify(mount)}`);
  const tableVersion = ctx.mounts.get(qualify(namespace, mount));
  const kvVersion = tableVersion ?? inferKvVersion(rest, request.operation, version);
  const meaning = kvMeaning(kvVersion, rest, request.operation);
  if (meaning.kind === 'ignored') return meaning;
  return changed(ctx, {
    namespace,
    mount,
    key: meaning.key,
    operation: meaning.operation,
    version: kvVersion === 2 ? version : null,
    kvVersion,
    kvVersionFrom: tableVersion === undefined ? 'inferred' : 'routes',
    source: 'audit',
    id: request.id,
    time: entry.time ?? epochSecondsToIso(entry.date),
  });
}
