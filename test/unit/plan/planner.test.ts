import { describe, expect, it } from 'vitest';
import { planRollouts, restartToken, type RolloutTarget } from '../../../lib/plan/planner.ts';
import { rfc3339Seconds } from '../../../lib/plan/stamps.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { readRepoFile } from '../../helpers.ts';

const table = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');

let n = 0;
function change(path: string, over: Partial<SecretChange> = {}): SecretChange {
  const [mount = '', ...key] = path.split('/');
  n++;
  return {
    namespace: '',
    mount,
    key: key.join('/'),
    path,
    operation: 'write',
    version: 1,
    kvVersion: 2,
    kvVersionFrom: 'routes',
    source: 'audit',
    via: 'direct',
    id: `id-${n}`,
    time: '2026-11-20T10:00:00.123456789Z',
    record: `line ${n}`,
    ...over,
  };
}

const brief = (t: RolloutTarget) =>
  `${t.cluster}/${t.namespace}/${t.kind}/${t.type !== 'workload' ? t.name : (t.name ?? t.selector ?? 'annotated')}`;

describe('planRollouts', () => {
  it.each([
    [
      'a namespaced route fans out to every cluster its label selector picks',
      [change('secret/payments/api/db', { namespace: 'team-a', version: 7 })],
      ['alpha/payments/Deployment/api', 'beta/payments/Deployment/api'],
    ],
    ['a change in another namespace matches nothing', [change('secret/payments/api/db', { namespace: 'team-b' })], []],
    [
      'a route only takes its operations (default: write, undelete)',
      [change('secret/payments/api/db', { namespace: 'team-a', operation: 'delete' })],
      [],
    ],
    [
      'undelete counts by default',
      [change('secret/payments/api/db', { namespace: 'team-a', operation: 'undelete' })],
      ['alpha/payments/Deployment/api', 'beta/payments/Deployment/api'],
    ],
    [
      'destroy counts when the route says so',
      [change('secret/shared/tls', { operation: 'destroy', version: null })],
      [
        'alpha/edge/DaemonSet/ingress-proxy',
        'alpha/edge/Deployment/vault-rollout.io/tls=shared',
        'beta/edge/Deployment/vault-rollout.io/tls=shared',
        'gamma/edge/Deployment/vault-rollout.io/tls=shared',
      ],
    ],
    [
      'annotated targets are planned per cluster and namespace',
      [change('legacy/batch/reports', { kvVersion: 1, version: null })],
      ['alpha/batch/CronJob/annotated', 'gamma/batch/CronJob/annotated'],
    ],
    [
      'resource targets render their patch',
      [change('secret/registry/main', { version: 4 })],
      ['alpha/registry/Harbor/main'],
    ],
    ['an unrouted path plans nothing', [change('secret/elsewhere')], []],
  ])('%s', (_name, changes, expected) => {
    expect(planRollouts(table, changes).targets.map(brief)).toEqual(expected);
  });

  it('plans a workload hit by several changes once, with every path, and the newest version per path', () => {
    const plan = planRollouts(table, [
      change('secret/shared/tls', { version: 3, time: '2026-11-20T10:00:03Z' }),
      change('secret/shared/tls', { version: 5, time: '2026-11-20T10:00:01Z' }),
      change('secret/shared/tls', { version: 4, time: '2026-11-20T10:00:02Z' }),
    ]);
    const ds = plan.targets.find((t) => t.kind === 'DaemonSet');
    expect(ds?.secrets).toEqual([
      {
        path: 'secret/shared/tls',
        operation: 'write',
        version: 5,
        id: expect.any(String),
        time: '2026-11-20T10:00:01Z',
      },
    ]);
    expect(plan.targets).toHaveLength(4);
    expect(plan.routed).toEqual([['shared-tls'], ['shared-tls'], ['shared-tls']]);
  });

  it('merges routes and paths for one workload', () => {
    const multi = loadRoutingTable(
      `clusters: { c: { kubeconfig: { env: KC } } }
routes:
  - name: db
    match: { path: "secret/api/db" }
    targets: [{ clusters: [c], namespace: n, kind: Deployment, name: api }]
  - name: all
    match: { path: "secret/api/*" }
    targets: [{ clusters: [c], namespace: n, kind: Deployment, name: api }]
`,
    );
    const plan = planRollouts(multi, [
      change('secret/api/db', { version: 2 }),
      change('secret/api/tls', { version: 9 }),
    ]);
    expect(plan.targets).toHaveLength(1);
    expect(plan.targets[0]).toMatchObject({ routes: ['all', 'db'], paths: ['secret/api/db', 'secret/api/tls'] });
  });

  it('is deterministic: the same changes in any order plan byte-identical targets', () => {
    const changes = [
      change('secret/payments/api/db', { namespace: 'team-a', version: 7, id: 'a' }),
      change('secret/payments/worker/db', { namespace: 'team-a', version: 3, id: 'b' }),
      change('secret/shared/tls', { version: 13, id: 'c' }),
      change('secret/registry/main', { version: 2, id: 'd' }),
    ];
    const a = JSON.stringify(planRollouts(table, changes).targets);
    const b = JSON.stringify(planRollouts(table, [...changes].reverse()).targets);
    expect(b).toBe(a);
  });

  it('derives the restart token from the changes only: a replay gets the same token, a new version another', () => {
    const first = planRollouts(table, [change('secret/shared/tls', { version: 13, id: 'x1' })]).targets[0];
    const replay = planRollouts(table, [
      change('secret/shared/tls', { version: 13, id: 'x2', time: '2026-11-21T00:00:00Z' }),
    ]).targets[0];
    const next = planRollouts(table, [change('secret/shared/tls', { version: 14 })]).targets[0];
    expect(replay?.restartToken).toBe(first?.restartToken);
    expect(next?.restartToken).not.toBe(first?.restartToken);
  });

  it('tells versionless changes apart by id and time, and other operations from writes', () => {
    const base = { path: 'legacy/x', operation: 'write' as const, version: null, id: 'a', time: 't' };
    expect(restartToken([base])).toBe(restartToken([{ ...base }]));
    expect(restartToken([base])).not.toBe(restartToken([{ ...base, id: 'b' }]));
    const v = { ...base, version: 3 };
    expect(restartToken([v])).not.toBe(restartToken([{ ...v, operation: 'undelete' }]));
  });

  it('stamps restartedAt from the newest change, in UTC seconds', () => {
    const plan = planRollouts(table, [
      change('secret/shared/tls', { version: 1, time: '2026-11-20T11:15:02.987654321+01:00' }),
    ]);
    expect(plan.targets[0]?.restartedAt).toBe('2026-11-20T10:15:02Z');
    expect(rfc3339Seconds('not a time')).toBeNull();
    expect(planRollouts(table, [change('secret/shared/tls', { time: '' })]).targets[0]?.restartedAt).toBeNull();
  });

  it('renders resource patches from the newest change', () => {
    const plan = planRollouts(table, [
      change('secret/registry/main', { version: 4 }),
      change('secret/registry/main', { version: 2 }),
    ]);
    expect(plan.targets[0]).toMatchObject({
      type: 'resource',
      apiVersion: 'example.com/v1',
      patch: { spec: { secretVersion: '4' } },
    });
  });

  it('refuses captured values that are no Kubernetes name, and says why', () => {
    const plan = planRollouts(table, [
      change('secret/payments/Bad_Name/db', { namespace: 'team-a' }),
      change('secret/payments/{service}/db', { namespace: 'team-a' }),
    ]);
    expect(plan.targets).toEqual([]);
    expect(plan.problems.map((p) => p.error)).toEqual([
      'name "Bad_Name" rendered from the path is not a valid Kubernetes name',
      'name "{service}" rendered from the path is not a valid Kubernetes name',
    ]);
  });
});

