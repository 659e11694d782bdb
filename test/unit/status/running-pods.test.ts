// "Safe to revoke" counted in pods: each kind's pods found through their controller's revision, older ones counted,
// and a consumer whose workload says complete (or, OnDelete, nothing to wait for) is never ok while one runs.
import { describe, expect, it } from 'vitest';
import { consumerVerdict, statusText } from '../../../lib/report/status-report.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { fleetStatus, listKey, type ClusterListing } from '../../../lib/status/fleet-status.ts';
import { POD_LISTS } from '../../../lib/status/pod-lists.ts';
import { runningPods } from '../../../lib/status/running-pods.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../../lib/workloads/workload-kinds.ts';

const PATH = 'secret/app/db';
const versions = (v: number) => ({ 'vault-rollout.io/versions': JSON.stringify({ [PATH]: v }) });
const owner = (kind: string, name: string) => [{ kind, name, uid: `uid-${name}`, controller: true }];
const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  namespace: 'apps',
  uid: `uid-${name}`,
  ...extra,
});

const deployment = (v: number, status: Record<string, unknown>): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { ...meta('api'), generation: 2 },
  spec: { replicas: 2, template: { metadata: { annotations: versions(v) } } },
  status: { observedGeneration: 2, ...status },
});
const replicaSet = (name: string, v: number | undefined): KubeObject =>
  ({
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: meta(name, { ownerReferences: owner('Deployment', 'api') }),
    spec: { template: { metadata: { annotations: v === undefined ? {} : versions(v) } } },
  }) as KubeObject;
const pod = (name: string, ownerKind: string, ownerName: string, labels: Record<string, string>, extra = {}) =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta(name, { ownerReferences: owner(ownerKind, ownerName), labels, ...extra }),
    status: { phase: 'Running' },
  }) as KubeObject;

function listing(lists: Array<[Record<string, string>, KubeObject[] | { error: string }]>): ClusterListing {
  return {
    cluster: 'alpha',
    lists: new Map(
      lists.map(([r, objects]) => [
        listKey({ apiVersion: r.apiVersion ?? '', kind: r.kind ?? '', namespace: 'apps', ...r }),
        objects,
      ]),
    ),
  };
}

const complete = { replicas: 2, updatedReplicas: 2, availableReplicas: 2 };

