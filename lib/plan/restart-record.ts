/**
 * What vault-rollout records on a workload, and the pure decision made from it: restart, nothing to do (a replay
 * of what is recorded), or skip (the workload already carries a newer version). The record lives where the
 * restart happens (the pod template, or the Rollout's metadata), so a replayed change renders the identical
 * patch and the API server writes nothing.
 */
import type { RolloutTarget, SecretRef } from './planner.ts';
import { compilePattern, PatternError, type CompiledPattern } from '../routing/path-pattern.ts';

export { ANNOTATIONS, EVENT_REPORTER, HALT_EVENT_REASON, haltEventName } from '../workloads/annotations.ts';
import { ANNOTATIONS } from '../workloads/annotations.ts';

export type RecordedVersions = Record<string, number | string>;

/**
 * A delete and an undelete of a version undo each other. Both stay recorded: a delete that is older than the
 * undelete recorded after it (a redelivery, a continuation's look, a late copy) is older than the record and
 * restarts nothing. (Were recording one to remove the other, that replay would find nothing recorded and restart
 * the workload a second time.)
 */
const UNDOES: Readonly<Partial<Record<SecretRef['operation'], SecretRef['operation']>>> = {
  delete: 'undelete',
  undelete: 'delete',
};

/**
 * What a secret reference records: its version; for a change without one (KV v1, an audit entry of a delete) the
 * change's own identity, `time#id`: the time Vault stamped (to order changes) and the Vault request or event id
 * (to tell two changes apart when the feed gives no time, or the same time). A redelivered change carries the same
 * id and time, so it finds itself recorded (`unchanged`); a new write has a new request id, so it never does.
 *
 * A delete or an undelete records its identity even when the feed names a version: the same version is deleted,
 * undeleted and deleted again (the event feed says version 3 each time), so only the time orders them.
 */
export const recordValue = (s: SecretRef): number | string =>
  s.version !== null && !(s.operation in UNDOES && s.time !== '') ? s.version : `${s.time}#${s.id}`;

/**
 * Where it is recorded: writes under the path, other operations under `path#operation`, so a delete of version 3
 * (or a delete with no version at all) is not mistaken for the write of version 3 that came before it.
 */
export const recordKey = (s: SecretRef): string => (s.operation === 'write' ? s.path : `${s.path}#${s.operation}`);

/** Parses the versions annotation; a hand-edited or foreign value counts as nothing recorded. */
export function parseRecordedVersions(value: string | undefined): RecordedVersions {
  if (!value) return {};
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (e): e is [string, number | string] => typeof e[1] === 'number' || typeof e[1] === 'string',
      ),
    );
  } catch {
    return {};
  }
}

/** RFC 3339 as Vault stamps it (nanoseconds, any offset): the instant as [epoch ms of the second, ns in it]. */
const RFC3339 = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/i;
function instant(time: string): [number, number] | undefined {
  const m = RFC3339.exec(time);
  const seconds = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN;
  return m && !Number.isNaN(seconds) ? [seconds, Number((m[2] ?? '').padEnd(9, '0'))] : undefined;
}