describe('captured values go where they are valid, and only there', () => {
  const bounded = loadRoutingTable(`clusters: { c: { kubeconfig: { env: KC } } }
routes:
  - name: by-team
    match: { path: "secret/{team}/{app}" }
    targets:
      - { clusters: [c], namespace: "{team}", namespaces: [payments, "team-*"], names: [api, coredns, "web-*"], kind: Deployment, name: "{app}" }
  - name: by-selector
    match: { path: "sel/{apps}" }
    targets:
      - { clusters: [c], namespace: n, kind: Deployment, selector: "app in ({apps})" }
  - name: tenant-resource
    match: { path: "crd/{ns}/{name}" }
    targets:
      - { clusters: [c], namespaces: ["tenant-*"], names: [main], resource: { apiVersion: a.io/v1, kind: K, namespace: "{ns}", name: "{name}" }, patch: { spec: { v: "{version}" } } }
  - name: synced
    match: { path: "eso/{name}" }
    targets:
      - { clusters: [c], namespace: apps, names: ["db-*"], sync: { kind: ExternalSecret, name: "{name}" } }
  - name: consumed
    match: { path: "csi/{class}" }
    targets:
      - { clusters: [c], namespace: apps, names: [vault-db], consumers: { secretProviderClass: "{class}" } }
  - name: any-team
    match: { path: "free/{ns}" }
    targets:
      - { clusters: [c], namespace: "{ns}", namespaces: ["*"], kind: Deployment, name: app }
`);

  it.each([
    ['a namespace the bound names', 'secret/payments/api', 'c/payments/Deployment/api', null],
    ['a namespace a glob of the bound matches', 'secret/team-blue/api', 'c/team-blue/Deployment/api', null],
    [
      'a namespace outside the bound',
      'secret/kube-system/coredns',
      null,
      'namespace "kube-system" rendered from the path is outside the target\'s namespaces (payments, team-*)',
    ],
    [
      'a glob is no prefix: "team-*" does not take "teams"',
      'secret/teams/api',
      null,
      'namespace "teams" rendered from the path is outside the target\'s namespaces (payments, team-*)',
    ],
    ['a label value in a selector', 'sel/api', 'c/n/Deployment/app in (api)', null],
    [
      'a list where one label value goes',
      'sel/api,billing,admin-console',
      null,
      '{apps} = "api,billing,admin-console" from the path is not a valid label value, so it cannot go into the selector',
    ],
    [
      'selector syntax where one label value goes',
      'sel/x)',
      null,
      '{apps} = "x)" from the path is not a valid label value, so it cannot go into the selector',
    ],
    [
      'a label value too long for one',
      `sel/${'a'.repeat(64)}`,
      null,
      `{apps} = "${'a'.repeat(64)}" from the path is not a valid label value, so it cannot go into the selector`,
    ],
    ['a resource namespace inside the bound', 'crd/tenant-a/main', 'c/tenant-a/K/main', null],
    [
      'a resource namespace outside the bound',
      'crd/kube-system/main',
      null,
      'namespace "kube-system" rendered from the path is outside the target\'s namespaces (tenant-*)',
    ],
    [
      'a namespace that is no DNS label, bound or not',
      'free/Kube_System',
      null,
      'namespace "Kube_System" rendered from the path is not a valid Kubernetes namespace',
    ],
    [
      'a bound of "*" takes any valid namespace, as the table says so',
      'free/kube-system',
      'c/kube-system/Deployment/app',
      null,
    ],
    ['a name a glob of the bound matches', 'secret/payments/web-eu', 'c/payments/Deployment/web-eu', null],
    [
      'a name outside the bound: the path cannot pick any workload of the namespace',
      'secret/payments/admin',
      null,
      'name "admin" rendered from the path is outside the target\'s names (api, coredns, web-*)',
    ],
    [
      'a name glob is no prefix: "web-*" does not take "web"',
      'secret/payments/web',
      null,
      'name "web" rendered from the path is outside the target\'s names (api, coredns, web-*)',
    ],
    [
      'a resource name outside the bound',
      'crd/tenant-a/other',
      null,
      'name "other" rendered from the path is outside the target\'s names (main)',
    ],
    ['a synced resource inside the bound', 'eso/db-main', 'c/apps/ExternalSecret/db-main', null],
    [
      'a synced resource outside the bound',
      'eso/web',
      null,
      'name "web" rendered from the path is outside the target\'s names (db-*)',
    ],
    [
      'a SecretProviderClass outside the bound',
      'csi/other',
      null,
      'name "other" rendered from the path is outside the target\'s names (vault-db)',
    ],
  ])('%s', (_name, path, planned, problem) => {
    const plan = planRollouts(bounded, [change(path)]);
    expect(plan.targets.map(brief)).toEqual(planned === null ? [] : [planned]);
    expect(plan.problems.map((p) => p.error)).toEqual(problem === null ? [] : [problem]);
  });
});
