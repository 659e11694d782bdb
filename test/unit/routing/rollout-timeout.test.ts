import { describe, expect, it } from 'vitest';
import {
  formatProblem,
  loadRoutingTable,
  rolloutTimeoutMs,
  RoutingTableError,
} from '../../../lib/routing/routing-table.ts';
import { parseDuration } from '../../../lib/routing/schema.ts';
import { twoRouteTable } from './problems.ts';

const yaml = twoRouteTable;

describe('rollout deadlines: route, then cluster, then top level, then 10 minutes', () => {
  it.each([
    ['nothing set', {}, 'a', ['app'], 600_000],
    ['top level', { top: 'rollout: { timeout: 5m }\n' }, 'a', ['app'], 300_000],
    [
      'cluster over top level',
      { top: 'rollout: { timeout: 5m }\n', cluster: ', rolloutTimeout: 90s' },
      'a',
      ['app'],
      90_000,
    ],
    ['cluster applies to its own workloads only', { cluster: ', rolloutTimeout: 90s' }, 'b', ['app'], 600_000],
    [
      'route over cluster',
      { cluster: ', rolloutTimeout: 90s', route: '    rollout: { timeout: 20m }\n' },
      'a',
      ['app'],
      1_200_000,
    ],
    [
      'the longest of the routes that name it',
      { cluster: ', rolloutTimeout: 90s', route: '    rollout: { timeout: 20m }\n' },
      'a',
      ['app', 'other'],
      1_200_000,
    ],
  ] as const)('%s', (_, extra, cluster, routes, ms) => {
    expect(rolloutTimeoutMs(loadRoutingTable(yaml(extra)), cluster, routes)).toBe(ms);
  });

  it.each([
    ['10m', 600_000],
    ['90s', 90_000],
    ['1h', 3_600_000],
    ['1500ms', 1500],
    ['10', undefined],
    ['1.5m', undefined],
  ])('parseDuration(%s)', (text, ms) => expect(parseDuration(text)).toBe(ms));

  it('names file, line and field of a bad duration', () => {
    const problems = (() => {
      try {
        loadRoutingTable(
          yaml({
            top: 'rollout: { timeout: ten }\n',
            cluster: ', rolloutTimeout: 48h',
            route: '    rollout: { timeout: 0s, waves: 2 }\n',
          }),
          'routes.yaml',
        );
      } catch (e) {
        if (e instanceof RoutingTableError) return e.problems.map(formatProblem);
      }
      return [];
    })();
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^routes\.yaml:2:\d+: clusters\.a\.rolloutTimeout: must be between 1s and 24h$/),
        expect.stringMatching(
          /^routes\.yaml:4:\d+: rollout\.timeout: must be a duration such as 500ms, 30s, 10m, 1h or 1m30s$/,
        ),
        expect.stringMatching(/^routes\.yaml:8:\d+: routes\[0\]\.rollout\.timeout: must be between 1s and 24h$/),
        expect.stringMatching(/^routes\.yaml:8:\d+: routes\[0\]\.rollout/),
      ]),
    );
  });
});