describe('runningPods', () => {
  it('a Deployment: pods of the ReplicaSet that records the version, and of an older one (stuck terminating)', () => {
    const d = deployment(3, complete);
    const l = listing([
      [POD_LISTS.replicaSets, [replicaSet('api-new', 3), replicaSet('api-old', 2)]],
      [
        POD_LISTS.podsOfReplicaSets,
        [
          pod('a', 'ReplicaSet', 'api-new', { 'pod-template-hash': 'new' }),
          pod('b', 'ReplicaSet', 'api-new', { 'pod-template-hash': 'new' }),
          pod(
            'c',
            'ReplicaSet',
            'api-old',
            { 'pod-template-hash': 'old' },
            { deletionTimestamp: '2026-01-01T00:00:00Z' },
          ),
          pod('d', 'ReplicaSet', 'other-rs', { 'pod-template-hash': 'x' }),
          { ...pod('e', 'ReplicaSet', 'api-old', { 'pod-template-hash': 'old' }), status: { phase: 'Succeeded' } },
        ],
      ],
    ]);
    expect(runningPods(WORKLOAD_KINDS.Deployment, d, l, PATH)).toEqual({ onRecorded: 2, older: 1 });
  });

  it('a StatefulSet with OnDelete: the pod of the old ControllerRevision is older; unknown revisions too', () => {
    const sts: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: meta('db'),
      spec: { updateStrategy: { type: 'OnDelete' }, template: { metadata: { annotations: versions(5) } } },
    };
    const revision = (name: string, v: number) =>
      ({
        apiVersion: 'apps/v1',
        kind: 'ControllerRevision',
        metadata: meta(name, { ownerReferences: owner('StatefulSet', 'db') }),
        data: { spec: { template: { metadata: { annotations: versions(v) } } } },
      }) as KubeObject;
    const l = listing([
      [POD_LISTS.revisions, [revision('db-new', 5), revision('db-old', 4)]],
      [
        POD_LISTS.podsOfRevisions,
        [
          pod('db-0', 'StatefulSet', 'db', { 'controller-revision-hash': 'db-new' }),
          pod('db-1', 'StatefulSet', 'db', { 'controller-revision-hash': 'db-old' }),
          pod('db-2', 'StatefulSet', 'db', { 'controller-revision-hash': 'db-gone' }),
        ],
      ],
    ]);
    expect(runningPods(WORKLOAD_KINDS.StatefulSet, sts, l, PATH)).toEqual({ onRecorded: 1, older: 2 });
  });

  it('an Argo Rollout restarted by restartAt: pods created before it are older', () => {
    const rollout: KubeObject = {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Rollout',
      metadata: { ...meta('web'), annotations: versions(2) },
      spec: { restartAt: '2026-11-23T12:00:00.500Z', template: {} },
    };
    const rs = {
      ...replicaSet('web-1', undefined),
      metadata: meta('web-1', { ownerReferences: owner('Rollout', 'web') }),
    };
    const at = (name: string, t: string) =>
      pod(name, 'ReplicaSet', 'web-1', { 'rollouts-pod-template-hash': '1' }, { creationTimestamp: t });
    const l = listing([
      [POD_LISTS.replicaSets, [rs as KubeObject]],
      [POD_LISTS.podsOfRollouts, [at('old', '2026-11-23T11:59:59Z'), at('new', '2026-11-23T12:00:00Z')]],
    ]);
    expect(runningPods(WORKLOAD_KINDS.Rollout, rollout, l, PATH)).toEqual({ onRecorded: 1, older: 1 });
  });

  it('not listed: not counted; a LIST that failed: unread; a CronJob: no pods of its own', () => {
    const d = deployment(3, complete);
    expect(runningPods(WORKLOAD_KINDS.Deployment, d, listing([]), PATH)).toBeUndefined();
    const denied = listing([
      [POD_LISTS.replicaSets, []],
      [POD_LISTS.podsOfReplicaSets, { error: 'LIST Pod in apps: forbidden' }],
    ]);
    expect(runningPods(WORKLOAD_KINDS.Deployment, d, denied, PATH)).toEqual({
      onRecorded: 0,
      older: 0,
      unread: 'LIST Pod in apps: forbidden',
    });
    expect(runningPods(WORKLOAD_KINDS.CronJob, { kind: 'CronJob', metadata: meta('c') }, denied, PATH)).toBeUndefined();
  });
});

describe('status: older pods are never safe to revoke', () => {
  const table = loadRoutingTable(`
clusters:
  alpha: { kubeconfig: { file: a } }
routes:
  - name: db
    match: { path: "${PATH}" }
    targets: [{ clusters: [alpha], namespace: apps, kind: Deployment, name: api }]
`);
  const statusWith = (oldPod: boolean) =>
    fleetStatus(
      table,
      [
        listing([
          [{ apiVersion: 'apps/v1', kind: 'Deployment' }, [deployment(3, complete)]],
          [POD_LISTS.replicaSets, [replicaSet('api-new', 3), replicaSet('api-old', 2)]],
          [
            POD_LISTS.podsOfReplicaSets,
            [
              pod('a', 'ReplicaSet', 'api-new', {}),
              ...(oldPod ? [pod('c', 'ReplicaSet', 'api-old', {}, { deletionTimestamp: '2026-01-01T00:00:00Z' })] : []),
            ],
          ],
        ]),
      ],
      new Map([[PATH, { currentVersion: 3 }]]),
      { now: Date.now() },
    );

  it('a complete Deployment with an old pod still terminating: OLD PODS, not ok; without it: ok', () => {
    const held = statusWith(true);
    const consumer = held.paths[0]?.consumers[0];
    expect(consumer).toMatchObject({
      rollout: 'complete',
      state: 'current',
      ok: false,
      runningPods: { onRecorded: 1, older: 1 },
    });
    expect(consumerVerdict(consumer!)).toBe('OLD PODS');
    expect(held.ok).toBe(false);
    expect(statusText(held)).toMatch(/OLD PODS\s+complete\s+2\/2\s+1\/1\s+1 pod\(s\) still run an older template/);
    expect(statusWith(false).ok).toBe(true);
  });
});
