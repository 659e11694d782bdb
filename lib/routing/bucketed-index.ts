/**
 * The route index of a table loaded at a cold start (the compiled table, lib/routing/compiled-table.ts): patterns
 * are put in buckets by their first two segments, as written, and a bucket is compiled into the trie the first time
 * a path could match one of its patterns. A function that sees a few paths compiles the routes of those paths, not
 * all 10,000 of a big table; the trie and its matching are the same as PatternIndex's once a bucket is in.
 */
import { PatternIndex, type Captures, type CompiledPattern } from './path-pattern.ts';

/** What matching needs of an index: the ids of the patterns a path matches, with their captures, in id order. */
export interface RouteIndex {
  match(path: string): Map<number, Captures>;
}

/** Any segment, in a bucket key: the pattern's segment is not literal, so it may match any path segment. */
const ANY = '*';
const isLiteral = (segment: string): boolean =>
  segment.indexOf('*') < 0 && segment.indexOf('{') < 0 && segment.indexOf('}') < 0;

/**
 * A pattern's bucket: its first segment if literal, and its second if literal and the first is not `**` (a `**` may
 * take any number of path segments, so what follows it is at no fixed place). Every path a pattern matches has the
 * bucket's literal segments in the same places, so a path looks only in the four buckets its own two segments name.
 */
export function bucketOf(source: string): [string, string] {
  const first = firstSegment(source, undefined);
  return [isLiteral(first) ? first : ANY, secondKey(source, first)];
}

/** The first segment; `previous` when it is the same (routes in a row mostly share their mount: no new string). */
function firstSegment(source: string, previous: string | undefined): string {
  const slash = source.indexOf('/');
  if (previous !== undefined && slash === previous.length && source.startsWith(previous)) return previous;
  return slash < 0 ? source : source.slice(0, slash);
}

/** The bucket's second key, for a pattern whose first segment is `first`. */
function secondKey(source: string, first: string): string {
  if (first === '**' || source.length === first.length) return ANY;
  const end = source.indexOf('/', first.length + 1);
  const second = end < 0 ? source.slice(first.length + 1) : source.slice(first.length + 1, end);
  return isLiteral(second) ? second : ANY;
}

/** What the index takes of a route: its id and its pattern, compiled when first read. */
export interface PatternSource {
  readonly id: number;
  readonly pattern: CompiledPattern;
}

export class BucketedPatternIndex implements RouteIndex {
  readonly #index = new PatternIndex();
  /** By the bucket's first key, then its second: a lone route as itself, more in a list (most buckets hold one). */
  readonly #waiting = new Map<string, Map<string, PatternSource | PatternSource[]>>();
  #lastFirst: string | undefined;

  /** Adds a route by its pattern's source (its bucket); its `pattern` is read when its bucket is first needed. */
  add(source: string, route: PatternSource): void {
    const first = firstSegment(source, this.#lastFirst);
    this.#lastFirst = first;
    const k0 = isLiteral(first) ? first : ANY;
    const k1 = secondKey(source, first);
    let inner = this.#waiting.get(k0);
    if (!inner) this.#waiting.set(k0, (inner = new Map()));
    const held = inner.get(k1);
    if (held === undefined) inner.set(k1, route);
    else if (Array.isArray(held)) held.push(route);
    else inner.set(k1, [held, route]);
  }

  match(path: string): Map<number, Captures> {
    if (this.#waiting.size > 0) {
      const [first = '', second = ''] = path.split('/', 2);
      for (const k0 of [first, ANY]) {
        const inner = this.#waiting.get(k0);
        if (!inner) continue;
        for (const k1 of [second, ANY]) {
          const held = inner.get(k1);
          if (held === undefined) continue;
          inner.delete(k1);
          for (const route of Array.isArray(held) ? held : [held]) this.#index.add(route.id, route.pattern);
        }
        if (inner.size === 0) this.#waiting.delete(k0);
      }
    }
    return this.#index.match(path);
  }
}
