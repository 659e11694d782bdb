/**
 * Route path patterns over `mount/key`: `*` matches within one segment, `**` (a whole segment) matches any
 * number of segments including none, `{name}` captures one segment or part of one. Patterns are compiled
 * into one segment trie per Vault namespace, so matching costs the depth of the path, not the number of
 * routes (10,000 routes must plan in microseconds per change).
 */

const CAPTURE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Bounds on a pattern. Patterns come from routing-table authors and, through the `vault-rollout.io/watch`
 * annotation, from anyone who may edit a workload; matching is linear in the segment for each token, but the
 * number of tokens, `**` and captures is what a hostile pattern would grow, so each is capped.
 */
export const PATTERN_LIMITS = {
  /** Characters in the whole pattern. */
  length: 256,
  segments: 32,
  /** `*` and `{x}` in one segment. */
  wildcardsPerSegment: 4,
  /** `*` and `{x}` in the whole pattern (`**` counted apart). */
  wildcards: 16,
  /** `**` segments in the whole pattern: each multiplies the ways a path can be split. */
  globstars: 2,
  captures: 8,
} as const;

/** One piece of a wild segment: literal text, `*` (any run, longest first) or `{name}` (non-empty, shortest first). */
export type SegmentToken = { type: 'text'; text: string } | { type: 'star' } | { type: 'capture'; name: string };

export interface PatternSegment {
  /** The segment as written. */
  source: string;
  kind: 'literal' | 'wild' | 'globstar';
  tokens: SegmentToken[];
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

/** Shared by every literal and `**` segment (most of them, in a big table): one allocation fewer each. */
const NONE: never[] = Object.freeze([]) as unknown as never[];

function compileSegment(source: string): PatternSegment {
  if (source === '') throw new PatternError('empty segment (leading, trailing or double "/")');
  if (source === '**') return { source, kind: 'globstar', tokens: NONE, captures: NONE };
  if (source.includes('**')) throw new PatternError(`"**" must be a whole segment, found "${source}"`);
  if (!source.includes('*') && !source.includes('{') && !source.includes('}'))
    return { source, kind: 'literal', tokens: NONE, captures: NONE };
  const captures: string[] = [];
  const tokens: SegmentToken[] = [];
  let text = '';
  const flush = () => {
    if (text !== '') tokens.push({ type: 'text', text });
    text = '';
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i] ?? '';
    if (c === '*') {
      flush();
      tokens.push({ type: 'star' });
    } else if (c === '{') {
      const close = source.indexOf('}', i);
      if (close < 0) throw new PatternError(`unclosed "{" in "${source}"`);
      const name = source.slice(i + 1, close);
      if (!CAPTURE_NAME.test(name))
        throw new PatternError(`capture name "${name}" must be a letter or _ followed by letters, digits or _`);
      if (captures.includes(name)) throw new PatternError(`capture {${name}} appears twice`);
      captures.push(name);
      flush();
      tokens.push({ type: 'capture', name });
      i = close;
    } else if (c === '}') throw new PatternError(`unmatched "}" in "${source}"`);
    else text += c;
  }
  flush();
  const wild = tokens.length - tokens.filter((t) => t.type === 'text').length;
  if (wild > PATTERN_LIMITS.wildcardsPerSegment) {
    throw new PatternError(
      `"${source}" has ${wild} wildcards and captures; at most ${PATTERN_LIMITS.wildcardsPerSegment} per segment`,
    );
  }
  return { source, kind: 'wild', tokens, captures };
}

export function compilePattern(source: string): CompiledPattern {
  if (source.length > PATTERN_LIMITS.length)
    throw new PatternError(`the pattern is ${source.length} characters long; at most ${PATTERN_LIMITS.length}`);
  const parts = source.split('/');
  if (parts.length > PATTERN_LIMITS.segments)
    throw new PatternError(`the pattern has ${parts.length} segments; at most ${PATTERN_LIMITS.segments}`);
  const segments = parts.map(compileSegment);
  // One pass, no arrays, for the common case of a pattern without wildcards (a big table has thousands).
  let wildcards = 0;
  let globstars = 0;
  let capturing = false;
  for (const segment of segments) {
    if (segment.kind === 'globstar') globstars++;
    if (segment.captures.length > 0) capturing = true;
    for (const token of segment.tokens) if (token.type !== 'text') wildcards++;
  }
  const captures = capturing ? segments.flatMap((s) => s.captures) : NONE;
  if (capturing) {
    const seen = new Set<string>();
    for (const name of captures) {
      if (seen.has(name)) throw new PatternError(`capture {${name}} appears twice`);
      seen.add(name);
    }
  }
  if (captures.length > PATTERN_LIMITS.captures)
    throw new PatternError(`the pattern has ${captures.length} captures; at most ${PATTERN_LIMITS.captures}`);
  if (wildcards > PATTERN_LIMITS.wildcards)
    throw new PatternError(`the pattern has ${wildcards} wildcards and captures; at most ${PATTERN_LIMITS.wildcards}`);
  if (globstars > PATTERN_LIMITS.globstars)
    throw new PatternError(`the pattern has ${globstars} "**" segments; at most ${PATTERN_LIMITS.globstars}`);
  return { source, segments, captures };
}

