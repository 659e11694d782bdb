/** Gate messages: changes, a wave index and times only; bounded; their own FIFO group; a round in the dedup id. */
import { describe, expect, it } from 'vitest';
import {
  deduplicationId,
  gateGroupId,
  messageGroupId,
  parseRolloutMessage,
  type GateMessage,
  type QueuedChange,
} from '../../../lib/queue/rollout-message.ts';

const change: QueuedChange = {
  namespace: '',
  mount: 'secret',
  key: 'app',
  operation: 'write',
  version: 3,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id: 'id-1',
  time: '2026-11-20T10:00:00Z',
};
const gate: GateMessage = {
  v: 2,
  kind: 'gate',
  changes: [change],
  wave: 0,
  since: '2026-11-20T10:00:01Z',
  acceptedAt: '2026-11-20T10:00:01Z',
  round: 0,
};

describe('gate messages', () => {
  it('round-trips; its group is gate-<hash of the changes>, whatever their order', () => {
    expect(parseRolloutMessage(JSON.stringify(gate))).toEqual(gate);
    const other = { ...change, key: 'web', id: 'id-2' };
    expect(messageGroupId(gate)).toBe(gateGroupId([change]));
    expect(gateGroupId([change, other])).toBe(gateGroupId([other, change]));
    expect(gateGroupId([change])).toMatch(/^gate-[0-9a-f]{48}$/);
  });

  it('the deduplication id changes with the wave and the round, not with the times', () => {
    const id = deduplicationId(gate);
    expect(deduplicationId({ ...gate, since: '2026-11-20T11:00:00Z' })).toBe(id);
    expect(deduplicationId({ ...gate, wave: 1 })).not.toBe(id);
    expect(deduplicationId({ ...gate, round: 1 })).not.toBe(id);
  });

  it('changed keys are part of the deduplication id: a forged claim sent first does not swallow the real change', () => {
    const m = { v: 2 as const, cluster: 'alpha', changes: [change], acceptedAt: '2026-11-20T10:00:01Z' };
    const forged = deduplicationId({ ...m, changes: [{ ...change, changedKeys: ['unused'] }] });
    expect(forged).not.toBe(deduplicationId({ ...m, changes: [{ ...change, changedKeys: ['password'] }] }));
    expect(forged).not.toBe(deduplicationId(m));
    // The same keys in another order are the same claim.
    expect(deduplicationId({ ...m, changes: [{ ...change, changedKeys: ['b', 'a'] }] })).toBe(
      deduplicationId({ ...m, changes: [{ ...change, changedKeys: ['a', 'b'] }] }),
    );
  });

  it('a cluster message of a later wave has its own deduplication id', () => {
    const m = { v: 2 as const, cluster: 'alpha', changes: [change], acceptedAt: '2026-11-20T10:00:01Z' };
    expect(deduplicationId({ ...m, wave: 1 })).not.toBe(deduplicationId(m));
    expect(parseRolloutMessage(JSON.stringify({ ...m, wave: 1 }))).toEqual({ ...m, wave: 1 });
  });

  it.each([
    ['targets smuggled in', { ...gate, targets: [{ kind: 'Deployment' }] }],
    ['a wave out of bounds', { ...gate, wave: 101 }],
    ['a negative round', { ...gate, round: -1 }],
    ['no changes', { ...gate, changes: [] }],
    ['a since that is no time', { ...gate, since: 'yesterday' }],
    ['another kind', { ...gate, kind: 'patch' }],
  ])('refuses %s', (_, body) => {
    expect(parseRolloutMessage(JSON.stringify(body))).toEqual({ error: expect.stringMatching(/^not a gate message/) });
  });
});
