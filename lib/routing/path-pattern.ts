/**
 * Route path patterns over `mount/key`: `*` matches within one segment, `**` (a whole segment) matches any
 * number of segments including none, `{name}` captures one segment or part of one. Patterns are compiled
 * into one segment trie per Vault namespace, so matching costs the depth of the path, not the number of
 * routes (10,000 routes must plan in microseconds per change).
 */

const CAPTURE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface PatternSegment {
  /** The segment as written. */
  source: string;
  kind: 'literal' | 'wild' | 'globstar';
  regex?: RegExp;
  captures: string[];
}

export interface CompiledPattern {
  source: string;
  segments: PatternSegment[];
  captures: string[];
}

export class PatternError extends Error {
  override readonly name = 'PatternError';
}

const escapeRegex = (s: string): string => s.replace(/[.+?^$()|[\]\\]/g, '\\$&');

function compileSegment(source: string): PatternSegment {
  if (source === '') throw new PatternError('empty segment (leading, trailing or double "/")');
  if (source === '**') return { source, kind: 'globstar', captures: [] };
  if (source.includes('**')) throw new PatternError(`"**" must be a whole segment, found "${source}"`);
  if (!source.includes('*') && !source.includes('{') && !source.includes('}')) return { source, kind: 'literal', captures: [] };
  const captures: string[] = [];
  let regex = '^';
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '*') regex += '[^/]*';
    else if (c === '{') {
      const close = source.indexOf('}', i);
      if (close < 0) throw new PatternError(`unclosed "{" in "${source}"`);
      const name = source.slice(i + 1, close);
      if (!CAPTURE_NAME.test(name)) throw new PatternError(`capture name "${name}" must be a letter or _ followed by letters, digits or _`);
      if (captures.includes(name)) throw new PatternError(`capture {${name}} appears twice`);
      captures.push(name);
      regex += '([^/]+?)';
      i = close;
    } else if (c === '}') throw new PatternError(`unmatched "}" in "${source}"`);
    else regex += escapeRegex(c ?? '');
  }
  return { source, kind: 'wild', regex: new RegExp(`${regex}$`), captures };
}

export function compilePattern(source: string): CompiledPattern {
  const segments = source.split('/').map(compileSegment);
  const captures = segments.flatMap((s) => s.captures);
  const seen = new Set<string>();
  for (const name of captures) {
    if (seen.has(name)) throw new PatternError(`capture {${name}} appears twice`);
    seen.add(name);
  }
  return { source, segments, captures };
}

export type Captures = Readonly<Record<string, string>>;

interface TrieNode {
  literal: Map<string, TrieNode>;
  wild: Map<string, { segment: PatternSegment; node: TrieNode }>;
  globstar: TrieNode | undefined;
  /** Ids of the patterns that end here, in insertion order. */
  ends: number[];
}

const newNode = (): TrieNode => ({ literal: new Map(), wild: new Map(), globstar: undefined, ends: [] });

/** A set of patterns, each with an id; `match` returns the ids that match with their captures, in id order. */
export class PatternIndex {
  readonly #root = newNode();

  add(id: number, pattern: CompiledPattern): void {
    let node = this.#root;
    for (const segment of pattern.segments) {
      if (segment.kind === 'literal') {
        let next = node.literal.get(segment.source);
        if (!next) node.literal.set(segment.source, (next = newNode()));
        node = next;
      } else if (segment.kind === 'globstar') {
        node = node.globstar ??= newNode();
      } else {
        let entry = node.wild.get(segment.source);
        if (!entry) node.wild.set(segment.source, (entry = { segment, node: newNode() }));
        node = entry.node;
      }
    }
    node.ends.push(id);
  }

  match(path: string): Map<number, Captures> {
    const found = new Map<number, Captures>();
    walk(this.#root, path.split('/'), 0, {}, found);
    return new Map([...found].sort((a, b) => a[0] - b[0]));
  }
}

function walk(node: TrieNode, segments: readonly string[], i: number, captures: Captures, found: Map<number, Captures>): void {
  if (i === segments.length) {
    for (const id of node.ends) if (!found.has(id)) found.set(id, captures);
  } else {
    const segment = segments[i] ?? '';
    const literal = node.literal.get(segment);
    if (literal) walk(literal, segments, i + 1, captures, found);
    for (const { segment: pattern, node: next } of node.wild.values()) {
      const m = pattern.regex?.exec(segment);
      if (!m) continue;
      let more = captures;
      if (pattern.captures.length > 0) {
        more = { ...captures };
        pattern.captures.forEach((name, k) => ((more as Record<string, string>)[name] = m[k + 1] ?? ''));
      }
      walk(next, segments, i + 1, more, found);
    }
  }
  // `**` takes none or more of the remaining segments.
  if (node.globstar) for (let j = i; j <= segments.length; j++) walk(node.globstar, segments, j, captures, found);
}
