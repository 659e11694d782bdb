import { describe, expect, it } from 'vitest';
import {
  decideWait,
  LOOK_MAX_MS,
  LOOK_MIN_MS,
  type WaitDecision,
  type WaitInput,
} from '../../../lib/plan/look-again.ts';

const T = 1_800_000_000_000;

// One table for every wait of the worker: rollouts, gates, syncs, settle windows and slots all come through here.
const cases: Array<[string, WaitInput, WaitDecision]> = [
  [
    'nothing pending: finish, whatever the clock',
    { pending: false, now: T, since: T - 3_600_000, deadline: T - 1 },
    { action: 'finish' },
  ],
  [
    'pending, just begun: the shortest delay',
    { pending: true, now: T, since: T },
    { action: 'lookAgainAfter', ms: LOOK_MIN_MS },
  ],
  [
    'pending for 8 s: a quarter of it',
    { pending: true, now: T, since: T - 8_000 },
    { action: 'lookAgainAfter', ms: 2_000 },
  ],
  [
    'pending for 10 min: the longest delay',
    { pending: true, now: T, since: T - 600_000 },
    { action: 'lookAgainAfter', ms: LOOK_MAX_MS },
  ],
  [
    'a hint wins over the grown delay (a gate pause, a settle window)',
    { pending: true, now: T, since: T - 600_000, hintMs: 45_000 },
    { action: 'lookAgainAfter', ms: 45_000 },
  ],
  [
    'a hint of 0 still hands back (1 ms)',
    { pending: true, now: T, since: T, hintMs: 0 },
    { action: 'lookAgainAfter', ms: 1 },
  ],
  [
    'never past the deadline: the last look lands on it',
    { pending: true, now: T, since: T - 600_000, deadline: T + 4_000 },
    { action: 'lookAgainAfter', ms: 4_000 },
  ],
  [
    'a hint is cut at the deadline too',
    { pending: true, now: T, since: T, deadline: T + 500, hintMs: 10_000 },
    { action: 'lookAgainAfter', ms: 500 },
  ],
  [
    'deadline reached: expire',
    { pending: true, now: T, since: T - 90_000, deadline: T },
    { action: 'expire', why: 'still waiting 90 s after it began (deadline)' },
  ],
  [
    'own bounds: min and max',
    { pending: true, now: T, since: T - 600_000, minMs: 200, maxMs: 2_000 },
    { action: 'lookAgainAfter', ms: 2_000 },
  ],
  [
    'max below min: min wins',
    { pending: true, now: T, since: T, minMs: 3_000, maxMs: 1_000 },
    { action: 'lookAgainAfter', ms: 3_000 },
  ],
];

describe('decideWait: finish | expire | lookAgainAfter(ms)', () => {
  it.each(cases)('%s', (_name, input, expected) => {
    expect(decideWait(input)).toEqual(expected);
  });

  it('the delay never shrinks as the wait grows, and stays within its bounds', () => {
    let last = 0;
    for (let waited = 0; waited <= 3_600_000; waited += 7_000) {
      const d = decideWait({ pending: true, now: T, since: T - waited });
      if (d.action !== 'lookAgainAfter') throw new Error(`unexpected ${d.action}`);
      expect(d.ms).toBeGreaterThanOrEqual(last);
      expect(d.ms).toBeGreaterThanOrEqual(LOOK_MIN_MS);
      expect(d.ms).toBeLessThanOrEqual(LOOK_MAX_MS);
      last = d.ms;
    }
  });
});
