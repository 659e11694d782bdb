/**
 * Vault audit device entries (file, socket, syslog devices; OpenBao's http device posts the same JSON).
 * Only successful `response` entries can be changes: the request entry is written before Vault knows whether
 * the write succeeded, and only the response carries the new KV v2 version.
 */
import { z } from 'zod';
import { guessMount, inferKvVersion, kvMeaning, qualify, trimSlashes, underMount } from './kv-mounts.ts';
import { keyDigestsOf } from './key-digests.ts';
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

/**
 * A string, or a key that is not there at all (a key present with the value undefined keeps it in the schema's output).
 */
const optionalString = (o: Record<string, unknown>, key: string): boolean => {
  const v = o[key];
  return typeof v === 'string' || (v === undefined && !(key in o));
};

/**
 * What AuditEntrySchema returns for `value`, built by hand when the value plainly conforms; undefined otherwise, and
 * then the schema judges it (and words the error). The schema's walk cost more than JSON.parse of the line did (a
 * busy Vault's batch is thousands of reads); this is the same contract, checked field by field, and a property test
 * (test/unit/sources/audit-entry-conforming.test.ts) holds it equal to the schema's output on samples and variants.
 */
export function conformingAuditEntry(value: unknown): AuditEntry | undefined {
  if (!isObject(value)) return undefined;
  const { type, date, request, response } = value;
  if ((type !== 'request' && type !== 'response') || !optionalString(value, 'time') || !optionalString(value, 'error'))
    return undefined;
  if (date === undefined ? 'date' in value : !(typeof date === 'number' && Number.isFinite(date))) return undefined;
  if (!isObject(request)) return undefined;
  const { id, operation, path, namespace } = request;
  if (typeof operation !== 'string' || typeof path !== 'string' || !(id === undefined || typeof id === 'string'))
    return undefined;
  if (!optionalString(request, 'mount_type') || !optionalString(request, 'mount_point')) return undefined;
  let ns: { id?: string; path?: string } | undefined;
  if (namespace === undefined) {
    if ('namespace' in request) return undefined;
  } else {
    if (!isObject(namespace) || !optionalString(namespace, 'id') || !optionalString(namespace, 'path'))
      return undefined;
    ns = {};
    if (namespace.id !== undefined) ns.id = namespace.id as string;
    if (namespace.path !== undefined) ns.path = namespace.path as string;
  }
  let res: AuditEntry['response'];
  if (response === null) res = null;
  else if (response === undefined) {
    if ('response' in value) return undefined;
  } else {
    if (!isObject(response)) return undefined;
    const { data } = response;
    if (data === undefined) {
      if ('data' in response) return undefined;
      res = {};
    } else if (data === null) res = { data: null };
    else {
      // z.record takes plain objects only, and its copy drops an own `__proto__` key: such data goes to the schema.
      if (
        typeof data !== 'object' ||
        Object.getPrototypeOf(data) !== Object.prototype ||
        Object.hasOwn(data, '__proto__')
      )
        return undefined;
      res = { data: { ...(data as Record<string, unknown>) } };
    }
  }
  const entry: AuditEntry = { type, request: { id: id ?? '', operation, path } };
  if (value.time !== undefined) entry.time = value.time as string;
  if (date !== undefined) entry.date = date as number;
  if (value.error !== undefined) entry.error = value.error as string;
  if (request.mount_type !== undefined) entry.request.mount_type = request.mount_type as string;
  if (request.mount_point !== undefined) entry.request.mount_point = request.mount_point as string;
  if (ns !== undefined) entry.request.namespace = ns;
  if (res !== undefined) entry.response = res;
  return entry;
}

/**
 * A line the audit device wrote for a request entry, recognised without parsing it. Vault and OpenBao marshal an
 * entry's top-level fields in a fixed order around a timestamp that holds no quote or escape: OpenBao and Vault up to
 * 1.15 begin with `{"time":…,"type":"request",`, Vault 1.21 ends with `,"time":…,"type":"request"}`. Inside a JSON
 * string every quote is escaped, so these bytes at the line's very start or end can only be the entry's own
 * top-level `type` (at the end, the last of duplicate keys, which JSON.parse keeps too). Half of a busy audit log is
 * request entries and each is ignored whatever it holds, so the intake skips their JSON.parse; any other layout (a
 * prefix, spaces, another order) is parsed and judged as before.
 */
const TIME = '"time":"[0-9A-Za-z:.+-]{1,40}"';
const REQUEST_ENTRY_START = new RegExp(`^\\{${TIME},"type":"request",`);
const REQUEST_ENTRY_END = new RegExp(`,${TIME},"type":"request"\\}$`);

export function isAuditRequestEntryLine(line: string): boolean {
  return (
    line.startsWith('{') &&
    line.endsWith('}') &&
    (REQUEST_ENTRY_START.test(line) || REQUEST_ENTRY_END.test(line.slice(-90)))
  );
}

/** What a request entry line stands for once recognised: it is ignored as a parsed request entry is. */
export const RECOGNISED_REQUEST_ENTRY: unknown = Object.freeze({
  type: 'request',
  request: Object.freeze({ id: '', operation: '', path: '' }),
});

export function parseAuditEntry(value: unknown, ctx: RecordContext): RecordOutcome {
  let entry = conformingAuditEntry(value);
  if (entry === undefined) {
    const parsed = AuditEntrySchema.safeParse(value);
    if (!parsed.success) return reject(`not a valid audit entry: ${describeIssues(parsed.error.issues)}`);
    entry = parsed.data;
  }
  const { request } = entry;
  if (entry.type === 'request')
    return ignore('request-entry', 'request entries precede the outcome; the response is acted on');
  if (entry.error) return ignore('failed-request', 'the request failed');

  const namespace = trimSlashes(request.namespace?.path ?? '');
  const path = trimSlashes(request.path);
  if (path === 'sys' || path.startsWith('sys/')) return ignore('sys', 'sys/ path');
  if (path === 'auth' || path.startsWith('auth/')) return ignore('auth', 'auth/ path');
  if (request.mount_type !== undefined && request.mount_type !== 'kv')
    return ignore('not-kv', `mount type ${request.mount_type}`);

  const version = responseVersion(entry);
  let mount: string;
  if (request.mount_point !== undefined) {
    // mount_point carries the namespace prefix; request.path does not.
    const qualified = trimSlashes(request.mount_point);
    mount =
      namespace !== '' && qualified.startsWith(`${namespace}/`) ? qualified.slice(namespace.length + 1) : qualified;
  } else {
    mount = guessMount(ctx.mounts, namespace, path);
  }
  const rest = underMount(path, mount);
  if (rest === undefined || mount === '')
    return reject(`request.path is not under its mount_point ${JSON.stringify(mount)}`);
  const tableVersion = ctx.mounts.get(qualify(namespace, mount));
  const kvVersion = tableVersion ?? inferKvVersion(rest, request.operation, version);
  const meaning = kvMeaning(kvVersion, rest, request.operation);
  if (meaning.kind === 'ignored') return meaning;
  // A KV v2 data write says which keys it carries; a v1 write has no versions to compare between.
  const keyDigests =
    kvVersion === 2 && meaning.operation === 'write' ? keyDigestsOf(value, request.operation) : undefined;
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
    ...(keyDigests === undefined ? {} : { keyDigests }),
  });
}
