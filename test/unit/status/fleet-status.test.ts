import { describe, expect, it } from 'vitest';
import { parseLabelSelector, selectorMatches } from '../../../lib/kube/label-selector.ts';
import type { KubeObject } from '../../../lib/kube/workload-kinds.ts';
import { statusText } from '../../../lib/report/status-report.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { haltEventName } from '../../../lib/kube/restart-record.ts';
import { fleetStatus, listKey, listRequests, type ClusterListing, type VaultAnswer } from '../../../lib/status/fleet-status.ts';

const table = loadRoutingTable(`
clusters:
  alpha: { kubeconfig: { file: a } }
  beta: { kubeconfig: { file: b } }
vault:
  mounts: { secret: 2, legacy: 1 }
routes:
  - name: api
    match: { path: "secret/app/{svc}" }
    targets: [{ clusters: [alpha, beta], namespace: apps, names: ["*"], kind: Deployment, name: "{svc}" }]
  - name: tls
    match: { path: "secret/tls" }
    targets: [{ clusters: [alpha], namespace: edge, kind: Deployment, selector: "tls in (shared),tier!=db" }]
  - name: per-team
    match: { path: "secret/team/{team}/db" }
    targets: [{ clusters: [beta], namespace: "{team}", namespaces: [red, blue], kind: StatefulSet, name: db }]
  - name: any-ns
    match: { path: "secret/ns/{ns}" }
    targets: [{ clusters: [beta], namespace: "{ns}", namespaces: ["*"], kind: Deployment, name: app }]
  - name: legacy
    match: { path: "legacy/batch/*" }
    targets: [{ clusters: [alpha], namespace: batch, kind: CronJob, annotated: true }]
`);

const NOW = Date.parse('2026-11-23T12:00:00Z');
const complete = { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 };
const progressing = { observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 2 };
const failed = { ...progressing, conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }] };

function deployment(ns: string, name: string, versions: Record<string, number | string> | undefined, status: Record<string, unknown> = complete, meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {}, restartedAt = '2026-11-23T11:58:00Z'): KubeObject {
  const annotations = versions ? { 'vault-rollout.io/versions': JSON.stringify(versions), 'kubectl.kubernetes.io/restartedAt': restartedAt } : {};
  return { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace: ns, name, generation: 2, ...meta }, spec: { replicas: 2, template: { metadata: { annotations } } }, status };
}

