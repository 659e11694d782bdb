import { describe, expect, it } from 'vitest';
import { compilePattern, PatternError, PatternIndex } from '../../../lib/routing/path-pattern.ts';

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
