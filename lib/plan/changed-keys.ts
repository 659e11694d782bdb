/**
 * Key-level restarts, pure: which keys a change changed, judged from the audit log's HMACs (never a
 * secret value), and whether a target that uses only other keys may be skipped.
 *
 * The comparison is always with the version just before: a create/update of version v is compared with the baseline
 * of version v-1 written by the same audit device (HMACs of two devices never compare; a baseline of v-2 would miss a
 * key changed in v-1 and changed back in v); a patch of v names the keys it sets, honoured against that same baseline
 * only. Anything else — no baseline, a gap in versions, another or an unknown device, an
 * event notification, a delete, destroy or undelete, an entry that does not say its keys — is every key. A target
 * is skipped only while its record is at v-1, so a workload that missed a version (a failed restart, a batch that
 * carried v-1 and v together) is restarted whatever the keys.
 */
import type { KeyDigests } from '../sources/key-digests.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { agentTemplateKeys, secretKeysRead, vaultKeysOf } from '../workloads/consumed-keys.ts';
import { podSpecOf, podTemplateAnnotationsOf } from '../workloads/consumers.ts';
import type { WorkloadKind } from '../routing/target-schema.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import type { KeysUsed, RolloutTarget } from './planner.ts';
import { recordKey, type RecordedSkips, type RecordedVersions } from './restart-record.ts';

/** What the store keeps per (device, path): the digest of each key's HMAC at one version. Never a value or an HMAC. */
export interface KeyBaseline {
  device: string;
  version: number;
  /** Key → SHA-256 of its HMAC. */
  digests: Record<string, string>;
}

/** The keys a change changed, sorted, or `all`. */
export type ChangedKeys = string[] | 'all';

export interface KeyResolution {
  changed: ChangedKeys;
  /**
   * What the store should hold afterwards: a new baseline for the entry's device, what it holds (`keep`), nothing
   * for the entry's device (`forget`: this version's whole set of keys is not known), or nothing for the path from
   * any device (`clear`: a delete, destroy or undelete; the next write compares with nothing).
   */
  next: KeyBaseline | 'keep' | 'forget' | 'clear';
  /** Why, for the log: names and versions only. */
  why: string;
}

const sorted = (keys: Iterable<string>): string[] => [...new Set(keys)].sort();

/** The baseline a whole write leaves (its device must be known). */
function baselineOf(device: string, version: number, digests: KeyDigests): KeyBaseline {
  const out: Record<string, string> = {};
  for (const [key, digest] of digests.digests()) if (digest !== null) out[key] = digest;
  return { device, version, digests: out };
}

/**
 * Which keys `change` changed, given the baseline the store holds for its path and device (undefined: none), and
 * what the store should hold next.
 */
export function resolveChangedKeys(
  previous: KeyBaseline | undefined,
  change: Pick<SecretChange, 'operation' | 'version' | 'keyDigests'>,
): KeyResolution {
  const { operation, version, keyDigests } = change;
  // A delete, destroy or undelete changes what the workloads can read at all: every key, and nothing to compare next.
  if (operation !== 'write') return { changed: 'all', next: 'clear', why: `${operation}: every key` };
  if (version === null) return { changed: 'all', next: 'keep', why: 'no version: every key' };
  // An event notification, or an entry that does not say its keys: it tells nothing of this version's values.
  if (keyDigests === undefined)
    return { changed: 'all', next: 'keep', why: 'the change does not say its keys: every key' };
  const device = keyDigests.device();
  if (previous !== undefined && version <= previous.version)
    return {
      changed: 'all',
      next: 'keep',
      why: `v${version} is not newer than the baseline (v${previous.version}): every key`,
    };
  if (keyDigests.mode === 'patch') return resolvePatch(previous, version, keyDigests);
  const whole = device !== undefined ? baselineOf(device, version, keyDigests) : 'forget';
  if (previous === undefined || previous.version !== version - 1) {
    return {
      changed: 'all',
      next: whole,
      why:
        previous === undefined
          ? 'no baseline: every key'
          : `the baseline is v${previous.version}, not v${version - 1}: every key`,
    };
  }
  if (device === undefined || device !== previous.device) {
    return {
      changed: 'all',
      next: whole,
      why:
        device === undefined
          ? 'the audit device is unknown: every key'
          : 'another audit device wrote the baseline: every key',
    };
  }
  const now = keyDigests.digests();
  const changed: string[] = [];
  for (const [key, digest] of now) if (previous.digests[key] !== digest) changed.push(key);
  // A key the new version no longer has changed too.
  for (const key of Object.keys(previous.digests)) if (!now.has(key)) changed.push(key);
  return { changed: sorted(changed), next: whole, why: `compared with v${version - 1}` };
}

