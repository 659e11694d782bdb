/**
 * What counts as one change, end to end: raw feed records -> SecretChange -> plan -> the restart decision against the
 * record the previous decisions left on the workload. Exactly once: a redelivered change is `unchanged`; a new one
 * (a new KV v1 write, a delete after an undelete) restarts.
 */
import { describe, expect, it } from 'vitest';
import { decideRestart, type RecordedVersions } from '../../../lib/plan/restart-record.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { deduplicationId, rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { parseInput } from '../../../lib/sources/parse.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: KC } }
vault:
  mounts: { secret: 2, legacy: 1 }
routes:
  - name: v1
    match: { path: legacy/app }
    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: app }]
  - name: v2
    match: { path: secret/app, operations: [write, delete, undelete, destroy] }
    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: app }]
`);

/** A KV v1 write as the audit device logs it; `time` absent when the feed dropped it (minimal entries, some shippers). */
const v1Write = (id: string, time?: string) =>
  JSON.stringify({
    ...(time === undefined ? {} : { time }),
    type: 'response',
    request: { id, operation: 'update', path: 'legacy/app', mount_type: 'kv', mount_point: 'legacy/' },
    response: {},
  });
/** A KV v1 write as an event notification, with or without the CloudEvent time. */
const v1Event = (id: string, time?: string) =>
  JSON.stringify({
    id,
    ...(time === undefined ? {} : { time }),
    data: {
      event: { id, metadata: { modified: 'true', path: 'legacy/app' } },
      event_type: 'kv-v1/write',
      plugin_info: { mount_path: 'legacy/', plugin: 'kv' },
    },
  });
/** A KV v2 event of `operation` on secret/app; the feed says the current version (3) each time. */
const v2Event = (id: string, type: 'delete' | 'undelete', time: string) =>
  JSON.stringify({
    id,
    time,
    data: {
      event: { id, metadata: { modified: 'true', path: `secret/${type}/app`, current_version: '3' } },
      event_type: `kv-v2/${type}`,
      plugin_info: { mount_path: 'secret/', plugin: 'kv' },
    },
  });
/** A KV v2 delete or undelete as the audit device logs it: no version in the response. */
const v2Audit = (id: string, type: 'delete' | 'undelete', time: string) =>
  JSON.stringify({
    time,
    type: 'response',
    request: { id, operation: 'update', path: `secret/${type}/app`, mount_type: 'kv', mount_point: 'secret/' },
    response: {},
  });

/** Each record in turn, decided against the record the previous ones left: the actions, and each restart's token. */
function decide(records: readonly string[]): { actions: string[]; tokens: string[]; dedup: string[] } {
  let recorded: RecordedVersions = {};
  const actions: string[] = [];
  const tokens: string[] = [];
  const dedup: string[] = [];
  for (const record of records) {
    const { changes, rejected } = parseInput(record, { mounts: table.mounts });
    expect(rejected).toEqual([]);
    const [target] = planRollouts(table, changes).targets;
    if (!target) throw new Error(`nothing planned for ${record}`);
    const decision = decideRestart(recorded, target);
    if (decision.action !== 'skip') recorded = decision.versions;
    actions.push(decision.action);
    tokens.push(target.restartToken);
    dedup.push(
      deduplicationId(
        rolloutMessages('a', changes, '2026-11-20T10:00:00Z')[0] as Parameters<typeof deduplicationId>[0],
      ),
    );
  }
  return { actions, tokens, dedup };
}

describe('one change, one restart', () => {
  it.each([
    [
      'KV v1 audit writes without a time: a new request id is a new write',
      [v1Write('r1'), v1Write('r1'), v1Write('r2'), v1Write('r2'), v1Write('r3')],
      ['restart', 'unchanged', 'restart', 'unchanged', 'restart'],
    ],
    [
      'KV v1 events without a time: a new event id is a new write',
      [v1Event('e1'), v1Event('e2'), v1Event('e2')],
      ['restart', 'restart', 'unchanged'],
    ],
    [
      'KV v1 writes ordered by their instant, not their text (".5Z" sorts before "Z")',
      [
        v1Write('r1', '2026-11-20T10:00:00Z'),
        v1Write('r2', '2026-11-20T10:00:00.5Z'),
        v1Write('r1', '2026-11-20T10:00:00Z'),
      ],
      ['restart', 'restart', 'skip'],
    ],
    [
      'KV v1 writes in the same instant with different ids are two writes',
      [v1Write('r1', '2026-11-20T10:00:00.123456789Z'), v1Write('r2', '2026-11-20T10:00:00.123456789Z')],
      ['restart', 'restart'],
    ],
    [
      'KV v1: a redelivered write is unchanged, with a time too',
      [v1Write('r1', '2026-11-20T10:00:00.1Z'), v1Write('r1', '2026-11-20T10:00:00.1Z')],
      ['restart', 'unchanged'],
    ],
    [
      'KV v2 events: delete, undelete, delete, undelete of version 3 each restart; a redelivery does not',
      [
        v2Event('e1', 'delete', '2026-11-20T10:00:01Z'),
        v2Event('e1', 'delete', '2026-11-20T10:00:01Z'),
        v2Event('e2', 'undelete', '2026-11-20T10:00:02Z'),
        v2Event('e3', 'delete', '2026-11-20T10:00:03Z'),
        v2Event('e3', 'delete', '2026-11-20T10:00:03Z'),
        v2Event('e4', 'undelete', '2026-11-20T10:00:04Z'),
      ],
      ['restart', 'unchanged', 'restart', 'restart', 'unchanged', 'restart'],
    ],
    [
      'KV v2 audit entries (no version): delete, undelete, delete each restart',
      [
        v2Audit('r1', 'delete', '2026-11-20T10:00:01Z'),
        v2Audit('r2', 'undelete', '2026-11-20T10:00:02Z'),
        v2Audit('r3', 'delete', '2026-11-20T10:00:03Z'),
        v2Audit('r3', 'delete', '2026-11-20T10:00:03Z'),
      ],
      ['restart', 'restart', 'restart', 'unchanged'],
    ],
    [
      'KV v2 events and audit entries: a delete replayed after the undelete that undid it restarts nothing (a continuation looking late, a redelivery)',
      [
        v2Event('e1', 'delete', '2026-11-20T10:00:01Z'),
        v2Event('e2', 'undelete', '2026-11-20T10:00:02Z'),
        v2Event('e1', 'delete', '2026-11-20T10:00:01Z'),
        v2Audit('r1', 'delete', '2026-11-20T10:00:05Z'),
        v2Audit('r2', 'undelete', '2026-11-20T10:00:06Z'),
        v2Audit('r1', 'delete', '2026-11-20T10:00:05Z'),
        v2Audit('r2', 'undelete', '2026-11-20T10:00:06Z'),
      ],
      ['restart', 'restart', 'skip', 'restart', 'restart', 'skip', 'unchanged'],
    ],
  ])('%s', (_name, records, expected) => {
    expect(decide(records).actions).toEqual(expected);
  });

  it('the second delete of a version is its own restart and its own queue message (not a duplicate of the first)', () => {
    const { tokens, dedup } = decide([
      v2Event('e1', 'delete', '2026-11-20T10:00:01Z'),
      v2Event('e2', 'undelete', '2026-11-20T10:00:02Z'),
      v2Event('e3', 'delete', '2026-11-20T10:00:03Z'),
      v2Event('e3', 'delete', '2026-11-20T10:00:03Z'),
    ]);
    expect(tokens[2]).not.toBe(tokens[0]);
    expect(dedup[2]).not.toBe(dedup[0]);
    // A redelivery is the same restart and the same message.
    expect(tokens[3]).toBe(tokens[2]);
    expect(dedup[3]).toBe(dedup[2]);
  });

  it('a versionless entry with neither a time nor a request id is rejected: nothing tells it from a replay', () => {
    const entry = JSON.stringify({
      type: 'response',
      request: { operation: 'update', path: 'legacy/app', mount_type: 'kv', mount_point: 'legacy/' },
      response: {},
    });
    expect(parseInput(entry, { mounts: table.mounts }).rejected).toEqual([
      {
        record: 'line 1',
        error:
          'a change without a version needs the time or the request id of the entry: nothing else tells it from a replay',
      },
    ]);
  });
});
