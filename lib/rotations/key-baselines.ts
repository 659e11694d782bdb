/**
 * Key-level restarts' baselines: per (audit device, Vault path), the digest of each key's HMAC at the
 * newest version the intake saw, so the next write's keys can be compared with it (lib/plan/changed-keys.ts). Kept
 * in the store each runtime already has for rotations (SQLite in `serve`, DynamoDB in Lambda, memory in tests), with
 * a TTL: an expired or missing baseline only means the next write restarts every keyed target, as today.
 *
 * What an item holds: the path, the version, the key names and a SHA-256 of each key's HMAC, the device's identity (a
 * digest too). Never a value or an HMAC. Whoever reads the store learns which keys a path has and, per key, whether two
 * versions (or two paths seen by the same device) hold equal values — not the values.
 */
import { createHash } from 'node:crypto';
import type { KeyBaseline } from '../plan/changed-keys.ts';

export interface KeyBaselineStore {
  /** The baseline of `path` from `device`, unless it expired. */
  baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined>;
  /**
   * Stores a baseline for its device, unless one of a newer version is there and not expired at `nowMs` (versions
   * only move forward; after a missed metadata delete they start again at 1, which an expired item must not block).
   */
  putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void>;
  /** Forgets what `device` holds for `path` (a version whose whole set of keys is not known). */
  forgetBaseline(device: string, path: string): Promise<void>;
  /** Forgets every device's baseline of `path` (a delete, destroy or undelete). */
  clearBaselines(path: string): Promise<void>;
}

/** Whether a store (a rotation store of some runtime) keeps key baselines too. */
export const isKeyBaselineStore = (store: object): store is KeyBaselineStore =>
  'baseline' in store && 'putBaseline' in store && 'clearBaselines' in store;

/**
 * How long a baseline is kept after the write that made it: a secret rotated less often restarts every keyed target.
 */
export const KEY_BASELINE_TTL_MS = 90 * 24 * 3600 * 1000;

/** A fixed-length key for a path (paths are up to ~4 KiB). */
export const pathKey = (path: string): string => createHash('sha256').update(path).digest('hex').slice(0, 40);

/** Reads a stored baseline back; anything that is not one counts as none (the next write restarts every key). */
export function parseStoredBaseline(text: string, device: string): KeyBaseline | undefined {
  try {
    const v = JSON.parse(text) as { version?: unknown; digests?: unknown };
    if (
      typeof v.version !== 'number' ||
      !Number.isSafeInteger(v.version) ||
      typeof v.digests !== 'object' ||
      v.digests === null ||
      Array.isArray(v.digests)
    )
      return undefined;
    const digests = v.digests as Record<string, unknown>;
    if (!Object.values(digests).every((d) => typeof d === 'string')) return undefined;
    return { device, version: v.version, digests: { ...(digests as Record<string, string>) } };
  } catch {
    return undefined;
  }
}

export const storedBaseline = (b: KeyBaseline): string => JSON.stringify({ version: b.version, digests: b.digests });

/** Tests and dry runs: one process's memory. */
export class MemoryKeyBaselineStore implements KeyBaselineStore {
  readonly #items = new Map<string, Map<string, { baseline: KeyBaseline; expiresAtMs: number }>>();

  baseline(device: string, path: string, nowMs: number): Promise<KeyBaseline | undefined> {
    const item = this.#items.get(path)?.get(device);
    return Promise.resolve(item && item.expiresAtMs > nowMs ? structuredClone(item.baseline) : undefined);
  }

  putBaseline(path: string, baseline: KeyBaseline, expiresAtMs: number, nowMs: number): Promise<void> {
    let devices = this.#items.get(path);
    if (!devices) this.#items.set(path, (devices = new Map()));
    const known = devices.get(baseline.device);
    if (!known || known.baseline.version < baseline.version || known.expiresAtMs <= nowMs)
      devices.set(baseline.device, { baseline: structuredClone(baseline), expiresAtMs });
    return Promise.resolve();
  }

  forgetBaseline(device: string, path: string): Promise<void> {
    this.#items.get(path)?.delete(device);
    return Promise.resolve();
  }

  clearBaselines(path: string): Promise<void> {
    this.#items.delete(path);
    return Promise.resolve();
  }

  /** Forgets everything (a fresh store, in tests). */
  clearAll(): void {
    this.#items.clear();
  }
}
