import { describe, expect, it } from 'vitest';
import type { ClusterAccess } from '../../../lib/kube/cluster-access.ts';
import { FIELD_MANAGER, type KubeApi } from '../../../lib/kube/kube-api.ts';
import { parseLabelSelector, selectorMatches } from '../../../lib/workloads/label-selector.ts';
import { haltEventName, recordOnlyPatch } from '../../../lib/plan/restart-record.ts';
import { recordHalt } from '../../../lib/engine/rollout-executor.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { printable } from '../../../lib/report/printable.ts';
import {
  consumerVerdict,
  statusJson,
  statusJsonText,
  statusLines,
  statusText,
} from '../../../lib/report/status-report.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import {
  fleetStatus,
  listKey,
  listRequests,
  type ClusterListing,
  type VaultAnswer,
} from '../../../lib/status/fleet-status.ts';

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
const failed = {
  ...progressing,
  conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }],
};

function deployment(
  ns: string,
  name: string,
  versions: Record<string, number | string> | undefined,
  status: Record<string, unknown> = complete,
  meta: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
  restartedAt = '2026-11-23T11:58:00Z',
): KubeObject {
  const annotations = versions
    ? { 'vault-rollout.io/versions': JSON.stringify(versions), 'kubectl.kubernetes.io/restartedAt': restartedAt }
    : {};
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { namespace: ns, name, generation: 2, ...meta },
    spec: { replicas: 2, template: { metadata: { annotations } } },
    status,
  };
}

/** A workload restarted for `restarted`, with a key-level skip of `skippedAt` on its metadata (as the engine writes it). */
function skipped(restarted: number, skippedAt: number, confirmed: Record<string, number> = {}): KubeObject {
  const o = deployment('apps', 'api', { 'secret/app/api': restarted });
  const record = { 'secret/app/api': { v: skippedAt, skipped: ['password'] }, ...confirmed };
  return { ...o, metadata: { ...o.metadata, annotations: { 'vault-rollout.io/versions': JSON.stringify(record) } } };
}

const listing = (cluster: string, lists: Record<string, KubeObject[] | { error: string }>): ClusterListing => ({
  cluster,
  lists: new Map(Object.entries(lists)),
});
const deployments = (ns: string) => listKey({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: ns });
/** A workload whose restart a wave's gate halted: the RotationHalted Event named from its restart token. */
const haltedDeployment = deployment('apps', 'api', { 'secret/app/api': 4 });
(
  haltedDeployment.spec as { template: { metadata: { annotations: Record<string, string> } } }
).template.metadata.annotations['vault-rollout.io/restart-token'] = 'tok';
/** The halt Event as the executor writes it (recordHalt's fields; the test below checks recordHalt itself) and the API server stores it. */
const haltEvent = (change: Record<string, unknown> = {}): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Event',
    metadata: {
      namespace: 'apps',
      name: haltEventName('api', 'tok'),
      managedFields: [{ manager: 'vault-rollout', operation: 'Update' }],
    },
    involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'api', namespace: 'apps' },
    reason: 'RotationHalted',
    message: 'wave 1 failed',
    type: 'Warning',
    source: { component: 'vault-rollout' },
    reportingComponent: 'vault-rollout',
    reportingInstance: 'vault-rollout',
    ...change,
  }) as KubeObject;

describe('listRequests: one LIST per kind and namespace', () => {
  it('lists literal namespaces, a bound of names, and every namespace when the namespace comes from the path', () => {
    const lists = listRequests(table);
    expect(lists.get('alpha')?.map(listKey).sort()).toEqual([
      'apps/v1/Deployment/apps',
      'apps/v1/Deployment/edge',
      'apps/v1/ReplicaSet/apps',
      'apps/v1/ReplicaSet/edge',
      'batch/v1/CronJob/batch',
      'v1/Event/apps',
      'v1/Event/batch',
      'v1/Event/edge',
      'v1/Pod/apps?pod-template-hash',
      'v1/Pod/edge?pod-template-hash',
    ]);
    expect(lists.get('beta')?.map(listKey).sort()).toEqual([
      'apps/v1/ControllerRevision/blue',
      'apps/v1/ControllerRevision/red',
      'apps/v1/Deployment/',
      'apps/v1/ReplicaSet/',
      'apps/v1/StatefulSet/blue',
      'apps/v1/StatefulSet/red',
      'v1/Event/',
      'v1/Pod/?pod-template-hash',
      'v1/Pod/blue?controller-revision-hash',
      'v1/Pod/red?controller-revision-hash',
    ]);
    expect([...listRequests(table, new Set(['beta'])).keys()]).toEqual(['beta']);
  });
});