/**
 * A patch names the keys it sets (null: removed), nothing of the others. Its names are honoured only against a
 * baseline of v-1 from the same audit device: a key counts as changed when its digest differs from the baseline's
 * (or it was removed), and the baseline, extended, becomes v's. Without that baseline a patch says nothing anyone
 * checked — any entry claiming `hmac-sha256:<hex>` for some key would do — so it is every key, and nothing is kept.
 */
function resolvePatch(previous: KeyBaseline | undefined, version: number, keyDigests: KeyDigests): KeyResolution {
  const device = keyDigests.device();
  if (
    previous === undefined ||
    previous.version !== version - 1 ||
    device === undefined ||
    device !== previous.device
  ) {
    const why =
      previous === undefined
        ? 'no baseline'
        : previous.version !== version - 1
          ? `the baseline is v${previous.version}, not v${version - 1}`
          : 'the baseline is from another or an unknown audit device';
    return { changed: 'all', next: 'forget', why: `a patch with ${why}: every key` };
  }
  const digests = { ...previous.digests };
  const changed: string[] = [];
  for (const [key, digest] of keyDigests.digests()) {
    if (digest === null) {
      if (key in digests) changed.push(key);
      delete digests[key];
    } else {
      if (digests[key] !== digest) changed.push(key);
      digests[key] = digest;
    }
  }
  return { changed: sorted(changed), next: { device, version, digests }, why: `patch of v${version - 1}` };
}

/**
 * The version a workload stands at for a path: its record, or a key-level skip past it (a chain of writes that each
 * changed none of its keys). A skip at or below the record is history.
 */
function standsAt(recorded: RecordedVersions, skips: RecordedSkips, path: string): number | undefined {
  const at = recorded[path];
  const skip = skips[path]?.v;
  const version = typeof at === 'number' ? at : undefined;
  return skip !== undefined && (version === undefined || skip > version) ? skip : version;
}

/**
 * Why `target` may skip its restart although something newer than its record came: every secret it is planned for
 * is a write whose changed keys are known, the target names the keys it uses of that path, none of them changed, and
 * it stands at the version before (its record, or a skip of that version), or at this very version by a skip (the
 * same claim again: still nothing to restart). A skip recorded for this version does not make a later change of it
 * that names a used key `unchanged`: that one restarts. Undefined: restart.
 */
export function keyLevelSkip(
  target: Pick<RolloutTarget, 'secrets' | 'uses'>,
  recorded: RecordedVersions,
  skips: RecordedSkips = {},
): string | undefined {
  const reasons: string[] = [];
  for (const secret of target.secrets) {
    const used = target.uses?.[secret.path];
    if (
      secret.operation !== 'write' ||
      secret.version === null ||
      secret.changedKeys === undefined ||
      used === undefined
    )
      return undefined;
    const at = standsAt(recorded, skips, recordKey(secret));
    if (at !== secret.version - 1 && !(at === secret.version && skips[recordKey(secret)]?.v === secret.version))
      return undefined;
    // A delete or destroy it was restarted for may have come after v-1 (entries arrive late: a write of v-1 recorded
    // after the delete of v-1), so it may run no value at all: never skip it (a precision cost, found by the property
    // test).
    if (recorded[`${secret.path}#delete`] !== undefined || recorded[`${secret.path}#destroy`] !== undefined)
      return undefined;
    const changed = new Set(secret.changedKeys);
    if (used.keys.some((k) => changed.has(k))) return undefined;
    reasons.push(
      `${target.secrets.length > 1 ? `${secret.path}: ` : ''}keys ${used.keys.join(', ')} unchanged in v${secret.version}`,
    );
  }
  return reasons.length > 0 ? reasons.join('; ') : undefined;
}

