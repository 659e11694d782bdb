/** The restart breaker and notify-only routes, the pure half: the decision, the table's bounds, the route's mode. */
import { describe, expect, it } from 'vitest';
import {
  breakerFor,
  breakerKey,
  decideBreaker,
  parseBreakerHistory,
  type BreakerEntry,
} from '../../../lib/plan/restart-breaker.ts';
import { notifyOnly } from '../../../lib/plan/route-modes.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { loadRoutingTable, RoutingTableError } from '../../../lib/routing/routing-table.ts';

const H = 3_600_000;
const DAY = 24 * H;
const NOW = Date.parse('2026-11-28T12:00:00Z');
const at = (agoMs: number, token: string): BreakerEntry => ({ token, at: NOW - agoMs });

describe('decideBreaker', () => {
  const limit = { restarts: 2, withinMs: H };
  const cases: Array<{
    name: string;
    history: BreakerEntry[];
    token: string;
    allowed: boolean;
    kept: string[];
  }> = [
    {
      name: 'an empty history lets the first restart go and counts it',
      history: [],
      token: 'a',
      allowed: true,
      kept: ['a'],
    },
    {
      name: 'below the limit: goes, counted',
      history: [at(10 * 60_000, 'a')],
      token: 'b',
      allowed: true,
      kept: ['a', 'b'],
    },
    {
      name: 'at the limit within the window: refused, nothing counted',
      history: [at(50 * 60_000, 'a'), at(10 * 60_000, 'b')],
      token: 'c',
      allowed: false,
      kept: ['a', 'b'],
    },
    {
      name: 'the same restart seen again (a redelivery) goes without counting, even at the limit',
      history: [at(50 * 60_000, 'a'), at(10 * 60_000, 'b')],
      token: 'b',
      allowed: true,
      kept: ['a', 'b'],
    },
    {
      name: 'restarts older than the window do not count (kept for longer windows)',
      history: [at(2 * H, 'a'), at(10 * 60_000, 'b')],
      token: 'c',
      allowed: true,
      kept: ['a', 'b', 'c'],
    },
    {
      name: 'the window is exclusive at its edge: a restart exactly `within` ago no longer counts',
      history: [at(H, 'a'), at(1, 'b')],
      token: 'c',
      allowed: true,
      kept: ['a', 'b', 'c'],
    },
    {
      name: 'restarts older than the longest window (30 days) are forgotten',
      history: [at(31 * DAY, 'old'), at(1, 'b')],
      token: 'c',
      allowed: true,
      kept: ['b', 'c'],
    },
  ];
  it.each(cases)('$name', ({ history, token, allowed, kept }) => {
    const { verdict, history: after } = decideBreaker(history, token, NOW, limit);
    expect(verdict.allowed).toBe(allowed);
    expect(after.map((e) => e.token)).toEqual(kept);
  });

  it('says how many, within what, the limit and when the next may go', () => {
    const { verdict } = decideBreaker([at(50 * 60_000, 'a'), at(10 * 60_000, 'b')], 'c', NOW, limit);
    expect(verdict).toEqual({
      allowed: false,
      counted: 2,
      why: 'restart breaker: 2 restarts within 1h (rollout.breaker allows 2), the first at 2026-11-28T11:10:00.000Z; this one is refused until 2026-11-28T12:10:00.000Z, or until the halt is cleared',
    });
  });

  it('keeps at most 1000 restarts per workload', () => {
    const many = Array.from({ length: 1200 }, (_, i) => at(DAY - i * 1000, `t${i}`));
    const { history } = decideBreaker(many, 'new', NOW, { restarts: 1000, withinMs: 60_000 });
    expect(history).toHaveLength(1000);
    expect(history.at(-1)?.token).toBe('new');
  });

  it('reads a stored history back, dropping what is not one', () => {
    expect(parseBreakerHistory(undefined)).toEqual([]);
    expect(parseBreakerHistory('not json')).toEqual([]);
    expect(parseBreakerHistory('{"a":1}')).toEqual([]);
    expect(parseBreakerHistory('[{"token":"a","at":1},{"token":2,"at":1},null,{"token":"b","at":"x"}]')).toEqual([
      { token: 'a', at: 1 },
    ]);
  });
});