describe('fleetStatus', () => {
  type Row = [
    string,
    ClusterListing[],
    Map<string, VaultAnswer>,
    string | undefined,
    { ok: boolean; verdicts: string[]; current?: number | string | null },
  ];
  const v = (n: number): VaultAnswer => ({ currentVersion: n, createdTime: '2026-11-23T11:57:00.123456Z' });
  const rows: Row[] = [
    [
      'every consumer current and complete',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      undefined,
      { ok: true, verdicts: ['current', 'current'], current: 4 },
    ],
    [
      'one cluster behind Vault',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 3 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      'secret/app/api',
      { ok: false, verdicts: ['current', 'BEHIND'] },
    ],
    [
      'without Vault: the newest record is current',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 3 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['current', 'BEHIND'], current: 4 },
    ],
    [
      'a consumer never restarted is behind',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', undefined)] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['current', 'BEHIND'] },
    ],
    [
      'a failed rollout',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }, failed)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['FAILED', 'current'] },
    ],
    [
      'still rolling within its deadline',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 }, progressing)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['rolling', 'current'] },
    ],
    [
      'progressing past its deadline is a timeout',
      [
        listing('alpha', {
          [deployments('apps')]: [
            deployment('apps', 'api', { 'secret/app/api': 4 }, progressing, {}, '2026-11-23T11:00:00Z'),
          ],
        }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['TIMEOUT', 'current'] },
    ],
    [
      'halted by a wave gate',
      [
        listing('alpha', { [deployments('apps')]: [haltedDeployment], 'v1/Event/apps': [haltEvent()] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['HALTED', 'current'] },
    ],
    [
      'a record above Vault is poisoned',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 999 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      undefined,
      { ok: false, verdicts: ['POISONED', 'current'] },
    ],
    [
      'Vault unreadable: not reported safe',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', { error: 'connection refused' }]]),
      undefined,
      { ok: false, verdicts: ['current', 'current'] },
    ],
    [
      'a cluster that cannot be listed',
      [
        listing('alpha', { [deployments('apps')]: { error: 'forbidden' } }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      'secret/app/api',
      { ok: false, verdicts: ['UNKNOWN', 'current'] },
    ],
    [
      'a selector target: matched on the listed labels',
      [
        listing('alpha', {
          [deployments('edge')]: [
            deployment('edge', 'web', { 'secret/tls': 2 }, complete, { labels: { tls: 'shared' } }),
            deployment('edge', 'pg', undefined, complete, { labels: { tls: 'shared', tier: 'db' } }),
            deployment('edge', 'lb', undefined, complete, { labels: { tls: 'shared' } }),
          ],
        }),
      ],
      new Map(),
      'secret/tls',
      { ok: false, verdicts: ['BEHIND', 'current'] },
    ],
    [
      '--path names a path no cluster records: every target behind',
      [
        listing('alpha', { [deployments('apps')]: [deployment('apps', 'new', undefined)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'new', undefined)] }),
      ],
      new Map([['secret/app/new', v(1)]]),
      'secret/app/new',
      { ok: false, verdicts: ['BEHIND', 'BEHIND'] },
    ],
    [
      'a workload recording a path no route targets any more: shown, not counted',
      [
        listing('alpha', {
          [deployments('apps')]: [
            deployment('apps', 'api', { 'secret/app/api': 4 }),
            deployment('apps', 'old', { 'secret/app/api': 1 }),
          ],
        }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      'secret/app/api',
      { ok: true, verdicts: ['current', 'BEHIND', 'current'] },
    ],
    // A key-level skip claims version 4 changed none of the keys the workload uses: unverified, never safe to revoke.
    [
      'a key-level skip of the current version: unverified, not safe',
      [
        listing('alpha', { [deployments('apps')]: [skipped(3, 4)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      undefined,
      { ok: false, verdicts: ['skipped by keys (unverified)', 'current'] },
    ],
    [
      'a key-level skip without Vault: unverified too',
      [
        listing('alpha', { [deployments('apps')]: [skipped(3, 4)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map(),
      undefined,
      { ok: false, verdicts: ['skipped by keys (unverified)', 'current'] },
    ],
    [
      'a skip reconcile confirmed with Vault (the version recorded): current',
      [
        listing('alpha', { [deployments('apps')]: [skipped(3, 4, { 'secret/app/api': 4 })] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      undefined,
      { ok: true, verdicts: ['current', 'current'] },
    ],
    [
      "a skip of a version above Vault's current changes nothing the pods run",
      [
        listing('alpha', { [deployments('apps')]: [skipped(4, 5)] }),
        listing('beta', { [deployments('')]: [deployment('apps', 'api', { 'secret/app/api': 4 })] }),
      ],
      new Map([['secret/app/api', v(4)]]),
      undefined,
      { ok: true, verdicts: ['current', 'current'] },
    ],
  ];
  it.each(rows)('%s', (_name, listings, vault, path, expected) => {
    const status = fleetStatus(table, listings, vault, { now: NOW, ...(path ? { path } : {}) });
    const p = status.paths.find((x) => x.path === (path ?? 'secret/app/api'));
    expect(p, statusText(status)).toBeDefined();
    expect(status.ok).toBe(expected.ok);
    expect(
      p?.consumers.map(
        (c) =>
          statusText({ ...status, paths: [{ ...p, consumers: [c] }] })
            .split('\n')[2]
            ?.split(/\s{2,}/)[4],
      ),
    ).toEqual(expected.verdicts);
    if (expected.current !== undefined) expect(p?.current).toBe(expected.current);
  });

  it('says what to do about a poisoned record and that KV v1 has no versions', () => {
    const poisoned = fleetStatus(
      table,
      [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { 'secret/app/api': 999 })] })],
      new Map([['secret/app/api', { currentVersion: 4 }]]),
      { now: NOW, clusters: new Set(['alpha']) },
    );
    expect(statusText(poisoned)).toContain('vault-rollout reset-version --path secret/app/api --version 4');
    // A tenant writes the record key: the repair carries it as one shell-quoted word.
    const hostile = 'secret/app/x$(touch pwned)';
    const quoted = fleetStatus(
      table,
      [listing('alpha', { [deployments('apps')]: [deployment('apps', 'api', { [hostile]: 999 })] })],
      new Map([[hostile, { currentVersion: 4 }]]),
      { now: NOW, clusters: new Set(['alpha']) },
    );
    expect(quoted.paths[0]?.consumers[0]?.detail).toContain(
      `repair with vault-rollout reset-version --path 'secret/app/x$(touch pwned)' --version 4`,
    );
    const cron: KubeObject = {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { namespace: 'batch', name: 'nightly', annotations: { 'vault-rollout.io/watch': 'legacy/batch/*' } },
      spec: {
        jobTemplate: {
          spec: {
            template: {
              metadata: { annotations: { 'vault-rollout.io/versions': '{"legacy/batch/x":"2026-11-23T10:00:00Z"}' } },
            },
          },
        },
      },
    };
    const v1 = fleetStatus(
      table,
      [listing('alpha', { [listKey({ apiVersion: 'batch/v1', kind: 'CronJob', namespace: 'batch' })]: [cron] })],
      new Map(),
      { now: NOW, clusters: new Set(['alpha']) },
    );
    expect(v1.paths[0]).toMatchObject({ path: 'legacy/batch/x', kvVersion: 1, ok: true });
    expect(statusText(v1)).toMatch(/KV v1 keeps no versions: status \(and reconcile\) cannot see/);
  });

  it('reports only routed paths, and only those --path selects', () => {
    const l = [
      listing('alpha', {
        [deployments('apps')]: [
          deployment('apps', 'api', { 'secret/app/api': 4, 'secret/unrouted': 1, 'secret/app/web': 2 }),
        ],
      }),
    ];
    expect(fleetStatus(table, l, new Map(), { now: NOW }).paths.map((p) => p.path)).toEqual([
      'secret/app/api',
      'secret/app/web',
    ]);
    expect(fleetStatus(table, l, new Map(), { now: NOW, path: 'secret/app/w*' }).paths.map((p) => p.path)).toEqual([
      'secret/app/web',
    ]);
    expect(fleetStatus(table, l, new Map(), { now: NOW, maxPaths: 1 }).notes).toEqual([
      '1 more paths left out (at most 1; narrow with --path)',
    ]);
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

/** The paths status asks Vault about come from the record vault-rollout writes, and are Vault paths. */
describe('record keys: only from the record, only Vault paths', () => {
  const wide = loadRoutingTable(`
clusters:
  alpha: { kubeconfig: { file: a } }
vault:
  mounts: { kv: 2 }
routes:
  - name: app
    match: { path: "kv/app/**" }
    targets: [{ clusters: [alpha], namespace: apps, kind: Deployment, name: app }]
`);
  const app = (
    template: Record<string, number> | undefined,
    metadata?: Record<string, number>,
    extra: Record<string, unknown> = {},
  ): KubeObject => {
    const d = deployment('apps', 'app', template);
    if (metadata)
      d.metadata = { ...d.metadata, annotations: { 'vault-rollout.io/versions': JSON.stringify(metadata) } };
    Object.assign(d.spec as object, extra);
    return d;
  };
  const event: KubeObject = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { namespace: 'apps', name: 'x', annotations: { 'vault-rollout.io/versions': '{"kv/app/from-event":1}' } },
  };
  type Row = [string, KubeObject[], string[], RegExp | undefined];
  const rows: Row[] = [
    [
      'a ".." key in the pod template record: refused, the others asked',
      [app({ 'kv/app/../../data/db': 1, 'kv/app/ok': 1 })],
      ['kv/app/ok'],
      /ignored 1 recorded key\(s\) that are no Vault path, e\.g\. "kv\/app\/\.\.\/\.\.\/data\/db": it has a "\.\." segment/,
    ],
    [
      'a ".." key in the metadata record (reconcile\'s place): refused',
      [app(undefined, { 'kv/app/../../sys/mounts': 1 })],
      [],
      /it has a "\.\." segment/,
    ],
    [
      '".", empty and control-character segments: refused',
      [app({ 'kv/app/./x': 1, 'kv/app//x': 1, 'kv/app/x\u001b[2J': 1, 'kv/app/x/': 1 })],
      [],
      /ignored 4 recorded key\(s\)/,
    ],
    ["an Event's annotation is no record", [], [], undefined],
    [
      'a jobTemplate on a Deployment is no record (only a CronJob keeps it there)',
      [
        app(undefined, undefined, {
          jobTemplate: {
            spec: { template: { metadata: { annotations: { 'vault-rollout.io/versions': '{"kv/app/job":1}' } } } },
          },
        }),
      ],
      [],
      undefined,
    ],
    [
      'the metadata record (reconcile) names paths like the template record',
      [app({ 'kv/app/a': 1 }, { 'kv/app/b': 2 })],
      ['kv/app/a', 'kv/app/b'],
      undefined,
    ],
  ];
  it.each(rows)('%s', (_what, objects, paths, note) => {
    const status = fleetStatus(
      wide,
      [listing('alpha', { [deployments('apps')]: objects, 'v1/Event/apps': [event] })],
      new Map(),
      { now: NOW },
    );
    expect(status.paths.map((p) => p.path)).toEqual(paths);
    if (note) expect(status.notes.join('\n')).toMatch(note);
    else expect(status.notes).toEqual([]);
    // Whatever the keys, no path status would send to Vault leaves the route's folder.
    for (const p of status.paths) expect(`${p.mount}/${p.key}`).toMatch(/^kv\/app\/[^/.][^/]*(\/[^/.][^/]*)*$/);
  });
});

/** A workload reconcile recorded without a restart (its metadata record) is current, and status is ok. */
describe('the record reconcile writes without a restart counts in status', () => {
  /** The object after reconcile's patch: recordOnlyPatch merged into its metadata, as the API server applies it. */
  const reconciled = (template: Record<string, number> | undefined, recorded: Record<string, number>): KubeObject => {
    const d = deployment('apps', 'api', template);
    const patch = recordOnlyPatch(recorded) as { metadata: { annotations: Record<string, string> } };
    d.metadata = { ...d.metadata, annotations: { ...d.metadata?.annotations, ...patch.metadata.annotations } };
    return d;
  };
  it.each<[string, string, KubeObject]>([
    [
      'restarted for 3, pods already on 4 (recorded by reconcile)',
      'current',
      reconciled({ 'secret/app/api': 3 }, { 'secret/app/api': 4 }),
    ],
    [
      'never restarted, pods already on 4 (recorded by reconcile)',
      'current',
      reconciled(undefined, { 'secret/app/api': 4 }),
    ],
    [
      'a metadata record older than the restart: the restart counts',
      'current',
      reconciled({ 'secret/app/api': 4 }, { 'secret/app/api': 2 }),
    ],
    ['reconcile recorded 3, Vault is at 4: still behind', 'BEHIND', reconciled(undefined, { 'secret/app/api': 3 })],
  ])('%s: %s', (_what, verdict, obj) => {
    const status = fleetStatus(
      table,
      [listing('alpha', { [deployments('apps')]: [obj] })],
      new Map([['secret/app/api', { currentVersion: 4 }]]),
      { now: NOW, clusters: new Set(['alpha']) },
    );
    const p = status.paths.find((x) => x.path === 'secret/app/api');
    expect(p?.consumers.map(consumerVerdict)).toEqual([verdict]);
    // `status` exits 0 exactly when ok (lib/cli/status-command.ts).
    expect(status.ok).toBe(verdict === 'current');
  });
});

/** Only vault-rollout's own RotationHalted Event halts a workload in status. */
describe("halt Events: only vault-rollout's count", () => {
  const halted = (event: KubeObject) =>
    fleetStatus(
      table,
      [listing('alpha', { [deployments('apps')]: [haltedDeployment], 'v1/Event/apps': [event] })],
      new Map(),
      { now: NOW, clusters: new Set(['alpha']) },
    );
  it.each<[string, string, KubeObject]>([
    ["vault-rollout's Event", 'HALTED', haltEvent()],
    [
      'a look-alike with the name and reason only',
      'current',
      {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { namespace: 'apps', name: haltEventName('api', 'tok') },
        reason: 'RotationHalted',
        message: 'forged',
      } as KubeObject,
    ],
    ['source.component alone', 'current', haltEvent({ reportingComponent: '', reportingInstance: '' })],
    [
      'every identity field, created by another field manager (kubectl create)',
      'current',
      haltEvent({
        metadata: {
          namespace: 'apps',
          name: haltEventName('api', 'tok'),
          managedFields: [{ manager: 'kubectl-create', operation: 'Update' }],
        },
      }),
    ],
    [
      "vault-rollout's fields, about another workload",
      'current',
      haltEvent({ involvedObject: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'other', namespace: 'apps' } }),
    ],
  ])('%s: %s', (_what, verdict, event) => {
    const status = halted(event);
    expect(status.paths[0]?.consumers.map(consumerVerdict)).toEqual([verdict]);
    expect(status.ok).toBe(verdict === 'current');
  });

  it('the Event recordHalt creates (and the API server stores with its field manager) is one', async () => {
    const created: Array<Record<string, unknown>> = [];
    const api = {
      create: (body: Record<string, unknown>) => (created.push(body), Promise.resolve(body)),
    } as unknown as KubeApi;
    const target = planRollouts(table, [
      {
        namespace: '',
        mount: 'secret',
        key: 'app/api',
        path: 'secret/app/api',
        operation: 'write',
        version: 4,
        kvVersion: 2,
        kvVersionFrom: 'routes',
        source: 'audit',
        via: 'direct',
        id: 'x',
        time: '2026-11-23T11:00:00Z',
        record: 'x',
      },
    ]).targets.find((t) => t.cluster === 'alpha');
    if (!target) throw new Error('no target');
    await recordHalt(
      table,
      { ...target, restartToken: 'tok' },
      'api',
      { access: () => Promise.resolve({} as ClusterAccess), apiFor: () => api },
      'wave 1 failed',
    );
    expect(created).toHaveLength(1);
    const stored = {
      ...created[0],
      metadata: {
        ...(created[0]?.metadata as object),
        managedFields: [{ manager: FIELD_MANAGER, operation: 'Update' }],
      },
    } as KubeObject;
    expect(halted(stored).paths[0]?.consumers.map(consumerVerdict)).toEqual(['HALTED']);
  });
});

/** What status prints from objects tenants write is escaped, in the table, the plain lines and --json. */
describe('status output escapes control characters', () => {
  const evil = '\u001b[2J\u001b]0;owned\u0007\u009b31m\u202eevil\nfake row';
  const cron: KubeObject = {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { namespace: 'batch', name: 'nightly', annotations: { 'vault-rollout.io/watch': 'legacy/batch/*' } },
    spec: {
      jobTemplate: {
        spec: {
          template: {
            metadata: {
              annotations: {
                'vault-rollout.io/restart-token': 'tok',
                'vault-rollout.io/versions': JSON.stringify({ 'legacy/batch/x': `2026-11-23T10:00:00Z${evil}` }),
              },
            },
          },
        },
      },
    },
  };
  const event = {
    ...haltEvent({ message: `halted ${evil}`, involvedObject: { kind: 'CronJob', name: 'nightly' } }),
    metadata: {
      namespace: 'batch',
      name: haltEventName('nightly', 'tok'),
      managedFields: [{ manager: 'vault-rollout' }],
    },
  } as KubeObject;
  const status = fleetStatus(
    table,
    [
      listing('alpha', {
        [listKey({ apiVersion: 'batch/v1', kind: 'CronJob', namespace: 'batch' })]: [cron],
        'v1/Event/batch': [event],
      }),
    ],
    new Map(),
    { now: NOW, clusters: new Set(['alpha']) },
  );
  /** Any control character (C0, DEL, C1) or the override, but the newlines that end lines. */
  const unsafe = /[^\P{Cc}\n]|\u202e/u;

  it('shows the halt (the fixture is read) and prints every control character as an escape', () => {
    expect(status.paths[0]?.consumers[0]?.halted).toContain('\u001b[2J');
    const text = statusText(status);
    expect(text).not.toMatch(unsafe);
    expect(text).toContain('\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202eevil\\x0afake row');
    // One line per consumer: the newline in the value forged no row.
    expect(text.split('\n').filter((l) => l.includes('nightly'))).toHaveLength(1);
    expect(statusLines(status, new Map())).not.toMatch(unsafe);
  });

  it('--json: the same value, every unsafe character escaped', () => {
    const text = statusJsonText(status);
    expect(text).not.toMatch(unsafe);
    expect(JSON.parse(text)).toEqual(statusJson(status));
  });

  it.each<[string, string]>([
    ['plain text', 'plain text'],
    ['\u001b[31mred', '\\x1b[31mred'],
    ['a\u0000b\u007f', 'a\\x00b\\x7f'],
    ['\u009b6n', '\\x9b6n'],
    ['\u2066isolate\u2069 \u2028', '\\u2066isolate\\u2069 \\u2028'],
    ['ünïcödé ✓', 'ünïcödé ✓'],
  ])('printable(%j) = %j', (raw, shown) => {
    expect(printable(raw)).toBe(shown);
  });
});
