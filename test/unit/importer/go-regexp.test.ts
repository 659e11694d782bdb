/**
 * The matcher behind import's Reloader names and ClusterSecretStore namespaceRegexes: Go's answers (RE2 syntax,
 * MatchString = unanchored search) and Go's refusals. Its linear time on crafted patterns is a figure of
 * `npm run bench -- go-regexp` (go_regexp_crafted_doubling_ratio), not a timed test.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileGoRegexp, GO_REGEXP_LIMITS, type GoRegexp } from '../../../lib/importer/go-regexp.ts';

const compiled = (pattern: string): GoRegexp => {
  const re = compileGoRegexp(pattern);
  if ('error' in re) throw new Error(`${pattern}: ${re.error}`);
  return re;
};

describe('compileGoRegexp: Go semantics', () => {
  it.each([
    ['^a.*b$', 'axxb', true],
    ['^a.*b$', 'axxbc', false],
    ['ment', 'payments', true],
    ['^(a|b)+$', 'abba', true],
    ['^a{2,3}$', 'aaa', true],
    ['^a{2,3}$', 'aaaa', false],
    ['^a{2,}$', 'aaaaa', true],
    ['^[a-c-]+$', 'a-c', true],
    ['^[^a]$', 'b', true],
    ['^[]a]$', ']', true],
    ['^\\d+-\\w+$', '12-ab_c', true],
    ['^\\.$', 'x', false],
    ['^(?:ab){2}$', 'abab', true],
    ['^(?P<team>pay)ments$', 'payments', true],
    ['^a*?$', 'aaa', true],
    ['a{', 'a{', true],
    ['', 'anything', true],
    ['^$', '', true],
    ['^a|b$', 'ax', true],
    ['^a|b$', 'xa', false],
    ['.', '\n', false],
    ['(?i)^ABC$', 'abc', true],
    ['\\bword\\b', 'a word here', true],
    ['\\bword\\b', 'swordfish', false],
    ['^[[:alpha:]]+$', 'abc', true],
    ['^\\pL+$', 'émile', true],
    ['^\\Qa.b\\E$', 'a.b', true],
    ['^\\Qa.b\\E$', 'axb', false],
  ])('%j on %j → %s', (pattern, text, expected) => {
    expect(compiled(pattern).test(text)).toBe(expected);
  });

  it.each([
    ['a**', 'invalid nested repetition operator'],
    ['a*??', 'invalid nested repetition operator'],
    ['*a', 'missing argument to repetition operator'],
    ['a|+', 'missing argument to repetition operator'],
    ['(a', 'missing closing )'],
    ['a)', 'unexpected )'],
    ['[z-a]', 'invalid character class range'],
    ['a{1001}', 'invalid repeat count'],
    ['(?z)a', 'invalid or unsupported Perl syntax'],
    ['a'.repeat(GO_REGEXP_LIMITS.length + 1), 'longer than'],
    ['(a{1000}){1000}', 'invalid repeat count'],
  ])('%j is refused: %s', (pattern, reason) => {
    const re = compileGoRegexp(pattern);
    expect('error' in re && re.error).toContain(reason);
  });
});

describe('compileGoRegexp agrees with a backtracking matcher where that one is safe', () => {
  // Small patterns over a small alphabet and short texts: JavaScript's RegExp answers as Go does for this syntax
  // (no flags, `.` never meets a line break here) and is quick at this size.
  const atom = fc.oneof(fc.constantFrom('a', 'b', '-', '.', '[ab]', '[^a]', '\\d', '1'), fc.constant('(?:a|b-)'));
  const piece = fc.tuple(atom, fc.constantFrom('', '', '*', '+', '?', '{2}', '{1,2}', '*?')).map(([a, q]) => a + q);
  const branch = fc.array(piece, { minLength: 0, maxLength: 4 }).map((p) => p.join(''));
  const pattern = fc
    .tuple(
      fc.constantFrom('', '^'),
      fc.array(branch, { minLength: 1, maxLength: 3 }),
      fc.constantFrom('', '$'),
      fc.boolean(),
    )
    .map(([start, branches, end, group]) =>
      group ? `${start}(${branches.join('|')})+${end}` : `${start}${branches.join('|')}${end}`,
    );

  it('on random patterns and texts', () => {
    fc.assert(
      fc.property(pattern, fc.stringMatching(/^[ab1-]{0,8}$/), (source, text) => {
        expect(compiled(source).test(text)).toBe(new RegExp(source).test(text));
      }),
      { numRuns: 3000 },
    );
  });
});
