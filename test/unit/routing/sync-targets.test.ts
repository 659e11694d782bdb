/** Sync and consumers targets in the routing table: validation with file:line errors, and what they plan. */
import { problemsOf as problems } from './problems.ts';
import { describe, expect, it } from 'vitest';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { kvWrite } from '../../secret-changes.ts';

const head = `clusters:
  prod-eu: { kubeconfig: { file: eu.yaml }, labels: { env: prod } }
  prod-us: { kubeconfig: { file: us.yaml }, labels: { env: prod } }
routes:
  - name: r
    match: { path: "secret/{service}/db" }
    targets:
`;

const change = (key: string, version: number): SecretChange => kvWrite(key, version, { id: `id-${key}` });

describe('sync and consumers targets', () => {
  it('plan: a sync target per cluster, restart consumers by default, and consumers of a Secret or a SecretProviderClass', () => {
    const table =
      loadRoutingTable(`${head}      - { clusters: { env: prod }, namespace: payments, names: ["*-db"], sync: { kind: ExternalSecret, name: "{service}-db", timeout: 2m } }
      - { clusters: [prod-eu], namespace: payments, names: [orders], sync: { kind: VaultStaticSecret, name: "{service}" }, restart: none }
      - { clusters: [prod-eu], namespace: payments, names: ["*-creds"], consumers: { secret: "{service}-creds" } }
      - { clusters: [prod-eu], namespace: web, consumers: { secretProviderClass: vault-web } }
`);
    const plan = planRollouts(table, [change('orders/db', 4)]);
    expect(plan.problems).toEqual([]);
    expect(
      plan.targets.map((t) =>
        t.type === 'consumers' ? [t.cluster, t.namespace, t.kind, t.name, t.restart, t.syncTimeoutMs] : [],
      ),
    ).toEqual([
      ['prod-eu', 'payments', 'ExternalSecret', 'orders-db', 'consumers', 120_000],
      ['prod-eu', 'payments', 'Secret', 'orders-creds', 'consumers', undefined],
      ['prod-eu', 'payments', 'VaultStaticSecret', 'orders', 'none', undefined],
      ['prod-eu', 'web', 'SecretProviderClass', 'vault-web', 'consumers', undefined],
      ['prod-us', 'payments', 'ExternalSecret', 'orders-db', 'consumers', 120_000],
    ]);
    // Derived from the change alone: the ES's nudge annotation is the same for a replay.
    expect(new Set(plan.targets.map((t) => t.restartToken)).size).toBe(1);
  });

  it('a captured name that is no Kubernetes name is a plan problem, never a patch', () => {
    const table =
      loadRoutingTable(`${head}      - { clusters: [prod-eu], namespace: payments, names: ["*-db"], sync: { kind: ExternalSecret, name: "{service}-db" } }
`);
    const plan = planRollouts(table, [change('Bad_Name/db', 1)]);
    expect(plan.targets).toEqual([]);
    expect(plan.problems.map((p) => p.error)).toEqual([
      'name "Bad_Name-db" rendered from the path is not a valid Kubernetes name',
    ]);
  });

  it.each([
    [
      'an unknown operator kind',
      '      - { clusters: [prod-eu], namespace: p, sync: { kind: SealedSecret, name: "{service}" } }\n',
      'routes.yaml:8:60: routes[0].targets[0].sync.kind: unsupported value "SealedSecret"; supported values: "ExternalSecret", "VaultStaticSecret"',
    ],
    [
      'an undefined capture in the sync name',
      '      - { clusters: [prod-eu], namespace: p, names: [api], sync: { kind: ExternalSecret, name: "{app}" } }\n',
      [
        'routes.yaml:6:20: routes[0].match.path: unused capture {service}: no target uses it (use * to match without capturing)',
        'routes.yaml:8:96: routes[0].targets[0].sync.name: undefined capture {app}: the path "secret/{service}/db" captures {service}',
      ],
    ],
    [
      'a restart mode that does not exist',
      '      - { clusters: [prod-eu], namespace: p, sync: { kind: ExternalSecret, name: "{service}" }, restart: all }\n',
      'routes.yaml:8:106: routes[0].targets[0].restart: unsupported value "all"; supported values: "consumers", "none"',
    ],
    [
      'a sync timeout out of bounds',
      '      - { clusters: [prod-eu], namespace: p, sync: { kind: ExternalSecret, name: "{service}", timeout: 2d } }\n',
      'routes.yaml:8:104: routes[0].targets[0].sync.timeout: must be a duration such as 500ms, 30s, 10m, 1h or 1m30s',
    ],
    [
      'both secret and secretProviderClass',
      '      - { clusters: [prod-eu], namespace: p, consumers: { secret: "{service}", secretProviderClass: x } }\n',
      'routes.yaml:8:57: routes[0].targets[0].consumers: must be exactly one of { secret: NAME } or { secretProviderClass: NAME }',
    ],
    [
      'a rendered namespace without bounds',
      '      - { clusters: [prod-eu], namespace: "{service}", consumers: { secret: db } }\n',
      'routes.yaml:8:43: routes[0].targets[0].namespace: the namespace "{service}" is rendered from the path: list the namespaces it may reach in namespaces: [names or globs such as team-*]',
    ],
  ])('refuses %s, naming file, line and field', (_name, target, expected) => {
    expect(problems(`${head}${target}`)).toEqual(Array.isArray(expected) ? expected : [expected]);
  });
});