describe('the memory store applies the decision per workload', () => {
  it('counts each workload apart and forgets one on reset', async () => {
    const store = new MemoryRotationStore();
    const limit = { restarts: 1, withinMs: H };
    const api = breakerKey({ cluster: 'alpha', namespace: 'ns', kind: 'Deployment', name: 'api' });
    const web = breakerKey({ cluster: 'alpha', namespace: 'ns', kind: 'Deployment', name: 'web' });
    expect(api).toBe('alpha/ns/Deployment/api');
    expect((await store.admitRestart(api, 'a', NOW, limit)).allowed).toBe(true);
    expect((await store.admitRestart(api, 'b', NOW + 1, limit)).allowed).toBe(false);
    expect((await store.admitRestart(web, 'b', NOW + 1, limit)).allowed).toBe(true);
    await store.resetRestarts(api);
    expect((await store.admitRestart(api, 'b', NOW + 2, limit)).allowed).toBe(true);
  });
});

const tableText = (extra: string, routeExtra = '') => `clusters:
  alpha: { kubeconfig: { env: A } }
${extra}
routes:
  - name: app
    match: { path: "secret/app" }
${routeExtra}
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: app }]
  - name: watch
    match: { path: "secret/*" }
    mode: notify
    targets: [{ clusters: [alpha], namespace: ns, kind: Deployment, name: watched }]
`;

describe('rollout.breaker and mode in the routing table', () => {
  it("compiles a route's breaker over the top level's, and the route's mode", () => {
    const table = loadRoutingTable(
      tableText(
        'rollout: { breaker: { restarts: 5, within: 1h } }',
        '    rollout: { breaker: { restarts: 2, within: 10m } }',
      ),
    );
    expect(breakerFor(table, ['app'])).toEqual({ restarts: 2, withinMs: 600_000 });
    expect(breakerFor(table, ['watch'])).toEqual({ restarts: 5, withinMs: H });
    expect(breakerFor(loadRoutingTable(tableText('')), ['app'])).toBeUndefined();
    expect(notifyOnly(table, ['watch'])).toBe(true);
    // A target a restart route reaches too restarts.
    expect(notifyOnly(table, ['app', 'watch'])).toBe(false);
    expect(notifyOnly(table, ['app'])).toBe(false);
  });

  const bad: Array<[string, string, string]> = [
    ['restarts: 0', 'rollout: { breaker: { restarts: 0, within: 1h } }', 'allow at least 1 restart'],
    ['restarts: 1001', 'rollout: { breaker: { restarts: 1001, within: 1h } }', 'at most 1000 restarts'],
    ['restarts: 1.5', 'rollout: { breaker: { restarts: 1.5, within: 1h } }', 'whole number'],
    ['within: 30s', 'rollout: { breaker: { restarts: 1, within: 30s } }', 'breaker.within'],
    ['within: 721h', 'rollout: { breaker: { restarts: 1, within: 721h } }', 'breaker.within'],
    ['within missing', 'rollout: { breaker: { restarts: 1 } }', 'breaker.within'],
    ['an unknown field', 'rollout: { breaker: { restarts: 1, within: 1h, per: cluster } }', 'per'],
  ];
  it.each(bad)('refuses %s with file:line and the field', (_name, extra, message) => {
    let error: unknown;
    try {
      loadRoutingTable(tableText(extra), 'routes.yaml');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RoutingTableError);
    expect((error as RoutingTableError).message).toMatch(/routes\.yaml:3:\d+: rollout\.breaker/);
    expect((error as RoutingTableError).message).toContain(message);
  });

  it('refuses a mode that is neither restart nor notify', () => {
    expect(() => loadRoutingTable(tableText('', '    mode: dry'), 'routes.yaml')).toThrow(
      /routes\.yaml:\d+:\d+: routes\[0\]\.mode/,
    );
  });
});
