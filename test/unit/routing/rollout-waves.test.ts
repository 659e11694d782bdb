/** The `rollout:` block's waves, gate, onFailure and settle: every error with file, line and field. */
import { problemsOf as problems } from './problems.ts';
import { describe, expect, it } from 'vitest';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';

const yaml = (top: string, route = '') => `clusters:
  alpha: { kubeconfig: { env: A }, labels: { env: prod } }
  gamma: { kubeconfig: { env: C }, labels: { env: staging } }
${top}routes:
  - name: app
    match: { path: "secret/app" }
${route}    targets:
      - { clusters: [alpha, gamma], namespace: ns, kind: Deployment, name: app }
`;

describe('rollout waves in the routing table', () => {
  it.each([
    [
      'an unknown cluster in a wave',
      'rollout:\n  waves:\n    - clusters: [gamma, omega]\n',
      '',
      'routes.yaml:6:17: rollout.waves[0].clusters: unknown cluster "omega"; defined: alpha, gamma',
    ],
    [
      'a wave that selects nothing',
      'rollout:\n  waves:\n    - clusters: { env: dev }\n',
      '',
      'routes.yaml:6:17: rollout.waves[0].clusters: the label selector {"env":"dev"} selects no cluster',
    ],
    [
      'a negative duration',
      'rollout: { gate: { pause: -5s } }\n',
      '',
      'rollout.gate.pause: must be a duration such as 500ms, 30s, 10m, 1h or 1m30s',
    ],
    [
      'a zero gate timeout',
      'rollout: { gate: { timeout: 0s } }\n',
      '',
      'rollout.gate.timeout: must be between 1s and 24h',
    ],
    ['a settle longer than 10 minutes', 'rollout: { settle: 11m }\n', '', 'rollout.settle: must be between 0s and 10m'],
    ['an unknown onFailure', 'rollout: { onFailure: retry }\n', '', 'rollout.onFailure'],
    ['no waves listed', 'rollout: { waves: [] }\n', '', 'rollout.waves: list at least one wave'],
    ['an unknown field', 'rollout: { gate: { healthy: true, wait: 1m } }\n', '', 'rollout.gate'],
    [
      "a route's wave naming an unknown cluster",
      '',
      '    rollout:\n      waves: [{ clusters: [beta] }]\n',
      'routes[0].rollout.waves[0].clusters: unknown cluster "beta"',
    ],
  ])('%s', (_, top, route, expected) => {
    expect(problems(yaml(top, route)).join('\n')).toContain(expected);
  });

  it('accepts the block of the issue, and a table without it keeps one wave', () => {
    expect(
      problems(
        yaml(
          'rollout:\n  waves: [{ clusters: { env: staging } }, { clusters: [alpha] }]\n  gate: { healthy: true, timeout: 10m, pause: 1m }\n  onFailure: halt\n  settle: 5s\n',
        ),
      ),
    ).toEqual([]);
    const plain = loadRoutingTable(yaml(''));
    expect(plain.routes[0]?.policy).toEqual({
      gate: { healthy: true, timeoutMs: 600_000, pauseMs: 0 },
      onFailure: 'halt',
      settleMs: 0,
    });
  });

  it('a route replaces the waves whole and the gate field by field', () => {
    const t = loadRoutingTable(
      yaml(
        'rollout:\n  waves: [{ clusters: [gamma] }]\n  gate: { timeout: 5m, pause: 1m }\n  onFailure: continue\n',
        '    rollout:\n      waves: [{ clusters: [alpha] }]\n      gate: { pause: 2s }\n',
      ),
    );
    expect(t.routes[0]?.policy).toEqual({
      waves: [['alpha']],
      gate: { healthy: true, timeoutMs: 300_000, pauseMs: 2000 },
      onFailure: 'continue',
      settleMs: 0,
    });
  });
});
