import type { KeyDigests } from './key-digests.ts';

/**
 * The one internal shape every Vault change feed is normalized into. Everything after lib/sources works on
 * SecretChange only, never on raw audit entries or event notifications.
 */

export const Operations = ['write', 'delete', 'destroy', 'undelete'] as const;
export type Operation = (typeof Operations)[number];

/**
 * Which Vault feed produced the change (`reconcile`: Vault's metadata, read by reconcile); the transport (file, Fluent
 * Bit, CloudWatch...) is in `via`.
 */
export const ChangeSources = ['audit', 'event', 'reconcile'] as const;
export type ChangeSource = (typeof ChangeSources)[number];
export const Transports = ['direct', 'fluent-bit', 'vector', 'cloudwatch'] as const;
export type Transport = (typeof Transports)[number];
export const KvVersionOrigins = ['routes', 'inferred', 'event-type'] as const;
export type KvVersion = 1 | 2;

export interface SecretChange {
  /** Vault Enterprise namespace without trailing slash; "" for root. */
  namespace: string;
  /** Mount path without slashes at either end and without the namespace prefix. */
  mount: string;
  /** Secret key inside the mount, without `data/`, `metadata/`... */
  key: string;
  /** `mount/key`: what routes match against. */
  path: string;
  operation: Operation;
  /** KV v2 version the change produced or acted on; null for KV v1 and when the feed does not say. */
  version: number | null;
  kvVersion: KvVersion;
  /** Where the KV version came from: the routing table's `vault.mounts`, the event type, or inferred from the path. */
  kvVersionFrom: (typeof KvVersionOrigins)[number];
  source: ChangeSource;
  via: Transport;
  /** Vault request id (audit) or event id. */
  id: string;
  /** RFC 3339 time Vault stamped on the entry or event. */
  time: string;
  /** Where in the input the record was. */
  record: string;
  /**
   * What a KV v2 write's audit entry says of its keys: their names and a digest of each HMAC, kept
   * private to the object (never serialized, never queued). Absent for every other change.
   */
  keyDigests?: KeyDigests;
  /**
   * The keys this change changed, relative to the version before it, as the intake resolved them from keyDigests
   * and the baseline store (lib/plan/changed-keys.ts); absent: every key. Queued with the change.
   */
  changedKeys?: string[];
  /**
   * Vault Enterprise's storage index when the change happened (event notifications since 1.16, `metadata.vault_index`;
   * checked by isVaultIndex in vault-index.ts). A metadata read made for this change sends it as `X-Vault-Index`, so a
   * performance standby that is behind answers 412 (retried) instead of an older version. Absent for every other feed,
   * and for an event whose index is not bounded base64. Not queued: the worker reads nothing from Vault.
   */
  vaultIndex?: string;
}

/** Why a well-formed record is not a change. Ignored records were understood; they are not errors. */
export const IgnoreReasons = [
  'request-entry',
  'failed-request',
  'read',
  'metadata',
  'not-kv',
  'sys',
  'auth',
  'not-modified',
  'control-message',
] as const;
export type IgnoreReason = (typeof IgnoreReasons)[number];

export interface IgnoredRecord {
  record: string;
  reason: IgnoreReason;
  detail: string;
}

export interface RejectedRecord {
  record: string;
  error: string;
}

/** The outcome of reading one input: every record lands in exactly one of the three lists. */
export interface ParseResult {
  changes: SecretChange[];
  ignored: IgnoredRecord[];
  rejected: RejectedRecord[];
}

export function emptyParseResult(): ParseResult {
  return { changes: [], ignored: [], rejected: [] };
}

/**
 * Bounds on what a change may carry, checked where it is built (lib/sources/record.ts) and again where the queue
 * is read: Vault stamps UUIDs and RFC 3339 times, and no routable path comes near these lengths.
 */
export const CHANGE_LIMITS = { namespace: 256, mount: 256, key: 4096, id: 256, time: 64 } as const;

/** Why a change is out of bounds, naming the field, never its value; undefined when it is within them. */
export function changeLimitError(change: Pick<SecretChange, keyof typeof CHANGE_LIMITS>): string | undefined {
  for (const field of Object.keys(CHANGE_LIMITS) as Array<keyof typeof CHANGE_LIMITS>) {
    if (change[field].length > CHANGE_LIMITS[field])
      return `the ${field} is longer than ${CHANGE_LIMITS[field]} characters`;
  }
  return undefined;
}