/**
 * Matches one wild segment against one path segment without backtracking, in O(tokens × segment length) time:
 * first, from the last token back, which positions each token can start at and still let the rest match; then one
 * forward pass choosing, token by token, the first feasible choice in the order a backtracking regex would try them
 * (`*` longest first, `{x}` shortest first). That is the match a regex `^…[^/]*…([^/]+?)…$` finds, so captures
 * are unchanged; only the time is, from exponential in the number of wildcards to linear per token.
 * Returns the captured values in token order, or undefined when the segment does not match.
 */
export function matchSegment(
  tokens: readonly SegmentToken[],
  text: string,
  one: OneWildcard | undefined = oneWildcard(tokens),
): string[] | undefined {
  if (one !== undefined) {
    // `prefix * suffix` or `prefix {x} suffix`: the regex has one way to match, so no table is needed.
    const { prefix, wildcard, suffix } = one;
    const end = text.length - suffix.length;
    if (
      end - prefix.length < (wildcard.type === 'capture' ? 1 : 0) ||
      !text.startsWith(prefix) ||
      !text.endsWith(suffix)
    )
      return undefined;
    return wildcard.type === 'capture' ? [text.slice(prefix.length, end)] : [];
  }
  const n = text.length;
  // can[k][p]: tokens k.. match text[p..n] exactly.
  const can: Uint8Array[] = Array.from({ length: tokens.length + 1 }, () => new Uint8Array(n + 2));
  (can[tokens.length] as Uint8Array)[n] = 1;
  for (let k = tokens.length - 1; k >= 0; k--) {
    const token = tokens[k] as SegmentToken;
    const here = can[k] as Uint8Array;
    const next = can[k + 1] as Uint8Array;
    if (token.type === 'text') {
      const len = token.text.length;
      for (let p = 0; p + len <= n; p++) here[p] = next[p + len] === 1 && text.startsWith(token.text, p) ? 1 : 0;
    } else if (token.type === 'star') {
      for (let p = n; p >= 0; p--) here[p] = next[p] === 1 || here[p + 1] === 1 ? 1 : 0;
    } else {
      // Non-empty: some q > p with next[q]; `later` is "some q >= p + 1".
      let later = 0;
      for (let p = n - 1; p >= 0; p--) {
        if (next[p + 1] === 1) later = 1;
        here[p] = later;
      }
    }
  }
  if (can[0]?.[0] !== 1) return undefined;
  const values: string[] = [];
  let p = 0;
  for (let k = 0; k < tokens.length; k++) {
    const token = tokens[k] as SegmentToken;
    const next = can[k + 1] as Uint8Array;
    if (token.type === 'text') p += token.text.length;
    else if (token.type === 'star') {
      let q = n;
      while (next[q] !== 1) q--;
      p = q;
    } else {
      let q = p + 1;
      while (next[q] !== 1) q++;
      values.push(text.slice(p, q));
      p = q;
    }
  }
  return values;
}

/** The shape of most wild segments (`svc-{app}`, `*`, `{app}.tls`): one wildcard between optional literal text. */
interface OneWildcard {
  prefix: string;
  wildcard: Exclude<SegmentToken, { type: 'text' }>;
  suffix: string;
}

function oneWildcard(tokens: readonly SegmentToken[]): OneWildcard | undefined {
  if (tokens.length > 3) return undefined;
  let prefix = '';
  let suffix = '';
  let wildcard: Exclude<SegmentToken, { type: 'text' }> | undefined;
  for (const token of tokens) {
    if (token.type !== 'text') {
      if (wildcard) return undefined;
      wildcard = token;
    } else if (wildcard) suffix = token.text;
    else prefix = token.text;
  }
  return wildcard && { prefix, wildcard, suffix };
}

