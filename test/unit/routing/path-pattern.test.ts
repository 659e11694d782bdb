import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePattern, matchSegment, PatternError, PatternIndex } from '../../../lib/routing/path-pattern.ts';

const matchOne = (pattern: string, path: string) => {
  const index = new PatternIndex();
  index.add(0, compilePattern(pattern));
  return index.match(path).get(0);
};

describe('path patterns', () => {
  it.each([
    // pattern, path, captures or null for no match
    ['secret/app/db', 'secret/app/db', {}],
    ['secret/app/db', 'secret/app/db2', null],
    ['secret/app/db', 'secret/app', null],
    ['secret/*/db', 'secret/app/db', {}],
    ['secret/*/db', 'secret/app/x/db', null],
    ['secret/app-*', 'secret/app-blue', {}],
    ['secret/app-*', 'secret/web-blue', null],
    ['secret/**', 'secret/a', {}],
    ['secret/**', 'secret/a/b/c', {}],
    ['secret/**/db', 'secret/db', {}],
    ['secret/**/db', 'secret/a/b/db', {}],
    ['secret/**/db', 'secret/a/b/dc', null],
    ['secret/payments/{service}/**', 'secret/payments/api/db', { service: 'api' }],
    ['secret/payments/{service}/**', 'secret/payments/api', { service: 'api' }],
    ['secret/{team}/{app}', 'secret/blue/api', { team: 'blue', app: 'api' }],
    ['secret/db-{env}', 'secret/db-prod', { env: 'prod' }],
    ['secret/db-{env}', 'secret/db-', null],
    ['secret/{a}.{b}', 'secret/x.y.z', { a: 'x', b: 'y.z' }],
    ['secret/a.b', 'secret/aXb', null],
    ['**', 'anything/at/all', {}],
  ])('%s ~ %s', (pattern, path, expected) => {
    expect(matchOne(pattern, path) ?? null).toEqual(expected);
  });

  it.each([
    ['secret//x', /empty segment/],
    ['secret/x/', /empty segment/],
    ['secret/a**', /whole segment/],
    ['secret/{x', /unclosed/],
    ['secret/x}', /unmatched/],
    ['secret/{1x}', /capture name/],
    ['secret/{x}/{x}', /twice/],
    ['secret/{x}-{x}', /twice/],
  ])('rejects %s', (pattern, message) => {
    expect(() => compilePattern(pattern)).toThrow(PatternError);
    expect(() => compilePattern(pattern)).toThrow(message);
  });

  it('returns every matching pattern once, in id order, whatever the insertion order', () => {
    const index = new PatternIndex();
    index.add(3, compilePattern('secret/**'));
    index.add(1, compilePattern('secret/{app}/db'));
    index.add(2, compilePattern('secret/*/db'));
    index.add(0, compilePattern('secret/api/db'));
    index.add(4, compilePattern('other/**'));
    expect([...index.match('secret/api/db')]).toEqual([
      [0, {}],
      [1, { app: 'api' }],
      [2, {}],
      [3, {}],
    ]);
  });

  it('treats regex characters in literals and wildcards literally', () => {
    expect(matchOne('secret/a+b*', 'secret/a+bc')).toEqual({});
    expect(matchOne('secret/a+b*', 'secret/aabc')).toBeUndefined();
  });
});

describe('path pattern bounds', () => {
  it.each([
    ['*a*a*a*a*a*a*a*b', /"\*a\*a\*a\*a\*a\*a\*a\*b" has 8 wildcards and captures; at most 4 per segment/],
    ['s/{a}{b}{c}{d}{e}', /has 5 wildcards and captures; at most 4 per segment/],
    [`s/${'x'.repeat(260)}`, /the pattern is 262 characters long; at most 256/],
    [Array.from({ length: 33 }, () => 'a').join('/'), /the pattern has 33 segments; at most 32/],
    ['**/a/**/b/**', /the pattern has 3 "\*\*" segments; at most 2/],
    ['{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}', /the pattern has 9 captures; at most 8/],
    ['*a*/*b*/*c*/*d*/*e*/*f*/*g*/*h*/*i*', /the pattern has 18 wildcards and captures; at most 16/],
  ])('rejects %s', (pattern, message) => {
    expect(() => compilePattern(pattern)).toThrow(PatternError);
    expect(() => compilePattern(pattern)).toThrow(message);
  });

  it('accepts a pattern at every bound', () => {
    expect(() => compilePattern('**/{a}-*-{b}-*/{c}/{d}/{e}/{f}/{g}/{h}/**')).not.toThrow();
  });

  it('matches the worst segments the bounds allow without backtracking', () => {
    // With a backtracking regex, `*a*a*a*b` against n letters "a" costs about n^4 steps: 10^16 here.
    const long = 'a'.repeat(10_000);
    expect(matchOne('s/*a*a*a*b', `s/${long}`)).toBeUndefined();
    expect(matchOne('s/*a*a*a*b', `s/${long}b`)).toEqual({});
    expect(matchOne('s/{x}a{y}a*b', `s/${long}b`)).toEqual({ x: 'a', y: 'a' });
  });
});

