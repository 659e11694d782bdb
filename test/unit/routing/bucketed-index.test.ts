import { describe, expect, it } from 'vitest';
import { BucketedPatternIndex, bucketOf } from '../../../lib/routing/bucketed-index.ts';
import { compilePattern, PatternIndex } from '../../../lib/routing/path-pattern.ts';

// Every shape a pattern's first two segments can take: literal, wild, capture, `**`, and patterns of one segment.
const PATTERNS = [
  'secret/team-a/app/db',
  'secret/team-a/**',
  'secret/team-b/{app}/db',
  'secret/*/tls',
  'secret/{team}/{app}',
  'secret/**',
  'secret/**/db',
  'secret',
  '**',
  '**/db',
  '**/team-a/db',
  'sec*/team-a/db',
  '{mount}/team-a/**',
  '{mount}/{team}/db',
  'kv/team-a/app',
  'kv/svc-{app}',
];

const PATHS = [
  'secret/team-a/app/db',
  'secret/team-a/db',
  'secret/team-b/api/db',
  'secret/team-c/tls',
  'secret/team-c/x',
  'secret',
  'secret/db',
  'kv/team-a/app',
  'kv/svc-web',
  'kv/team-a/db',
  'other/team-a/db',
  'secrets/team-a/db',
  'db',
];

describe('BucketedPatternIndex', () => {
  const eager = new PatternIndex();
  const lazy = new BucketedPatternIndex();
  PATTERNS.forEach((source, id) => {
    eager.add(id, compilePattern(source));
    lazy.add(source, { id, pattern: compilePattern(source) });
  });

  it.each(PATHS)('matches %s as the index built up front does (ids, order and captures)', (path) => {
    expect([...lazy.match(path)]).toEqual([...eager.match(path)]);
  });

  it('compiles a bucket only when a path could match one of its patterns', () => {
    const compiled: string[] = [];
    const index = new BucketedPatternIndex();
    PATTERNS.forEach((source, id) =>
      index.add(source, {
        id,
        get pattern() {
          compiled.push(source);
          return compilePattern(source);
        },
      }),
    );
    index.match('kv/team-a/app');
    // Its own bucket (kv, team-a), kv's with any second segment, and those whose first segment is not literal.
    expect(compiled.sort()).toEqual(
      [
        'kv/team-a/app',
        'kv/svc-{app}',
        '**',
        '**/db',
        '**/team-a/db',
        'sec*/team-a/db',
        '{mount}/team-a/**',
        '{mount}/{team}/db',
      ].sort(),
    );
    index.match('kv/team-a/app');
    expect(compiled).toHaveLength(8);
  });

  it.each([
    ['secret/team-a/**', ['secret', 'team-a']],
    ['secret/{team}/db', ['secret', '*']],
    ['secret', ['secret', '*']],
    ['**/team-a', ['*', '*']],
    ['{mount}/team-a', ['*', 'team-a']],
  ])('puts %s in bucket %j', (source, bucket) => {
    expect(bucketOf(source)).toEqual(bucket);
  });
});
