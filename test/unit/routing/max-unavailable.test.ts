import { describe, expect, it } from 'vitest';
import { loadRoutingTable, maxUnavailableFor } from '../../../lib/routing/routing-table.ts';
import { problemsOf, twoRouteTable } from './problems.ts';

const yaml = twoRouteTable;

describe('rollout.maxUnavailable: route over top level, the smallest bound of the routes that name a target', () => {
  it.each([
    ['nothing set: unbounded', {}, ['app'], undefined],
    [
      'top level',
      { top: 'rollout: { maxUnavailable: { perCluster: 5, fleet: 20 } }\n' },
      ['app'],
      { perCluster: 5, fleet: 20 },
    ],
    ['fleet alone', { top: 'rollout: { maxUnavailable: { fleet: 3 } }\n' }, ['app'], { fleet: 3 }],
    [
      'route over top level',
      {
        top: 'rollout: { maxUnavailable: { perCluster: 5, fleet: 20 } }\n',
        route: '    rollout: { maxUnavailable: { perCluster: 2 } }\n',
      },
      ['app'],
      { perCluster: 2 },
    ],
    [
      'the other route keeps the top level',
      {
        top: 'rollout: { maxUnavailable: { perCluster: 5, fleet: 20 } }\n',
        route: '    rollout: { maxUnavailable: { perCluster: 2 } }\n',
      },
      ['other'],
      { perCluster: 5, fleet: 20 },
    ],
    [
      'two routes: the smallest of each scope',
      {
        top: 'rollout: { maxUnavailable: { perCluster: 5, fleet: 20 } }\n',
        route: '    rollout: { maxUnavailable: { perCluster: 7, fleet: 8 } }\n',
      },
      ['app', 'other'],
      { perCluster: 5, fleet: 8 },
    ],
    [
      'a bounded route and an unbounded one: the bound',
      { route: '    rollout: { maxUnavailable: { perCluster: 4 } }\n' },
      ['app', 'other'],
      { perCluster: 4 },
    ],
  ] as const)('%s', (_, extra, routes, expected) => {
    expect(maxUnavailableFor(loadRoutingTable(yaml(extra)), routes)).toEqual(expected);
  });

  it('names file, line and field of a bad bound', () => {
    const problems = problemsOf(
      yaml({
        top: 'rollout: { maxUnavailable: { perCluster: 0, fleet: 2.5 } }\n',
        route: '    rollout:\n      maxUnavailable: { perCluster: 30, fleet: 10 }\n',
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^routes\.yaml:4:\d+: rollout\.maxUnavailable\.perCluster: must be at least 1$/),
        expect.stringMatching(/^routes\.yaml:4:\d+: rollout\.maxUnavailable\.fleet: must be a whole number$/),
        expect.stringMatching(
          /^routes\.yaml:9:\d+: routes\[0\]\.rollout\.maxUnavailable: perCluster must not exceed fleet$/,
        ),
      ]),
    );
  });

  it.each([
    ['an empty bound', 'rollout: { maxUnavailable: {} }\n', /rollout\.maxUnavailable: give perCluster, fleet or both$/],
    [
      'an unknown field',
      'rollout: { maxUnavailable: { perNamespace: 2 } }\n',
      /rollout\.maxUnavailable\.perNamespace: unknown field "perNamespace"$/,
    ],
    [
      'a negative bound',
      'rollout: { maxUnavailable: { fleet: -1 } }\n',
      /rollout\.maxUnavailable\.fleet: must be at least 1$/,
    ],
    [
      'over the bound',
      'rollout: { maxUnavailable: { fleet: 5000 } }\n',
      /rollout\.maxUnavailable\.fleet: must be at most 1000$/,
    ],
  ])('refuses %s', (_, top, message) => {
    expect(problemsOf(yaml({ top }))).toContainEqual(
      expect.stringMatching(new RegExp(`^routes\\.yaml:4:\\d+: ${message.source}`)),
    );
  });
});