describe('the segment matcher agrees with the regex it replaced', () => {
  // The compiler before the linear matcher: `*` -> `[^/]*`, `{x}` -> `([^/]+?)`, literals escaped. Its captures
  // (leftmost, `*` longest first, captures shortest first) are the semantics the matcher keeps.
  const escapeRegex = (s: string): string => s.replace(/[.+?^$()|[\]\\]/g, '\\$&');
  function regexMatch(segment: string, text: string): string[] | undefined {
    let regex = '^';
    for (let i = 0; i < segment.length; i++) {
      const c = segment[i] ?? '';
      if (c === '*') regex += '[^/]*';
      else if (c === '{') {
        const close = segment.indexOf('}', i);
        regex += '([^/]+?)';
        i = close;
      } else regex += escapeRegex(c);
    }
    const m = new RegExp(`${regex}$`).exec(text);
    return m ? m.slice(1).map((v) => v ?? '') : undefined;
  }

  const token = fc.oneof(fc.constantFrom('*', '{x}'), fc.stringMatching(/^[ab.+-]{1,2}$/));
  const segmentPattern = fc
    .array(token, { minLength: 1, maxLength: 5 })
    .map((parts) => {
      let n = 0;
      // unique capture names; no `**` inside a segment
      return parts
        .map((p) => (p === '{x}' ? `{x${n++}}` : p))
        .join('')
        .replace(/\*\*+/g, '*');
    })
    .filter((s) => (s.match(/\*|\{/g) ?? []).length <= 4);

  it('on random small patterns and segments', () => {
    fc.assert(
      fc.property(segmentPattern, fc.stringMatching(/^[ab.+-]{1,10}$/), (pattern, text) => {
        const compiled = compilePattern(`m/${pattern}`);
        const segment = compiled.segments[1];
        if (segment?.kind !== 'wild') return;
        expect(matchSegment(segment.tokens, text)).toEqual(regexMatch(pattern, text));
        const expected = regexMatch(pattern, text);
        expect(matchOne(`m/${pattern}`, `m/${text}`)).toEqual(
          expected && Object.fromEntries(segment.captures.map((name, k) => [name, expected[k]])),
        );
      }),
      { numRuns: 3000 },
    );
  });
});

describe('"**" does not multiply the work by the ways to split a path', () => {
  /** One pattern, every split tried in the order the trie walk tries them (`**` taking fewest segments first), no memory. */
  function reference(
    pattern: ReturnType<typeof compilePattern>,
    path: readonly string[],
    k = 0,
    i = 0,
    captures: Record<string, string> = {},
  ): Record<string, string> | undefined {
    const segment = pattern.segments[k];
    if (!segment) return i === path.length ? captures : undefined;
    if (segment.kind === 'globstar') {
      for (let j = i; j <= path.length; j++) {
        const r = reference(pattern, path, k + 1, j, captures);
        if (r) return r;
      }
      return undefined;
    }
    const text = path[i];
    if (text === undefined) return undefined;
    if (segment.kind === 'literal')
      return segment.source === text ? reference(pattern, path, k + 1, i + 1, captures) : undefined;
    const values = matchSegment(segment.tokens, text);
    if (!values) return undefined;
    return reference(pattern, path, k + 1, i + 1, {
      ...captures,
      ...Object.fromEntries(segment.captures.map((name, n) => [name, values[n] ?? ''])),
    });
  }

  it('matches two "**" against a long path, with the captures of the first split', () => {
    const long = Array.from({ length: 20_000 }, () => 'a').join('/');
    expect(matchOne('**/a/**/b', long)).toBeUndefined();
    expect(matchOne('**/a/**/b', `${long}/b`)).toEqual({});
    expect(matchOne('**/{x}/**/b', `c/d/${long}/b`)).toEqual({ x: 'c' });
  });

  it('finds the same matches and captures as the walk without memory, on random paths', () => {
    const segment = fc.constantFrom('a', 'b', 'ab');
    const patternSegment = fc.constantFrom('a', 'b', '*', '**', '{x}', 'a*', '{y}b');
    fc.assert(
      fc.property(
        fc.array(fc.array(patternSegment, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 3 }),
        fc.array(segment, { minLength: 1, maxLength: 6 }),
        (patterns, path) => {
          const index = new PatternIndex();
          const expected = new Map<number, Record<string, string>>();
          patterns.forEach((parts, id) => {
            let pattern: ReturnType<typeof compilePattern>;
            try {
              pattern = compilePattern(parts.join('/'));
            } catch {
              return;
            }
            index.add(id, pattern);
            const m = reference(pattern, path);
            if (m) expected.set(id, m);
          });
          expect(index.match(path.join('/'))).toEqual(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
