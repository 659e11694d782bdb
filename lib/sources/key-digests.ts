/**
 * Which keys a KV v2 write carries, judged without a secret value. A KV write's audit entry keeps map
 * keys in clear and HMACs every string value with the audit device's own key: `request.data.data = {"password":
 * "hmac-sha256:…"}`. The HMAC of an unchanged value is the same in every entry of the same device, so comparing
 * them tells which keys changed. Only a digest (SHA-256) of each HMAC is kept, and only inside this object: its
 * fields are private, JSON shows the key names alone, so no log line, queue message or output can carry a digest.
 *
 * The device: entries do not name the audit device that wrote them, and HMACs of two devices (two salts) never
 * compare. A write's response HMACs `deletion_time`, which is the empty string for a new version unless the mount
 * or secret sets delete_version_after: that HMAC is the device's HMAC of "", the same for every entry of one device
 * and different for another. Its digest is the device's identity; where it is missing or not an HMAC (a device
 * with log_raw, an entry built by hand), the device is unknown and nothing is compared.
 */
import { createHash } from 'node:crypto';

// Not record.ts's: secret-change.ts names KeyDigests, and record.ts imports secret-change.ts.
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Bounds on what is kept of one entry: past them the entry says nothing of its keys (every key changed). */
export const KEY_DIGEST_LIMITS = { keys: 256, length: 256 } as const;

const HMAC = /^hmac-sha256:[0-9a-f]{64}$/;

const digest = (hmac: string): string => createHash('sha256').update(hmac).digest('hex');

/** How the keys were written: a whole new version (create, update), or a patch of some keys. */
export type KeyWriteMode = 'write' | 'patch';

export class KeyDigests {
  readonly mode: KeyWriteMode;
  /** Key → digest of its HMAC; null for a key a patch removes. */
  readonly #digests: ReadonlyMap<string, string | null>;
  readonly #device: string | undefined;

  constructor(mode: KeyWriteMode, digests: ReadonlyMap<string, string | null>, device: string | undefined) {
    this.mode = mode;
    this.#digests = digests;
    this.#device = device;
  }

  /** The key names the entry carries, sorted. */
  get names(): string[] {
    return [...this.#digests.keys()].sort();
  }

  /** The audit device's identity (a digest), or undefined when the entry does not show it. */
  device(): string | undefined {
    return this.#device;
  }

  /** Key → digest (null: removed by a patch). For the comparison and the baseline store only. */
  digests(): ReadonlyMap<string, string | null> {
    return this.#digests;
  }

  toJSON(): { mode: KeyWriteMode; keys: string[] } {
    return { mode: this.mode, keys: this.names };
  }
}

/**
 * The keys of a KV v2 data write (`operation` create, update or patch on `<mount>/data/<path>`), from the raw audit
 * entry; undefined when the entry does not say them plainly (no map, a value that is not an HMAC, too many keys):
 * then every key counts as changed.
 */
export function keyDigestsOf(entry: unknown, operation: string): KeyDigests | undefined {
  const mode: KeyWriteMode | undefined =
    operation === 'patch' ? 'patch' : operation === 'create' || operation === 'update' ? 'write' : undefined;
  if (mode === undefined || !isObject(entry) || !isObject(entry.request) || !isObject(entry.request.data))
    return undefined;
  const data = entry.request.data.data;
  if (!isObject(data)) return undefined;
  const names = Object.keys(data);
  if (names.length > KEY_DIGEST_LIMITS.keys) return undefined;
  const digests = new Map<string, string | null>();
  for (const name of names) {
    if (name === '' || name.length > KEY_DIGEST_LIMITS.length) return undefined;
    const value = data[name];
    // A patch removes a key with null (JSON merge patch); anything else that is not an HMAC'd string (a number, a
    // nested map, a raw value) cannot be compared.
    if (value === null && mode === 'patch') digests.set(name, null);
    else if (typeof value === 'string' && HMAC.test(value)) digests.set(name, digest(value));
    else return undefined;
  }
  return new KeyDigests(mode, digests, deviceOf(entry));
}

function deviceOf(entry: Record<string, unknown>): string | undefined {
  const response = entry.response;
  const deletion = isObject(response) && isObject(response.data) ? response.data.deletion_time : undefined;
  return typeof deletion === 'string' && HMAC.test(deletion) ? digest(`device\n${deletion}`) : undefined;
}