export type Captures = Readonly<Record<string, string>>;

/** Shared by every match without captures; never written (a capture copies it first). */
const NO_CAPTURES: Captures = Object.freeze({});

/** Maps and lists are made on first use: most nodes of a big table have one child, or none and one end. */
interface TrieNode {
  literal: Map<string, TrieNode> | undefined;
  /** Each wild segment with its one-wildcard shape, found once here rather than at every match. */
  wild: Map<string, { segment: PatternSegment; one: OneWildcard | undefined; node: TrieNode }> | undefined;
  globstar: TrieNode | undefined;
  /** Ids of the patterns that end here, in insertion order. */
  ends: number[] | undefined;
}

const newNode = (): TrieNode => ({ literal: undefined, wild: undefined, globstar: undefined, ends: undefined });

/** A set of patterns, each with an id; `match` returns the ids that match with their captures, in id order. */
export class PatternIndex {
  readonly #root = newNode();

  add(id: number, pattern: CompiledPattern): void {
    let node = this.#root;
    for (const segment of pattern.segments) {
      if (segment.kind === 'literal') {
        const literal = (node.literal ??= new Map());
        let next = literal.get(segment.source);
        if (!next) literal.set(segment.source, (next = newNode()));
        node = next;
      } else if (segment.kind === 'globstar') {
        node = node.globstar ??= newNode();
      } else {
        const wild = (node.wild ??= new Map());
        let entry = wild.get(segment.source);
        if (!entry) wild.set(segment.source, (entry = { segment, one: oneWildcard(segment.tokens), node: newNode() }));
        node = entry.node;
      }
    }
    (node.ends ??= []).push(id);
  }

  match(path: string): Map<number, Captures> {
    const found = new Map<number, Captures>();
    walk(this.#root, path.split('/'), 0, NO_CAPTURES, { found, entered: undefined });
    // Nearly every path matches one pattern or none: already in id order.
    return found.size < 2 ? found : new Map([...found].sort((a, b) => a[0] - b[0]));
  }
}

/**
 * Depth-first over the trie, in the order that decides which captures a pattern reports. Each `**` node is entered at
 * each segment index once: which patterns end below it does not depend on the captures that led there, and the first
 * visit already recorded them, so a second visit (another split of the path by an earlier `**`) could add nothing.
 * Below a `**` node each node sits at a fixed distance from it, so every (node, index) is walked at most once, and
 * `**` cannot multiply the work by the number of ways to split the path.
 */
/**
 * One match's state, shared by the whole walk; `entered` is made at the first `**` node reached (most paths meet none).
 */
interface Walk {
  found: Map<number, Captures>;
  entered: Map<TrieNode, Set<number>> | undefined;
}

function walk(start: TrieNode, segments: readonly string[], from: number, captures: Captures, state: Walk): void {
  let node = start;
  let i = from;
  // A run of nodes with literal children only (most of a big table) has one way down: follow it without recursing.
  while (i < segments.length && node.wild === undefined && node.globstar === undefined) {
    const next = node.literal?.get(segments[i] as string);
    if (!next) return;
    node = next;
    i++;
  }
  if (i === segments.length) {
    const { found } = state;
    if (node.ends) for (const id of node.ends) if (!found.has(id)) found.set(id, captures);
  } else {
    const segment = segments[i] ?? '';
    const literal = node.literal?.get(segment);
    if (literal) walk(literal, segments, i + 1, captures, state);
    if (node.wild)
      for (const { segment: pattern, one, node: next } of node.wild.values()) {
        const values = matchSegment(pattern.tokens, segment, one);
        if (!values) continue;
        let more = captures;
        if (pattern.captures.length > 0) {
          more = { ...captures };
          pattern.captures.forEach((name, k) => ((more as Record<string, string>)[name] = values[k] ?? ''));
        }
        walk(next, segments, i + 1, more, state);
      }
  }
  // `**` takes none or more of the remaining segments. Its node is entered only from here, and each loop runs to
  // the end, so once one index was entered every later one was too.
  const globstar = node.globstar;
  if (globstar) {
    const entered = (state.entered ??= new Map());
    let at = entered.get(globstar);
    if (!at) entered.set(globstar, (at = new Set()));
    for (let j = i; j <= segments.length && !at.has(j); j++) {
      at.add(j);
      walk(globstar, segments, j, captures, state);
    }
  }
}