/** The skips a key-level skip of `target` records: per path, the version and the keys it uses (sorted). */
export function keySkipsOf(target: Pick<RolloutTarget, 'secrets' | 'uses'>): RecordedSkips {
  const skips: RecordedSkips = {};
  for (const s of target.secrets) {
    const used = target.uses?.[s.path];
    if (s.operation === 'write' && s.version !== null && used !== undefined)
      skips[recordKey(s)] = { v: s.version, skipped: [...new Set(used.keys)].sort() };
  }
  return skips;
}

/**
 * Whether every secret of `target` is recorded as skipped by keys at its version (what a gate's look counts as done).
 */
export const skippedByKeysAt = (target: Pick<RolloutTarget, 'secrets'>, skips: RecordedSkips): boolean =>
  target.secrets.length > 0 &&
  target.secrets.every((s) => s.operation === 'write' && s.version !== null && skips[recordKey(s)]?.v === s.version);

/**
 * A consumer's own target: the keys it uses, found where the routes do not say — the Secret keys its pod
 * template reads, mapped back to Vault keys through the operator's resource that writes the Secret (ESO `property`,
 * VSO one to one). Declared keys win; a path whose keys cannot be followed stays every key.
 */
export function withConsumerKeys<T extends RolloutTarget>(
  target: T,
  consumer: { kind: WorkloadKind; name: string; object: KubeObject },
  secretName: string,
  operator: { kind: string; name: string; object: KubeObject },
): T {
  const vaultKeys = vaultKeysOf(
    operator.kind,
    operator.object,
    secretKeysRead(podSpecOf(consumer.kind, consumer.object), secretName),
  );
  if (vaultKeys === 'all') return target;
  const uses: Record<string, KeysUsed> = { ...target.uses };
  for (const path of target.paths)
    uses[path] ??= {
      keys: vaultKeys,
      from: [
        `${consumer.kind} ${consumer.name} reads them from Secret ${secretName} (${operator.kind} ${operator.name})`,
      ],
    };
  return { ...target, uses };
}

/** The target with every key counting: an operator's resource is always nudged, whatever keys its consumers use. */
export function everyKey<T extends RolloutTarget>(target: T): T {
  if (target.uses === undefined) return target;
  const copy = { ...target };
  delete copy.uses;
  return copy;
}

/**
 * A workload target's keys where the routes do not say: what the Vault Agent injector renders into its pods, from its
 * pod template's `vault.hashicorp.com/agent-inject-*` annotations (lib/workloads/consumed-keys.ts agentTemplateKeys).
 * Declared keys win; a path no annotation names, or whose templates read every key, stays every key.
 */
export function withAgentKeys<T extends RolloutTarget>(target: T, kind: WorkloadKind, object: KubeObject): T {
  if (target.type !== 'workload') return target;
  const annotations = podTemplateAnnotationsOf(kind, object);
  if (!Object.keys(annotations).some((k) => k.startsWith('vault.hashicorp.com/agent-inject-secret-'))) return target;
  let uses: Record<string, KeysUsed> | undefined;
  for (const path of target.paths) {
    if (target.uses?.[path] !== undefined) continue;
    const keys = agentTemplateKeys(annotations, path);
    if (keys === undefined || keys === 'all') continue;
    uses ??= { ...target.uses };
    uses[path] = { keys, from: [`Vault Agent templates of ${kind} ${object.metadata?.name ?? '?'}`] };
  }
  return uses === undefined ? target : { ...target, uses };
}