/** Times compare as instants when both are RFC 3339, else as text (what records written before held). */
function compareTimes(a: string, b: string): number {
  const [x, y] = [instant(a), instant(b)];
  if (x && y) return Math.sign(x[0] - y[0]) || Math.sign(x[1] - y[1]);
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Two versionless identities (`time#id`): the same text is the same change; otherwise the later time is newer. Two
 * different changes that cannot be ordered (no time, or the same time) are both new: the second restarts too. A
 * record without `#id` (written before ids were recorded) is the change of that time.
 */
function compareIdentities(a: string, b: string): number {
  if (a === b) return 0;
  const [ta, ia] = splitIdentity(a);
  const [tb, ib] = splitIdentity(b);
  if (ta !== '' && tb !== '') {
    const order = compareTimes(ta, tb);
    if (order !== 0) return order;
    if (ia === undefined || ib === undefined) return 0;
  }
  return 1;
}

/** Whether identity `a` carries a time strictly after `b`'s (two changes at the same or no time are not ordered). */
function strictlyLater(a: string, b: string): boolean {
  const [ta, tb] = [splitIdentity(a)[0], splitIdentity(b)[0]];
  return ta !== '' && tb !== '' && compareTimes(ta, tb) > 0;
}

const splitIdentity = (value: string): [string, string | undefined] => {
  const at = value.indexOf('#');
  return at < 0 ? [value, undefined] : [value.slice(0, at), value.slice(at + 1)];
};

/**
 * -1, 0, 1: versions compare as numbers, versionless changes by their identity (compareIdentities). A version and a
 * versionless change cannot be ordered (one feed gave a version, another none): that is a different change, so it
 * counts as newer and restarts.
 */
function compare(a: number | string, b: number | string): number {
  if (typeof a === 'number' && typeof b === 'number') return Math.sign(a - b);
  if (typeof a === 'string' && typeof b === 'string') return compareIdentities(a, b);
  return 1;
}

/**
 * One record from several: a workload's pod template record (its restarts) and its metadata record (versions
 * reconcile found its pods already run, recorded without a restart: RECORD_ONLY). Per key the newer value wins.
 */
export function mergeRecordedVersions(...records: readonly RecordedVersions[]): RecordedVersions {
  const merged: RecordedVersions = {};
  for (const record of records) {
    for (const [key, value] of Object.entries(record)) {
      const known = merged[key];
      if (known === undefined || compare(value, known) > 0) merged[key] = value;
    }
  }
  return merged;
}

/** An object as the record sees it: its own metadata annotations, and where its kind keeps the restart record. */
export interface RecordHolder {
  metadata?: { annotations?: Record<string, string> };
}

/**
 * THE record of a workload, read where vault-rollout writes it and nowhere else: the versions annotation its restart
 * patch writes (`restartAnnotations`, at the kind's `recordedAnnotations`: the pod template, or the metadata of a
 * Rollout or custom resource) and the versions annotation reconcile writes on the object's own metadata for pods that
 * already run a version (`recordOnlyPatch`). The admission policy lets the vault-rollout identity write exactly these
 * (lib/deploy/admission-policy.ts). The executor, reconcile and `status` (its paths and its verdicts) all read the
 * record here, so a version reconcile recorded without a restart counts for each of them. `restartsOnly`: the
 * restart record alone (`reset-version` replaces what it holds).
 *
 * Never an Event, another object's annotations or an unrelated template (a Deployment's `jobTemplate`): anything
 * else a tenant writes is no record. Whoever may edit the workload may still write these two annotations; the keys
 * are checked before any becomes a Vault path (lib/sources/vault-path.ts).
 */
export function readRecord<O extends RecordHolder>(
  kind: { recordedAnnotations(obj: O): Record<string, string> | undefined },
  obj: O,
  options: { restartsOnly?: boolean } = {},
): RecordedVersions {
  const restarts = parseRecordedVersions(kind.recordedAnnotations(obj)?.[ANNOTATIONS.versions]);
  return options.restartsOnly === true ? restarts : mergeRecordedVersions(restarts, recordedWithoutRestart(obj));
}

/** The record reconcile wrote on the object's metadata (pods already on the version), alone. */
export const recordedWithoutRestart = (obj: RecordHolder): RecordedVersions =>
  parseRecordedVersions(obj.metadata?.annotations?.[ANNOTATIONS.versions]);

/**
 * A key-level skip as the record keeps it, on the object's metadata beside reconcile's versions: version `v` came,
 * and none of the keys in `skipped` (those the workload uses) changed in it, as the change claimed. It is no restart
 * and no version the pods run: readRecord never counts it, a later change of `v` that names one of those keys (or
 * every key) still restarts, and `status` shows it unverified until reconcile confirmed `v` with Vault and recorded it
 * as a version.
 */
export interface KeySkip {
  v: number;
  skipped: string[];
}

export type RecordedSkips = Record<string, KeySkip>;

/** What the metadata's versions annotation holds: versions reconcile recorded, and key-level skips. */
export type MetadataRecord = Record<string, number | string | KeySkip>;

/** Bounds on a skip read back (tenants may write the annotation): the keys one change may name. */
const MAX_SKIPPED_KEYS = 256;

const isKeySkip = (v: unknown): v is KeySkip => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const { v: version, skipped } = v as { v?: unknown; skipped?: unknown };
  return (
    typeof version === 'number' &&
    Number.isSafeInteger(version) &&
    version > 0 &&
    Array.isArray(skipped) &&
    skipped.length <= MAX_SKIPPED_KEYS &&
    skipped.every((k) => typeof k === 'string' && k.length > 0 && k.length <= 256)
  );
};

/** The metadata record whole (versions and skips); anything else in it counts as nothing. */
export function metadataRecord(obj: RecordHolder): MetadataRecord {
  const value = obj.metadata?.annotations?.[ANNOTATIONS.versions];
  if (!value) return {};
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (e): e is [string, number | string | KeySkip] =>
          typeof e[1] === 'number' || typeof e[1] === 'string' || isKeySkip(e[1]),
      ),
    );
  } catch {
    return {};
  }
}

/** The key-level skips a workload records, by path. */
export function recordedSkips(obj: RecordHolder): RecordedSkips {
  return Object.fromEntries(Object.entries(metadataRecord(obj)).filter((e): e is [string, KeySkip] => isKeySkip(e[1])));
}

/**
 * Where reconcile records versions a workload already runs without restarting it: the versions annotation on the
 * object's own metadata. For pod-template kinds that changes no pod; for Rollouts and custom resources it is where
 * their record lives anyway. The admission policy allows exactly this annotation (lib/deploy/admission-policy.ts).
 * Key-level skips go there too (KeySkip).
 */
export function recordOnlyPatch(versions: MetadataRecord): Record<string, unknown> {
  return { metadata: { annotations: { [ANNOTATIONS.versions]: JSON.stringify(sortKeys(versions)) } } };
}

