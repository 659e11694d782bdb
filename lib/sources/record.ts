/** The common interface of the per-shape parsers: a type guard picks one, it turns a record into an outcome. */
import type { KvMounts } from './kv-mounts.ts';
import { changeLimitError, type IgnoreReason, type SecretChange, type Transport } from './secret-change.ts';

export type RecordOutcome =
  | { kind: 'change'; change: SecretChange }
  | { kind: 'ignored'; reason: IgnoreReason; detail: string }
  | { kind: 'rejected'; error: string };

export interface RecordContext {
  /** Where the record is in the input, e.g. `line 3` or `line 1 logEvents[2]`. */
  record: string;
  via: Transport;
  mounts: KvMounts;
}

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export function ignore(reason: IgnoreReason, detail: string): RecordOutcome {
  return { kind: 'ignored', reason, detail };
}

/** A change found in this record; `path`, the transport and the record's place come from what is already known. */
export function changed(ctx: RecordContext, change: Omit<SecretChange, 'path' | 'via' | 'record'>): RecordOutcome {
  const tooLong = changeLimitError(change);
  if (tooLong) return reject(tooLong);
  // Without a version, the time and the request or event id are all that tell this change from a replay of the last
  // one (lib/plan/restart-record.ts recordValue); with neither, it would be `unchanged` forever after the first.
  if (change.version === null && change.time === '' && change.id === '')
    return reject(
      'a change without a version needs the time or the request id of the entry: nothing else tells it from a replay',
    );
  return {
    kind: 'change',
    change: { ...change, path: `${change.mount}/${change.key}`, via: ctx.via, record: ctx.record },
  };
}

export function reject(error: string): RecordOutcome {
  return { kind: 'rejected', error };
}

/** zod issues as one line that names the field, never the value (values may be secrets or HMACs). */
export function describeIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string {
  return issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || '(record)'}: ${i.message}`)
    .join('; ');
}