const listing = (cluster: string, lists: Record<string, KubeObject[] | { error: string }>): ClusterListing => ({ cluster, lists: new Map(Object.entries(lists)) });
const deployments = (ns: string) => listKey({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns });
/** A workload whose restart a wave's gate halted: the RotationHalted Event named from its restart token. */
const haltedDeployment = deployment('apps', 'api', { 'secret/app/api': 4 });
((haltedDeployment.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations)['vault-rollout.io/restart-token'] = 'tok';
const haltEvent: KubeObject = { apiVersion: 'v1', kind: 'Event', metadata: { namespace: 'apps', name: haltEventName('api', 'tok') }, reason: 'RotationHalted', message: 'wave 1 failed' } as KubeObject;

describe('listRequests: one LIST per kind and namespace', () => {
  it('lists literal namespaces, a bound of names, and every namespace when the namespace comes from the path', () => {
    const lists = listRequests(table);
    expect(lists.get('alpha')?.map(listKey).sort()).toEqual(['apps/v1/Deployment/apps', 'apps/v1/Deployment/edge', 'batch/v1/CronJob/batch', 'v1/Event/apps', 'v1/Event/batch', 'v1/Event/edge']);
    expect(lists.get('beta')?.map(listKey).sort()).toEqual(['apps/v1/Deployment/', 'apps/v1/StatefulSet/blue', 'apps/v1/StatefulSet/red', 'v1/Event/']);
    expect([...listRequests(table, new Set(['beta'])).keys()]).toEqual(['beta']);
  });
});

describe('fleetStatus', () => {
  type Row = [string, ClusterListing[], Map<string, VaultAnswer>, string | undefined, { ok: boolean; verdicts: string[]; current?: number | string | null }];
  const v = (n: number): VaultAnswer => ({ currentVersion: n, createdTime: '2026-11-23T11:57:00.123456Z' });
  const rows: Row[] = [
    ['every consumer current and complete', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map([['secret/app/api', v(4)]]), undefined, { ok: true, verdicts: ['current', 'current'], current: 4 }],
    ['one cluster behind Vault', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 3 })] })], new Map([['secret/app/api', v(4)]]), 'secret/app/api', { ok: false, verdicts: ['current', 'BEHIND'] }],
    ['without Vault: the newest record is current', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 3 })] })], new Map(), undefined, { ok: false, verdicts: ['current', 'BEHIND'], current: 4 }],
    ['a consumer never restarted is behind', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', undefined)] })], new Map(), undefined, { ok: false, verdicts: ['current', 'BEHIND'] }],
    ['a failed rollout', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }, failed)] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), undefined, { ok: false, verdicts: ['FAILED', 'current'] }],
    ['still rolling within its deadline', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }, progressing)] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), undefined, { ok: false, verdicts: ['rolling', 'current'] }],
    ['progressing past its deadline is a timeout', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }, progressing, {}, '2026-11-23T11:00:00Z')] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), undefined, { ok: false, verdicts: ['TIMEOUT', 'current'] }],
    ['halted by a wave gate', [listing('alpha', { [deployments('apps')]: [haltedDeployment], 'v1/Event/apps': [haltEvent] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), undefined, { ok: false, verdicts: ['HALTED', 'current'] }],
    ['a record above Vault is poisoned', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 999 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map([['secret/app/api', v(4)]]), undefined, { ok: false, verdicts: ['POISONED', 'current'] }],
    ['Vault unreadable: not reported safe', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map([['secret/app/api', { error: 'connection refused' }]]), undefined, { ok: false, verdicts: ['current', 'current'] }],
    ['a cluster that cannot be listed', [listing('alpha', { [deployments('apps')]: { error: 'forbidden' } }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), 'secret/app/api', { ok: false, verdicts: ['UNKNOWN', 'current'] }],
    ['a selector target: matched on the listed labels', [listing('alpha', { [deployments('edge')]: [deployment('edge', 'web', { 'secret/tls': 2 }, complete, { labels: { tls: 'shared' } }), deployment('edge', 'pg', undefined, complete, { labels: { tls: 'shared', tier: 'db' } }), deployment('edge', 'lb', undefined, complete, { labels: { tls: 'shared' } })] })], new Map(), 'secret/tls', { ok: false, verdicts: ['BEHIND', 'current'] }],
    ['--path names a path no cluster records: every target behind', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'new', undefined)] }), listing('beta', { [deployments('')]: [deployment('apps', 'new', undefined)] })], new Map([['secret/app/new', v(1)]]), 'secret/app/new', { ok: false, verdicts: ['BEHIND', 'BEHIND'] }],
    ['a workload recording a path no route targets any more: shown, not counted', [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }), deployment('apps', 'old', { 'secret/app/api': 1 })] }), listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] })], new Map(), 'secret/app/api', { ok: true, verdicts: ['current', 'BEHIND', 'current'] }],
  ];
  it.each(rows)('%s', (_name, listings, vault, path, expected) => {
    const status = fleetStatus(table, listings, vault, { now: NOW, ...(path ? { path } : {}) });
    const p = status.paths.find((x) => x.path === (path ?? 'secret/app/api'));
    expect(p, statusText(status)).toBeDefined();
    expect(status.ok).toBe(expected.ok);
    expect(p?.consumers.map((c) => statusText({ ...status, paths: [{ ...p, consumers: [c] }] }).split('\n')[2]?.split(/\s{2,}/)[4])).toEqual(expected.verdicts);
    if (expected.current !== undefined) expect(p?.current).toBe(expected.current);
  });

  it('says what to do about a poisoned record and that KV v1 has no versions', () => {
    const poisoned = fleetStatus(table, [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 999 })] })], new Map([['secret/app/api', { currentVersion: 4 }]]), { now: NOW, clusters: new Set(['alpha']) });
    expect(statusText(poisoned)).toContain('vault-rollout reset-version --path secret/app/api --version 4');
    const cron: KubeObject = { apiVersion: 'batch/v1', kind: 'CronJob', metadata: { namespace: 'batch', name: 'nightly', annotations: { 'vault-rollout.io/watch': 'legacy/batch/*' } }, spec: { jobTemplate: { spec: { template: { metadata: { annotations: { 'vault-rollout.io/versions': '{"legacy/batch/x":"2026-11-23T10:00:00Z"}' } } } } } } };
    const v1 = fleetStatus(table, [listing('alpha', { [listKey({ apiVersion: 'batch/v1', kind: 'CronJob', namespace: 'batch' })]: [cron] })], new Map(), { now: NOW, clusters: new Set(['alpha']) });
    expect(v1.paths[0]).toMatchObject({ path: 'legacy/batch/x', kvVersion: 1, ok: true });
    expect(statusText(v1)).toMatch(/KV v1 keeps no versions: status \(and reconcile\) cannot see/);
  });

  it('reports only routed paths, and only those --path selects', () => {
    const l = [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4, 'secret/unrouted': 1, 'secret/app/web': 2 })] })];
    expect(fleetStatus(table, l, new Map(), { now: NOW }).paths.map((p) => p.path)).toEqual(['secret/app/api', 'secret/app/web']);
    expect(fleetStatus(table, l, new Map(), { now: NOW, path: 'secret/app/w*' }).paths.map((p) => p.path)).toEqual(['secret/app/web']);
    expect(fleetStatus(table, l, new Map(), { now: NOW, maxPaths: 1 }).notes).toEqual(['1 more paths left out (at most 1; narrow with --path)']);
  });
});

describe('label selectors, matched on listed labels', () => {
  const rows: Array<[string, Record<string, string>, boolean]> = [
    ['app=web', { app: 'web' }, true],
    ['app==web', { app: 'api' }, false],
    ['app!=web', {}, true],
    ['tier in (a, b),app', { tier: 'b', app: 'x' }, true],
    ['tier notin (a,b)', { tier: 'a' }, false],
    ['!canary', { canary: 'yes' }, false],
    ['vault-rollout.io/tls=shared', { 'vault-rollout.io/tls': 'shared' }, true],
  ];
  it.each(rows)('%s on %j: %s', (selector, labels, expected) => {
    expect(selectorMatches(parseLabelSelector(selector), labels)).toBe(expected);
  });
  it('matches nothing when it cannot read the selector', () => {
    const s = parseLabelSelector('app in (a');
    expect('error' in s).toBe(true);
    expect(selectorMatches(s, { app: 'a' })).toBe(false);
  });
});
