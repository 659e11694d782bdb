/**
 * Which keys a consumer uses, from its pod template and the operator's resource alone — never the Secret.
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
  const sources = arr(spec.volumes).flatMap((v) => [
    ...(str(rec(v.secret).secretName) === secretName ? [rec(v.secret)] : []),
    ...arr(rec(v.projected).sources)
      .map((s) => rec(s.secret))
      .filter((s) => str(s.name) === secretName),
  ]);
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

const AGENT = 'vault.hashicorp.com/';
/** `.Data.data.<key>` or `index .Data.data "<key>"`: what a KV v2 template reads of one key. */
const DATA_KEY = /\.Data\.data\.([A-Za-z0-9_]+)(?![A-Za-z0-9_.-])|index\s+\.Data\.data\s+"([^"\\]+)"/g;

/**
 * The Vault keys the Vault Agent injector renders from `path` (`mount/key`, KV v2) into a pod, from its pod template's
 * annotations. A template may read any secret (`with secret "…"`), so the keys are those every template of the pod
 * reads (`.Data.data.<key>`, `index .Data.data "<key>"`): a superset of what it reads of `path`. An
 * `agent-inject-secret-<name>` naming the path without a template (the whole secret is rendered), a template file, a
 * template that reads `.Data` any other way (a range, `toJSON`), or a Vault namespace annotation: every key.
 * Undefined when neither an annotation nor a template names the path.
 */
export function agentTemplateKeys(annotations: Readonly<Record<string, string>>, path: string): UsedKeys | undefined {
  const secretAnnotations = Object.entries(annotations).filter(([k]) => k.startsWith(`${AGENT}agent-inject-secret-`));
  const templates = Object.entries(annotations).filter(([k]) => k.startsWith(`${AGENT}agent-inject-template-`));
  const names = (value: string): boolean => {
    const segments = value
      .trim()
      .replace(/^\/+|\/+$/g, '')
      .split('/');
    return (
      segments.join('/') === path ||
      segments.some((s, i) => s === 'data' && [...segments.slice(0, i), ...segments.slice(i + 1)].join('/') === path)
    );
  };
  const quoted = [
    ...templates
      .map(([, t]) => t)
      .join('\n')
      .matchAll(/secret\s+"([^"]*)"/g),
  ].map((m) => m[1] as string);
  const named = secretAnnotations.filter(([, v]) => names(v));
  if (named.length === 0 && !quoted.some(names)) return undefined;
  if (
    annotations[`${AGENT}namespace`] !== undefined ||
    templates.some(([k]) => k.startsWith(`${AGENT}agent-inject-template-file-`))
  )
    return 'all';
  for (const [annotation] of named)
    if (annotations[annotation.replace('agent-inject-secret-', 'agent-inject-template-')] === undefined) return 'all';
  const keys = new Set<string>();
  for (const [, template] of templates) {
    let rest = template;
    for (const m of template.matchAll(DATA_KEY)) {
      keys.add((m[1] ?? m[2]) as string);
      rest = rest.replace(m[0], '');
    }
    // Any other use of a secret's data may read every key.
    if (rest.includes('.Data')) return 'all';
  }
  return keys.size === 0 ? 'all' : [...keys].sort();
}
