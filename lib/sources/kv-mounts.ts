/**
 * KV semantics shared by every feed: which mount a path belongs to, which KV version that mount runs,
 * and what a request on a KV path means (write, delete, destroy, undelete, or nothing to act on).
 */
import type { IgnoreReason, KvVersion, Operation } from './secret-change.ts';

/** KV version per mount, keyed by the namespace-qualified mount path without slashes ("secret", "team-a/secret"). */
export type KvMounts = ReadonlyMap<string, KvVersion>;

/** Most paths have no slash at either end: those are returned as they are, without running the regex. */
export const trimSlashes = (s: string): string =>
  s.startsWith('/') || s.endsWith('/') ? s.replace(/^\/+|\/+$/g, '') : s;

export function qualify(namespace: string, path: string): string {
  return namespace === '' ? path : `${namespace}/${path}`;
}

/** The longest mount of the table that `path` (namespace-relative) lies under, at a segment boundary. */
export function findMount(
  mounts: KvMounts,
  namespace: string,
  path: string,
): { mount: string; kvVersion: KvVersion } | undefined {
  if (mounts.size === 0) return undefined;
  const segments = path.split('/');
  for (let n = segments.length - 1; n >= 1; n--) {
    const mount = segments.slice(0, n).join('/');
    const kvVersion = mounts.get(qualify(namespace, mount));
    if (kvVersion !== undefined) return { mount, kvVersion };
  }
  return undefined;
}

/** The mount a path lies under when the entry does not say: the routing table's, else the first segment. */
export function guessMount(mounts: KvMounts, namespace: string, path: string): string {
  return findMount(mounts, namespace, path)?.mount ?? path.split('/', 1)[0] ?? '';
}

/** The part of `path` after `mount/`, or undefined when the path is not under that mount. */
export function underMount(path: string, mount: string): string | undefined {
  if (path === mount) return '';
  return path.startsWith(`${mount}/`) ? path.slice(mount.length + 1) : undefined;
}

const V2_ENDPOINTS = new Set(['data', 'metadata', 'delete', 'undelete', 'destroy', 'subkeys']);
const MUTATING = new Set(['create', 'update', 'patch', 'delete']);

/**
 * Nothing in an audit entry states the KV version. Without the routing table we infer it the way the paths
 * read: a v2 endpoint segment after the mount means v2, except that a data write must also carry the new
 * version in its response (a v1 key may well be called "data/...").
 */
export function inferKvVersion(rest: string, vaultOperation: string, responseVersion: number | null): KvVersion {
  const first = rest.split('/', 1)[0] ?? '';
  if (!V2_ENDPOINTS.has(first)) return 1;
  if (first === 'data' && vaultOperation !== 'delete' && MUTATING.has(vaultOperation))
    return responseVersion === null ? 1 : 2;
  return 2;
}

export type KvMeaning =
  { kind: 'change'; operation: Operation; key: string } | { kind: 'ignored'; reason: IgnoreReason; detail: string };

const ignored = (reason: IgnoreReason, detail: string): KvMeaning => ({ kind: 'ignored', reason, detail });

/** What a Vault logical operation on `rest` (the path below the mount) means for the workloads. */
export function kvMeaning(kvVersion: KvVersion, rest: string, vaultOperation: string): KvMeaning {
  if (!MUTATING.has(vaultOperation)) return ignored('read', `${vaultOperation} is not a change`);
  if (kvVersion === 1) {
    if (rest === '') return ignored('read', 'no key below the mount');
    return { kind: 'change', operation: vaultOperation === 'delete' ? 'delete' : 'write', key: rest };
  }
  const slash = rest.indexOf('/');
  const endpoint = slash < 0 ? rest : rest.slice(0, slash);
  const key = slash < 0 ? '' : rest.slice(slash + 1).replace(/\/+$/, '');
  if (endpoint === 'config') return ignored('metadata', 'KV v2 mount configuration');
  if (key === '') return ignored('not-kv', `not a KV v2 secret endpoint: ${endpoint || '(mount root)'}`);
  const write = vaultOperation !== 'delete';
  switch (endpoint) {
    case 'data':
      return { kind: 'change', operation: write ? 'write' : 'delete', key };
    case 'delete':
    case 'undelete':
    case 'destroy':
      return write
        ? { kind: 'change', operation: endpoint, key }
        : ignored('not-kv', `${vaultOperation} on ${endpoint}/`);
    case 'metadata':
      return write ? ignored('metadata', 'metadata-only write') : { kind: 'change', operation: 'destroy', key };
    case 'subkeys':
      return ignored('read', 'subkeys');
    default:
      return ignored('not-kv', `not a KV v2 secret endpoint: ${endpoint}`);
  }
}
