/**
 * Which keys a consumer uses (issue #24), from its pod template and the operator's resource alone — never the Secret.
 * A pod reads a Secret's keys by `env[].valueFrom.secretKeyRef.key` and by the `items[].key` of a `secret` volume or a
 * `projected` volume's secret source; `envFrom` and a mount without `items` read every key. The Secret's keys map back
 * to Vault keys through the operator's resource: an ExternalSecret's `data[].remoteRef.property` (ESO), one to one for
 * a VaultStaticSecret (VSO). Anything this cannot follow is every key: `all`.
 */
import type { KubeObject } from './workload-kinds.ts';

type Obj = Record<string, unknown>;
const rec = (v: unknown): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(rec) : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

export type UsedKeys = string[] | 'all';

const CONTAINER_LISTS = ['containers', 'initContainers', 'ephemeralContainers'] as const;

/** The keys of Secret `secretName` a pod spec reads, sorted, or `all`. */
export function secretKeysRead(podSpec: unknown, secretName: string): UsedKeys {
  const spec = rec(podSpec);
  const keys = new Set<string>();
  for (const list of CONTAINER_LISTS) {
    for (const c of arr(spec[list])) {
      if (arr(c.envFrom).some((e) => str(rec(e.secretRef).name) === secretName)) return 'all';
      for (const e of arr(c.env)) {
        const ref = rec(rec(e.valueFrom).secretKeyRef);
        if (str(ref.name) !== secretName) continue;
        const key = str(ref.key);
        if (key === undefined) return 'all';
        keys.add(key);
      }
    }
  }
  const sources = arr(spec.volumes).flatMap((v) => [...(str(rec(v.secret).secretName) === secretName ? [rec(v.secret)] : []), ...arr(rec(v.projected).sources).map((s) => rec(s.secret)).filter((s) => str(s.name) === secretName)]);
  for (const source of sources) {
    const items = arr(source.items);
    if (items.length === 0) return 'all';
    for (const item of items) {
      const key = str(item.key);
      if (key === undefined) return 'all';
      keys.add(key);
    }
  }
  return keys.size === 0 ? 'all' : [...keys].sort();
}

/**
 * The Vault keys behind Secret keys the operator writes: an ExternalSecret maps each `data[].secretKey` to its
 * `remoteRef.property` (none: the whole secret as JSON, every key); `dataFrom` or a `target.template` may put any
 * Vault key anywhere (every key). A VaultStaticSecret writes the Vault keys as they are (and `_raw`, the whole secret),
 * unless a `destination.transformation` says otherwise.
 */
export function vaultKeysOf(operatorKind: string, operatorObject: KubeObject, secretKeys: UsedKeys): UsedKeys {
  if (secretKeys === 'all') return 'all';
  const spec = rec(operatorObject.spec);
  if (operatorKind === 'VaultStaticSecret') {
    if (Object.keys(rec(rec(spec.destination).transformation)).length > 0 || secretKeys.includes('_raw')) return 'all';
    return secretKeys;
  }
  if (operatorKind !== 'ExternalSecret') return 'all';
  if (arr(spec.dataFrom).length > 0 || Object.keys(rec(rec(spec.target).template)).length > 0) return 'all';
  const data = arr(spec.data);
  const keys = new Set<string>();
  for (const secretKey of secretKeys) {
    const entries = data.filter((d) => str(d.secretKey) === secretKey);
    if (entries.length === 0) return 'all';
    for (const entry of entries) {
      // A property is a gjson path: its first segment is the Vault key (an escaped `\.` is beyond this: every key).
      const property = str(rec(entry.remoteRef).property);
      if (property === undefined || property === '' || property.includes('\\')) return 'all';
      keys.add(property.split('.', 1)[0] as string);
    }
  }
  return keys.size === 0 ? 'all' : [...keys].sort();
}
