/** Maintenance windows, the pure half: open or not, and when the window next opens, across midnight and DST. */
import { describe, expect, it } from 'vitest';
import { clusterWindows, isWindowOpen, windowOpensAt, windowState } from '../../../lib/plan/restart-window.ts';
import { compileWindow, type RestartWindowSettings } from '../../../lib/routing/restart-window.ts';

const w = (days: RestartWindowSettings['days'], from: string, to: string, timeZone = 'UTC') =>
  compileWindow({ days, from, to, timeZone });
const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

describe('windowOpensAt', () => {
  // 2026-11-30 is a Monday.
  it.each([
    ['open inside the hours', w(['Mon'], '09:00', '17:00'), '2026-11-30T10:00:00Z', '2026-11-30T10:00:00.000Z'],
    ['from is inclusive', w(['Mon'], '09:00', '17:00'), '2026-11-30T09:00:00Z', '2026-11-30T09:00:00.000Z'],
    ['to is exclusive: next Monday', w(['Mon'], '09:00', '17:00'), '2026-11-30T17:00:00Z', '2026-12-07T09:00:00.000Z'],
    ['before the hours: today', w(['Mon'], '09:00', '17:00'), '2026-11-30T08:59:00Z', '2026-11-30T09:00:00.000Z'],
    [
      'a day not listed: the next listed',
      w(['Wed', 'Fri'], '09:00', '17:00'),
      '2026-11-30T10:00:00Z',
      '2026-12-02T09:00:00.000Z',
    ],
    [
      'past midnight, open before midnight',
      w(['Mon'], '22:00', '04:00'),
      '2026-11-30T23:30:00Z',
      '2026-11-30T23:30:00.000Z',
    ],
    [
      'past midnight, open the next morning',
      w(['Mon'], '22:00', '04:00'),
      '2026-12-01T03:59:00Z',
      '2026-12-01T03:59:00.000Z',
    ],
    [
      'past midnight, closed at 04:00',
      w(['Mon'], '22:00', '04:00'),
      '2026-12-01T04:00:00Z',
      '2026-12-07T22:00:00.000Z',
    ],
    [
      'past midnight, the morning belongs to the day before',
      w(['Tue'], '22:00', '04:00'),
      '2026-12-01T03:00:00Z',
      '2026-12-01T22:00:00.000Z',
    ],
    ['Sunday night into Monday', w(['Sun'], '23:00', '01:00'), '2026-11-30T00:30:00Z', '2026-11-30T00:30:00.000Z'],
    // Europe/Berlin: CET (+01:00) in winter, CEST (+02:00) in summer.
    [
      'a zone: 22:00 Berlin in winter',
      w(['Mon'], '22:00', '23:00', 'Europe/Berlin'),
      '2026-11-30T12:00:00Z',
      '2026-11-30T21:00:00.000Z',
    ],
    [
      'a zone: 22:00 Berlin in summer',
      w(['Mon'], '22:00', '23:00', 'Europe/Berlin'),
      '2026-06-01T12:00:00Z',
      '2026-06-01T20:00:00.000Z',
    ],
    // 2026-03-29: Berlin springs forward at 02:00 to 03:00; 02:30 does not exist: the first instant after the gap.
    [
      'spring forward: a time the change skips',
      w(['Sun'], '02:30', '05:00', 'Europe/Berlin'),
      '2026-03-28T12:00:00Z',
      '2026-03-29T01:00:00.000Z',
    ],
    [
      'spring forward: local hours kept after it',
      w(['Sun'], '04:00', '05:00', 'Europe/Berlin'),
      '2026-03-28T12:00:00Z',
      '2026-03-29T02:00:00.000Z',
    ],
    // 2026-10-25: Berlin falls back at 03:00 to 02:00; 02:30 happens twice: the first.
    [
      'fall back: a time the change repeats',
      w(['Sun'], '02:30', '05:00', 'Europe/Berlin'),
      '2026-10-24T12:00:00Z',
      '2026-10-25T00:30:00.000Z',
    ],
    // America/New_York springs forward 2026-03-08 02:00 -> 03:00.
    [
      'New York across its change',
      w(['Mon'], '09:00', '10:00', 'America/New_York'),
      '2026-03-06T20:00:00Z',
      '2026-03-09T13:00:00.000Z',
    ],
    [
      'every day, just after it closed',
      w(['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'], '01:00', '02:00'),
      '2026-11-30T02:00:00Z',
      '2026-12-01T01:00:00.000Z',
    ],
  ])('%s', (_, window, now, expected) => {
    expect(iso(windowOpensAt(window, at(now)))).toBe(expected);
  });

  it('open means opensAt is now; closed means it is later and open then', () => {
    const window = w(['Tue', 'Sat'], '22:00', '03:00', 'Australia/Sydney');
    for (let t = at('2026-01-01T00:00:00Z'); t < at('2026-12-31T00:00:00Z'); t += 3_600_000 * 7 + 60_000 * 13) {
      const opens = windowOpensAt(window, t);
      expect(opens === t).toBe(isWindowOpen(window, t));
      expect(isWindowOpen(window, opens)).toBe(true);
      expect(opens - t).toBeLessThanOrEqual(8 * 86_400_000);
    }
  });
});

describe('windowState and clusterWindows', () => {
  const ops = w(['Mon'], '22:00', '23:00');
  const late = w(['Tue'], '01:00', '02:00');
  it('open only when every window is; else the latest opening', () => {
    expect(windowState([], at('2026-11-30T10:00:00Z'))).toEqual({ open: true });
    expect(windowState([ops, late], at('2026-11-30T10:00:00Z'))).toMatchObject({
      open: false,
      opensAt: at('2026-12-01T01:00:00Z'),
      window: 'Tue 01:00-02:00 UTC',
    });
  });
  it("a wave's window over the rollout's; clusters in no wave follow the rollout's", () => {
    const policy = { window: ops, waveWindows: [late, undefined] };
    const sets = [
      {
        policy: {
          ...policy,
          gate: { healthy: true, timeoutMs: 1, pauseMs: 0 },
          onFailure: 'halt' as const,
          settleMs: 0,
        },
        waves: [
          { index: 0, from: 0, clusters: ['gamma'] },
          { index: 1, from: 1, clusters: ['alpha'] },
          { index: 2, from: 'rest' as const, clusters: ['beta'] },
        ],
      },
    ];
    expect(clusterWindows(sets, 'gamma')).toEqual([late]);
    expect(clusterWindows(sets, 'alpha')).toEqual([ops]);
    expect(clusterWindows(sets, 'beta')).toEqual([ops]);
    expect(clusterWindows(sets, 'delta')).toEqual([]);
  });
});
