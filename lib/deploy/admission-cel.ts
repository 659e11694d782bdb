/**
 * The CEL the admission policy (lib/deploy/admission-policy.ts) is written in: string and list literals, regexes
 * for namespace globs and patch-template keys, and the comparison of two objects except at the fields a restart
 * writes (a FieldTree).
 */

/**
 * Where a restart may write: a key maps to `true` (anything at or under it) or to the keys below it that may change.
 */
export interface FieldTree {
  [key: string]: FieldTree | true;
}

/** A CEL string literal (CEL's escapes are a superset of JSON's). */
export const celString = (s: string): string => JSON.stringify(s);
export const celList = (items: readonly string[]): string => `[${items.map(celString).join(', ')}]`;

const PLACEHOLDER = /\{[A-Za-z_][A-Za-z0-9_]*\}/;
const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A patch-template key with `{captures}` is a pattern: its rendered value may be any text. */
const keyPattern = (key: string): string =>
  `^${key.split(new RegExp(PLACEHOLDER.source, 'g')).map(escapeRegex).join('.*')}$`;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** CEL for the map under `key` of map `m`, or an empty map when there is none (optional field selection). */
const below = (m: string, key: string): string => {
  const base = m.endsWith('.orValue({})') ? m.slice(0, -'.orValue({})'.length) : m;
  return `${base}${IDENTIFIER.test(key) ? `.?${key}` : `[?${celString(key)}]`}.orValue({})`;
};

/**
 * CEL that holds when maps `a` and `b` are equal except at the keys of `tree` (recursively). `bind` may turn the
 * map below a key into a policy variable, so that it is computed once instead of once per key compared. Keys that are
 * absent
 * on one side compare as absent; a missing map below a tree key compares as an empty map.
 */
export function sameExcept(
  a: string,
  b: string,
  tree: FieldTree,
  bind: (expression: string) => string = (e) => e,
): string {
  const literal = Object.keys(tree)
    .filter((k) => !PLACEHOLDER.test(k))
    .sort();
  const patterns = Object.keys(tree)
    .filter((k) => PLACEHOLDER.test(k))
    .sort();
  const exempt = [
    ...(literal.length > 0 ? [`k in ${celList(literal)}`] : []),
    ...patterns.map((p) => `k.matches(${celString(keyPattern(p))})`),
  ];
  const skip = exempt.length > 0 ? `${exempt.join(' || ')} || ` : '';
  const clauses = [`${a}.all(k, ${skip}(k in ${b} && ${a}[k] == ${b}[k]))`, `${b}.all(k, ${skip}k in ${a})`];
  for (const key of literal) {
    const sub = tree[key];
    if (sub === true || sub === undefined) continue;
    clauses.push(sameExcept(bind(below(a, key)), bind(below(b, key)), sub, bind));
  }
  return clauses.join(' &&\n');
}

/** Human-readable paths of a tree's leaves, e.g. `spec.template.metadata.annotations["vault-rollout.io/versions"]`. */
export function fieldPaths(tree: FieldTree, prefix = ''): string[] {
  return Object.entries(tree)
    .sort(([x], [y]) => x.localeCompare(y))
    .flatMap(([key, sub]) => {
      const path = IDENTIFIER.test(key) ? `${prefix}${prefix ? '.' : ''}${key}` : `${prefix}[${celString(key)}]`;
      return sub === true ? [path] : fieldPaths(sub, path);
    });
}

/**
 * An anchored RE2 (CEL `matches`) regex for a namespace glob: `*` is any run of characters, everything else literal.
 */
export const globRegex = (glob: string): string => `^${glob.split('*').map(escapeRegex).join('.*')}$`;