export type RestartDecision =
  | { action: 'restart'; versions: RecordedVersions }
  | { action: 'unchanged'; versions: RecordedVersions }
  | { action: 'skip'; reason: string };

/**
 * Versions only move forward: restart when any secret of the target is newer than what the workload records
 * (with `override`, also when it is older: the record is reset to it);
 * re-send the identical patch when everything is exactly what is recorded (a replay: the server writes nothing);
 * skip when the workload already records a newer version of every secret.
 */
export function decideRestart(
  recorded: RecordedVersions,
  target: Pick<RolloutTarget, 'secrets'>,
  options: { override?: boolean } = {},
): RestartDecision {
  const merged: RecordedVersions = { ...recorded };
  let newer = 0;
  let same = 0;
  const older: string[] = [];
  for (const secret of target.secrets) {
    const key = recordKey(secret);
    const value = recordValue(secret);
    const known = recorded[key];
    const undoneKey = UNDOES[secret.operation] === undefined ? undefined : `${secret.path}#${UNDOES[secret.operation]}`;
    const undoneBy = undoneKey === undefined ? undefined : recorded[undoneKey];
    // Undone since (an undelete recorded after this delete): as old as a lower version.
    const undoneLater = typeof value === 'string' && typeof undoneBy === 'string' && strictlyLater(undoneBy, value);
    const order = undoneLater ? -1 : known === undefined ? 1 : compare(value, known);
    // Override (`reset-version`): what is recorded is wrong — a forged, too-high version — and is replaced.
    if (order > 0 || (options.override === true && order < 0)) {
      newer++;
      merged[key] = value;
    } else if (order === 0) same++;
    else
      older.push(
        undoneLater
          ? `${undoneKey} is at ${JSON.stringify(undoneBy)}, after ${JSON.stringify(value)}`
          : `${key} is at ${JSON.stringify(known)}, newer than ${JSON.stringify(value)}`,
      );
  }
  const versions = sortKeys(merged);
  if (newer > 0) return { action: 'restart', versions };
  if (same > 0 && older.length === 0) return { action: 'unchanged', versions };
  return { action: 'skip', reason: `older than recorded: ${older.join('; ')}` };
}

const sortKeys = <T>(o: Record<string, T>): Record<string, T> =>
  Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));

/** The annotations a restart writes; the same target and record always give the same values. */
export function restartAnnotations(
  target: Pick<RolloutTarget, 'restartToken' | 'restartedAt'>,
  versions: RecordedVersions,
  fallbackTime: string,
): Record<string, string> {
  return {
    [ANNOTATIONS.restartedAt]: target.restartedAt ?? fallbackTime,
    [ANNOTATIONS.restartToken]: target.restartToken,
    [ANNOTATIONS.versions]: JSON.stringify(versions),
  };
}

/** Paths or patterns from a `vault-rollout.io/watch` annotation. */
export function watchPatterns(value: string | undefined): string[] {
  return (value ?? '')
    .split(/[,\n]/)
    .map((s) => s.trim().replace(/^\/+/, ''))
    .filter((s) => s !== '');
}

/**
 * Bounds on the watch annotation: anyone who may edit a workload in a watched namespace writes it, and it is parsed
 * for every workload listed. Each pattern also has the routing table's bounds (PATTERN_LIMITS).
 */
export const WATCH_LIMITS = { length: 4096, patterns: 32 } as const;

export interface WatchAnnotation {
  patterns: CompiledPattern[];
  /** Why patterns (or the whole annotation) were ignored; empty when every pattern is in use. */
  problems: string[];
}

/**
 * The compiled patterns of a watch annotation. An annotation over its bounds watches nothing; a pattern that does not
 * compile or is over its bounds watches nothing while the others still count. Either way `problems` says why, so
 * the caller can name the workload in its log line instead of ignoring it silently.
 */
export function parseWatchAnnotation(value: string | undefined): WatchAnnotation {
  if (value === undefined) return { patterns: [], problems: [] };
  if (value.length > WATCH_LIMITS.length) {
    return {
      patterns: [],
      problems: [
        `${ANNOTATIONS.watch} is ${value.length} characters long; at most ${WATCH_LIMITS.length}: it watches nothing`,
      ],
    };
  }
  const sources = watchPatterns(value);
  if (sources.length > WATCH_LIMITS.patterns) {
    return {
      patterns: [],
      problems: [
        `${ANNOTATIONS.watch} lists ${sources.length} patterns; at most ${WATCH_LIMITS.patterns}: it watches nothing`,
      ],
    };
  }
  const patterns: CompiledPattern[] = [];
  const problems: string[] = [];
  for (const source of sources) {
    try {
      patterns.push(compilePattern(source));
    } catch (e) {
      if (!(e instanceof PatternError)) throw e;
      problems.push(
        `pattern ${JSON.stringify(source.length > 80 ? `${source.slice(0, 80)}…` : source)} ignored: ${e.message}`,
      );
    }
  }
  return { patterns, problems };
}
