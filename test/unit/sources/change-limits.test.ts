/** Every change is bounded where it is built: a record whose fields exceed the bounds is rejected, naming the field. */
import { describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';
import { CHANGE_LIMITS } from '../../../lib/sources/secret-change.ts';

const entry = (over: { path?: string; id?: string; time?: string }) =>
  JSON.stringify({
    time: over.time ?? '2026-11-20T10:00:00Z',
    type: 'response',
    request: {
      id: over.id ?? 'r1',
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: over.path ?? 'secret/data/app/db',
    },
    response: { data: { version: 2 } },
  });

describe('change bounds', () => {
  it.each([
    ['key', { path: `secret/data/${'k'.repeat(CHANGE_LIMITS.key + 1)}` }],
    ['id', { id: 'i'.repeat(CHANGE_LIMITS.id + 1) }],
    ['time', { time: `2026-11-20T10:00:00${'0'.repeat(CHANGE_LIMITS.time)}Z` }],
  ])('rejects a record whose %s is too long, and the rest still goes through', (field, over) => {
    const out = parseInput(`${entry(over)}\n${entry({})}`, { mounts: new Map([['secret', 2]]) });
    expect(out.rejected).toEqual([
      {
        record: 'line 1',
        error: `the ${field} is longer than ${CHANGE_LIMITS[field as keyof typeof CHANGE_LIMITS]} characters`,
      },
    ]);
    expect(out.changes.map((c) => c.path)).toEqual(['secret/app/db']);
  });
});
