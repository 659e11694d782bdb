/**
 * Key-level restarts (issue #24), pure: which keys a change changed, judged from the audit log's HMACs (never a
 * secret value), and whether a target that uses only other keys may be skipped.
 *
 * The comparison is always with the version just before: a create/update of version v is compared with the baseline
 * of version v-1 written by the same audit device (HMACs of two devices never compare; a baseline of v-2 would miss a
 * key changed in v-1 and changed back in v); a patch of v carries exactly the keys it changes from v-1. Anything else — no baseline, a gap in versions, another or an unknown device, an
 * event notification, a delete, destroy or undelete, an entry that does not say its keys — is every key. A target
 * is skipped only while its record is at v-1, so a workload that missed a version (a failed restart, a batch that
 * carried v-1 and v together) is restarted whatever the keys.
 */
import type { KeyDigests } from '../sources/key-digests.ts';
import type { SecretChange } from '../sources/secret-change.ts';
import { agentTemplateKeys, secretKeysRead, vaultKeysOf } from '../workloads/consumed-keys.ts';
import { podSpecOf, podTemplateAnnotationsOf } from '../workloads/consumers.ts';
import type { WorkloadKind } from '../routing/schema.ts';
import type { KubeObject } from '../workloads/workload-kinds.ts';
import type { KeysUsed, RolloutTarget } from './planner.ts';
import { recordKey, type RecordedVersions } from './restart-record.ts';

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
export function resolveChangedKeys(previous: KeyBaseline | undefined, change: Pick<SecretChange, 'operation' | 'version' | 'keyDigests'>): KeyResolution {
  const { operation, version, keyDigests } = change;
  // A delete, destroy or undelete changes what the workloads can read at all: every key, and nothing to compare next.
  if (operation !== 'write') return { changed: 'all', next: 'clear', why: `${operation}: every key` };
  if (version === null) return { changed: 'all', next: 'keep', why: 'no version: every key' };
  // An event notification, or an entry that does not say its keys: it tells nothing of this version's values.
  if (keyDigests === undefined) return { changed: 'all', next: 'keep', why: 'the change does not say its keys: every key' };
  const device = keyDigests.device();
  if (previous !== undefined && version <= previous.version) return { changed: 'all', next: 'keep', why: `v${version} is not newer than the baseline (v${previous.version}): every key` };
  if (keyDigests.mode === 'patch') {
    // A patch carries exactly the keys it changes from v-1 (null: removed), whatever the store holds; its digests
    // extend a baseline of v-1 from the same device, and without one there is nothing whole to keep.
    let next: KeyBaseline | 'forget' = 'forget';
    if (previous !== undefined && previous.version === version - 1 && device !== undefined && device === previous.device) {
      const digests = { ...previous.digests };
      for (const [key, digest] of keyDigests.digests()) {
        if (digest === null) delete digests[key];
        else digests[key] = digest;
      }
      next = { device, version, digests };
    }
    return { changed: keyDigests.names, next, why: `patch of v${version - 1}` };
  }
  const whole = device !== undefined ? baselineOf(device, version, keyDigests) : 'forget';
  if (previous === undefined || previous.version !== version - 1) {
    return { changed: 'all', next: whole, why: previous === undefined ? 'no baseline: every key' : `the baseline is v${previous.version}, not v${version - 1}: every key` };
  }
  if (device === undefined || device !== previous.device) {
    return { changed: 'all', next: whole, why: device === undefined ? 'the audit device is unknown: every key' : 'another audit device wrote the baseline: every key' };
  }
  const now = keyDigests.digests();
  const changed: string[] = [];
  for (const [key, digest] of now) if (previous.digests[key] !== digest) changed.push(key);
  // A key the new version no longer has changed too.
  for (const key of Object.keys(previous.digests)) if (!now.has(key)) changed.push(key);
  return { changed: sorted(changed), next: whole, why: `compared with v${version - 1}` };
}

/**
 * Why `target` may skip its restart although something newer than its record came: every secret it is planned for
 * is a write whose changed keys are known, the target names the keys it uses of that path, none of them changed, and
 * its record is at the version before. Undefined: restart.
 */
export function keyLevelSkip(target: Pick<RolloutTarget, 'secrets' | 'uses'>, recorded: RecordedVersions): string | undefined {
  const reasons: string[] = [];
  for (const secret of target.secrets) {
    const used = target.uses?.[secret.path];
    if (secret.operation !== 'write' || secret.version === null || secret.changedKeys === undefined || used === undefined) return undefined;
    if (recorded[recordKey(secret)] !== secret.version - 1) return undefined;
    // A delete or destroy it was restarted for may have come after v-1 (entries arrive late: a write of v-1 recorded
    // after the delete of v-1), so it may run no value at all: never skip it (a precision cost, found by the property test).
    if (recorded[`${secret.path}#delete`] !== undefined || recorded[`${secret.path}#destroy`] !== undefined) return undefined;
    const changed = new Set(secret.changedKeys);
    if (used.keys.some((k) => changed.has(k))) return undefined;
    reasons.push(`${target.secrets.length > 1 ? `${secret.path}: ` : ''}keys ${used.keys.join(', ')} unchanged in v${secret.version}`);
  }
  return reasons.length > 0 ? reasons.join('; ') : undefined;
}

/**
 * A consumer's own target: the keys it uses, found where the routes do not say (issue #24) — the Secret keys its pod
 * template reads, mapped back to Vault keys through the operator's resource that writes the Secret (ESO `property`,
 * VSO one to one). Declared keys win; a path whose keys cannot be followed stays every key.
 */
export function withConsumerKeys<T extends RolloutTarget>(target: T, consumer: { kind: WorkloadKind; name: string; object: KubeObject }, secretName: string, operator: { kind: string; name: string; object: KubeObject }): T {
  const vaultKeys = vaultKeysOf(operator.kind, operator.object, secretKeysRead(podSpecOf(consumer.kind, consumer.object), secretName));
  if (vaultKeys === 'all') return target;
  const uses: Record<string, KeysUsed> = { ...target.uses };
  for (const path of target.paths) uses[path] ??= { keys: vaultKeys, from: [`${consumer.kind} ${consumer.name} reads them from Secret ${secretName} (${operator.kind} ${operator.name})`] };
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
