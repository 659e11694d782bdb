import { describe, expect, it } from 'vitest';
import {
  ANNOTATIONS,
  decideRestart,
  mergeRecordedVersions,
  parseRecordedVersions,
  parseWatchAnnotation,
  readRecord,
  recordOnlyPatch,
  restartAnnotations,
  watchPatterns,
} from '../../../lib/plan/restart-record.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import type { SecretRef } from '../../../lib/plan/planner.ts';

const secret = (path: string, version: number | null, time = '2026-11-20T10:00:00Z'): SecretRef => ({
  path,
  operation: 'write',
  version,
  id: 'id',
  time,
});

describe('decideRestart: versions only move forward', () => {
  it.each([
    ['nothing recorded', {}, [secret('s/a', 3)], { action: 'restart', versions: { 's/a': 3 } }],
    ['a newer version', { 's/a': 2 }, [secret('s/a', 3)], { action: 'restart', versions: { 's/a': 3 } }],
    ['the same version (a replay)', { 's/a': 3 }, [secret('s/a', 3)], { action: 'unchanged', versions: { 's/a': 3 } }],
    ['an older version', { 's/a': 4 }, [secret('s/a', 3)], { action: 'skip' }],
    [
      'one newer among others recorded',
      { 's/a': 4, 's/b': 1 },
      [secret('s/a', 4), secret('s/b', 2)],
      { action: 'restart', versions: { 's/a': 4, 's/b': 2 } },
    ],
    [
      'one newer, one older',
      { 's/a': 5, 's/b': 1 },
      [secret('s/a', 4), secret('s/b', 2)],
      { action: 'restart', versions: { 's/a': 5, 's/b': 2 } },
    ],
    ['same and older', { 's/a': 5, 's/b': 2 }, [secret('s/a', 4), secret('s/b', 2)], { action: 'skip' }],
    [
      'keeps records of other secrets',
      { 's/z': 9 },
      [secret('s/a', 1)],
      { action: 'restart', versions: { 's/a': 1, 's/z': 9 } },
    ],
    [
      'a versionless change, first time',
      {},
      [secret('kv1/a', null, 't1')],
      { action: 'restart', versions: { 'kv1/a': 't1#id' } },
    ],
    ['a versionless change, replayed', { 'kv1/a': 't1#id' }, [secret('kv1/a', null, 't1')], { action: 'unchanged' }],
    [
      'a later versionless change',
      { 'kv1/a': 't1' },
      [secret('kv1/a', null, 't2')],
      { action: 'restart', versions: { 'kv1/a': 't2#id' } },
    ],
    ['an earlier versionless change', { 'kv1/a': 't2' }, [secret('kv1/a', null, 't1')], { action: 'skip' }],
    [
      'a version after a versionless record',
      { 's/a': 't1' },
      [secret('s/a', 1)],
      { action: 'restart', versions: { 's/a': 1 } },
    ],
    [
      'a versionless write after a version (another feed)',
      { 's/a': 1 },
      [secret('s/a', null, 't1')],
      { action: 'restart', versions: { 's/a': 't1#id' } },
    ],
    [
      'a delete after the write of the same version (recorded by its time: the same version is deleted again after an undelete)',
      { 's/a': 3 },
      [{ ...secret('s/a', 3), operation: 'delete' }],
      { action: 'restart', versions: { 's/a': 3, 's/a#delete': '2026-11-20T10:00:00Z#id' } },
    ],
    [
      'an undelete after a delete: both stay recorded',
      { 's/a': 3, 's/a#delete': '2026-11-20T10:00:01Z#d1' },
      [{ ...secret('s/a', 3, '2026-11-20T10:00:02Z'), id: 'u1', operation: 'undelete' }],
      {
        action: 'restart',
        versions: { 's/a': 3, 's/a#delete': '2026-11-20T10:00:01Z#d1', 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      },
    ],
    [
      'the delete replayed after the undelete that undid it (a continuation, a redelivery)',
      { 's/a': 3, 's/a#delete': '2026-11-20T10:00:01Z#d1', 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      [{ ...secret('s/a', 3, '2026-11-20T10:00:01Z'), id: 'd1', operation: 'delete' }],
      { action: 'skip' },
    ],
    [
      'a delete first seen after a later undelete (out of order)',
      { 's/a': 3, 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      [{ ...secret('s/a', null, '2026-11-20T10:00:01Z'), id: 'd1', operation: 'delete' }],
      { action: 'skip' },
    ],
    [
      'the undelete replayed after the next delete',
      { 's/a#delete': '2026-11-20T10:00:03Z#d2', 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      [{ ...secret('s/a', 3, '2026-11-20T10:00:02Z'), id: 'u1', operation: 'undelete' }],
      { action: 'skip' },
    ],
    [
      'a new delete after the undelete',
      { 's/a#delete': '2026-11-20T10:00:01Z#d1', 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      [{ ...secret('s/a', 3, '2026-11-20T10:00:03Z'), id: 'd2', operation: 'delete' }],
      {
        action: 'restart',
        versions: { 's/a#delete': '2026-11-20T10:00:03Z#d2', 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      },
    ],
    [
      'a delete and an undelete at the same time cannot be ordered: both restart',
      { 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
      [{ ...secret('s/a', 3, '2026-11-20T10:00:02Z'), id: 'd1', operation: 'delete' }],
      { action: 'restart' },
    ],
    [
      'a versionless delete after writes',
      { 's/a': 3 },
      [{ ...secret('s/a', null, 't9'), operation: 'delete' }],
      { action: 'restart', versions: { 's/a': 3, 's/a#delete': 't9#id' } },
    ],
    [
      'the same delete again',
      { 's/a': 3, 's/a#delete': 't9#id' },
      [{ ...secret('s/a', null, 't9'), operation: 'delete' }],
      { action: 'unchanged' },
    ],
    [
      'a record written before ids were (the time alone) is the change of that time',
      { 's/a#delete': 't9' },
      [{ ...secret('s/a', null, 't9'), operation: 'delete' }],
      { action: 'unchanged' },
    ],
    [
      'an undelete, then the next write',
      { 's/a': 3, 's/a#undelete': 't9' },
      [secret('s/a', 4)],
      { action: 'restart', versions: { 's/a': 4, 's/a#undelete': 't9' } },
    ],
  ] as const)('%s', (_name, recorded, secrets, expected) => {
    expect(decideRestart({ ...recorded }, { secrets: [...secrets] })).toMatchObject(expected);
  });

  it.each([
    [
      'a poisoned (higher) record is replaced',
      { 's/a': 999999, 's/z': 2 },
      [secret('s/a', 5)],
      { action: 'restart', versions: { 's/a': 5, 's/z': 2 } },
    ],
    ['the record it would write is already there', { 's/a': 5 }, [secret('s/a', 5)], { action: 'unchanged' }],
    ['nothing recorded yet', {}, [secret('s/a', 5)], { action: 'restart', versions: { 's/a': 5 } }],
  ] as const)('with override (reset-version): %s', (_name, recorded, secrets, expected) => {
    expect(decideRestart({ ...recorded }, { secrets: [...secrets] }, { override: true })).toMatchObject(expected);
  });

  it('says which undelete made a replayed delete old', () => {
    expect(
      decideRestart(
        { 's/a#undelete': '2026-11-20T10:00:02Z#u1' },
        { secrets: [{ ...secret('s/a', 3, '2026-11-20T10:00:01Z'), id: 'd1', operation: 'delete' }] },
      ),
    ).toEqual({
      action: 'skip',
      reason: 'older than recorded: s/a#undelete is at "2026-11-20T10:00:02Z#u1", after "2026-11-20T10:00:01Z#d1"',
    });
  });

  it('says which path is older in a skip', () => {
    expect(decideRestart({ 's/a': 4 }, { secrets: [secret('s/a', 3)] })).toEqual({
      action: 'skip',
      reason: 'older than recorded: s/a is at 4, newer than 3',
    });
  });
});

describe('the record on the workload', () => {
  it.each([
    [undefined, {}],
    ['', {}],
    ['not json', {}],
    ['[1,2]', {}],
    ['{"a":1,"b":"t","c":{"x":1},"d":null}', { a: 1, b: 't' }],
  ])('parses %j', (value, expected) => {
    expect(parseRecordedVersions(value)).toEqual(expected);
  });

  it('writes restartedAt from the change and the versions sorted', () => {
    expect(restartAnnotations({ restartToken: 'tok', restartedAt: '2026-11-20T10:00:00Z' }, { a: 1 }, 'now')).toEqual({
      [ANNOTATIONS.restartedAt]: '2026-11-20T10:00:00Z',
      [ANNOTATIONS.restartToken]: 'tok',
      [ANNOTATIONS.versions]: '{"a":1}',
    });
    expect(restartAnnotations({ restartToken: 'tok', restartedAt: null }, {}, 'now')[ANNOTATIONS.restartedAt]).toBe(
      'now',
    );
  });

  it('reads watch annotations', () => {
    expect(watchPatterns(' secret/a/**, /legacy/b\nteam-a/secret/c ,,')).toEqual([
      'secret/a/**',
      'legacy/b',
      'team-a/secret/c',
    ]);
    expect(watchPatterns(undefined)).toEqual([]);
  });
});

describe('parseWatchAnnotation', () => {
  it('compiles the patterns it can and says why it ignored the others', () => {
    const { patterns, problems } = parseWatchAnnotation('secret/a/**, secret/{x, *a*a*a*a*a*b');
    expect(patterns.map((p) => p.source)).toEqual(['secret/a/**']);
    expect(problems).toEqual([
      'pattern "secret/{x" ignored: unclosed "{" in "{x"',
      'pattern "*a*a*a*a*a*b" ignored: "*a*a*a*a*a*b" has 6 wildcards and captures; at most 4 per segment',
    ]);
  });

  it('watches nothing when the annotation is over its bounds', () => {
    expect(parseWatchAnnotation(Array.from({ length: 33 }, (_, i) => `s/${i}`).join(','))).toEqual({
      patterns: [],
      problems: ['vault-rollout.io/watch lists 33 patterns; at most 32: it watches nothing'],
    });
    expect(parseWatchAnnotation(`s/${'a'.repeat(5000)}`).problems).toEqual([
      'vault-rollout.io/watch is 5002 characters long; at most 4096: it watches nothing',
    ]);
    expect(parseWatchAnnotation(undefined)).toEqual({ patterns: [], problems: [] });
  });
});

describe('a record without a restart (reconcile)', () => {
  it.each([
    [{ 'kv/a': 3 }, { 'kv/a': 5 }, { 'kv/a': 5 }],
    [{ 'kv/a': 5 }, { 'kv/a': 3 }, { 'kv/a': 5 }],
    [{ 'kv/a': 2 }, { 'kv/b': 1 }, { 'kv/a': 2, 'kv/b': 1 }],
    [
      { 'kv/a#delete': '2026-11-01T00:00:00Z' },
      { 'kv/a#delete': '2026-11-02T00:00:00Z' },
      { 'kv/a#delete': '2026-11-02T00:00:00Z' },
    ],
  ])(
    'the pod template record %j and the metadata record %j merge to %j (per key, the newer)',
    (template, metadata, merged) => {
      expect(mergeRecordedVersions(template, metadata)).toEqual(merged);
    },
  );

  it('a metadata record of the same version makes the worker find the workload unchanged, never restarted', () => {
    const secret: SecretRef = { path: 'kv/a', operation: 'write', version: 4, id: 'x', time: '2026-11-23T00:00:00Z' };
    expect(decideRestart(mergeRecordedVersions({ 'kv/a': 3 }, { 'kv/a': 4 }), { secrets: [secret] }).action).toBe(
      'unchanged',
    );
  });

  it("writes only the versions annotation, on the object's own metadata (no pod template change)", () => {
    expect(recordOnlyPatch({ 'kv/b': 1, 'kv/a': 2 })).toEqual({
      metadata: { annotations: { [ANNOTATIONS.versions]: '{"kv/a":2,"kv/b":1}' } },
    });
  });

  // One reader for the executor, reconcile and status: what reconcile writes is what they all read.
  const deployment = (
    template: string | undefined,
    metadata: string | undefined,
    junk: Record<string, unknown> = {},
  ): KubeObject => ({
    kind: 'Deployment',
    metadata: { name: 'd', ...(metadata ? { annotations: { [ANNOTATIONS.versions]: metadata } } : {}) },
    spec: { template: { metadata: { annotations: template ? { [ANNOTATIONS.versions]: template } : {} } }, ...junk },
  });
  const written = (versions: Record<string, number>) =>
    (recordOnlyPatch(versions) as { metadata: { annotations: Record<string, string> } }).metadata.annotations[
      ANNOTATIONS.versions
    ];
  it.each<[string, KubeObject, Record<string, number>, Record<string, number>]>([
    ['restarts only', deployment('{"kv/a":3}', undefined), { 'kv/a': 3 }, { 'kv/a': 3 }],
    ["reconcile's record only", deployment(undefined, written({ 'kv/a': 4 })), { 'kv/a': 4 }, {}],
    [
      'both: the newer per key',
      deployment('{"kv/a":3,"kv/b":9}', written({ 'kv/a': 4 })),
      { 'kv/a': 4, 'kv/b': 9 },
      { 'kv/a': 3, 'kv/b': 9 },
    ],
    [
      'never from elsewhere in the object (a jobTemplate on a Deployment)',
      deployment(undefined, undefined, {
        jobTemplate: { spec: { template: { metadata: { annotations: { [ANNOTATIONS.versions]: '{"kv/x":1}' } } } } },
      }),
      {},
      {},
    ],
  ])('readRecord: %s', (_what, obj, record, restartsOnly) => {
    expect(readRecord(WORKLOAD_KINDS.Deployment, obj)).toEqual(record);
    expect(readRecord(WORKLOAD_KINDS.Deployment, obj, { restartsOnly: true })).toEqual(restartsOnly);
  });
});
