// Proves that the test clusters run pods: kube-scheduler places them on three
// kwok-simulated nodes per cluster, kwok plays the kubelet (IP, Running, Ready,
// deletion, Job completion) following test/clusters/kwok-stages.yaml, and the
// real controllers roll Deployments, StatefulSets and DaemonSets and run Jobs.
// The readiness conventions (pod template annotation
// vault-rollout.test/readiness: absent / "slow" / "never") are those of
// test/clusters/README.md. Talks to the API servers with node:https only.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  ARGO_CLUSTER,
  ARGO_NAMESPACE,
  NODE_NAMES,
  REAL_NODE_CLUSTER,
  REAL_NODE_ENABLED,
} from '../clusters/clusters.ts';
import { clusterClient, loadClusters, waitFor, type KubeClient, type KubeResponse } from '../clusters/kube-http.ts';
import { REAL_NODE_NAME } from '../clusters/real-node.ts';

const { clusters } = loadClusters();
const NS = `vr-nodes-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
const SLOW = { timeout: 120_000 };
const READINESS = 'vault-rollout.test/readiness';
const RESTARTED_AT = 'vault-rollout.io/restartedAt';

interface Condition {
  type: string;
  status: string;
  reason?: string;
  lastTransitionTime?: string;
}
interface Meta {
  name: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
  ownerReferences?: { kind: string; name: string; uid: string }[];
}
interface Pod {
  metadata: Meta;
  spec: { nodeName?: string };
  status: { phase?: string; podIP?: string; hostIP?: string; startTime?: string; conditions?: Condition[] };
}
interface Node {
  metadata: Meta;
  status: { conditions?: Condition[]; allocatable?: Record<string, string> };
}
interface Workload {
  metadata: Meta & { generation?: number };
  spec: { template: { metadata?: { annotations?: Record<string, string> } } };
  status?: Record<string, unknown> & { conditions?: Condition[]; observedGeneration?: number };
}
interface List<T> {
  items: T[];
}

function expectStatus(res: KubeResponse, ...codes: number[]): void {
  expect(codes, `HTTP ${res.status}: ${res.text.slice(0, 500)}`).toContain(res.status);
}

async function create(kube: KubeClient, path: string, body: unknown): Promise<void> {
  expectStatus(await kube.request('POST', path, { body }), 201);
}

async function podsOf(kube: KubeClient, app: string): Promise<Pod[]> {
  const res = await kube.request<List<Pod>>(
    'GET',
    `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(`app=${app}`)}`,
  );
  expectStatus(res, 200);
  return res.body.items;
}

const condition = (obj: { status?: { conditions?: Condition[] } | undefined }, type: string): Condition | undefined =>
  (obj.status?.conditions ?? []).find((c) => c.type === type);
const isReady = (obj: { status?: { conditions?: Condition[] } }): boolean => condition(obj, 'Ready')?.status === 'True';
const runningReady = (p: Pod): boolean =>
  p.status.phase === 'Running' && isReady(p) && p.metadata.deletionTimestamp === undefined;

function podTemplate(app: string, annotations: Record<string, string> = {}) {
  return {
    metadata: { labels: { app }, annotations },
    spec: { containers: [{ name: 'app', image: 'registry.invalid/vault-rollout/demo:1' }] },
  };
}

function deployment(
  name: string,
  replicas: number,
  annotations: Record<string, string> = {},
  extra: Record<string, unknown> = {},
) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas, selector: { matchLabels: { app: name } }, template: podTemplate(name, annotations), ...extra },
  };
}

const restartPatch = (at: string) => ({ spec: { template: { metadata: { annotations: { [RESTARTED_AT]: at } } } } });

async function patchTemplate(kube: KubeClient, path: string, at: string): Promise<void> {
  expectStatus(
    await kube.request('PATCH', path, {
      body: restartPatch(at),
      contentType: 'application/strategic-merge-patch+json',
    }),
    200,
  );
}

beforeAll(async () => {
  await Promise.all(
    clusters.map(async (c) => {
      const admin = clusterClient(c, 'admin');
      await create(admin, '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
      // The ServiceAccount admission plugin refuses pods until `default` exists.
      await waitFor(
        async () => (await admin.request('GET', `/api/v1/namespaces/${NS}/serviceaccounts/default`)).status === 200,
        { timeoutMs: 60_000, what: `${c.name}: ServiceAccount ${NS}/default` },
      );
    }),
  );
}, 90_000);

afterAll(async () => {
  await Promise.all(
    clusters.map((c) =>
      clusterClient(c, 'admin')
        .request('DELETE', `/api/v1/namespaces/${NS}`)
        .catch(() => undefined),
    ),
  );
});

for (const c of clusters) {
  describe(`cluster ${c.name}`, () => {
    const admin = clusterClient(c, 'admin');

    it(`has ${NODE_NAMES.length} Ready nodes managed by kwok (and alpha its real node)`, async () => {
      const res = await admin.request<List<Node>>('GET', '/api/v1/nodes');
      expectStatus(res, 200);
      const real = REAL_NODE_ENABLED && c.name === REAL_NODE_CLUSTER ? [REAL_NODE_NAME] : [];
      expect(res.body.items.map((n) => n.metadata.name).sort()).toEqual([...NODE_NAMES, ...real]);
      for (const n of res.body.items.filter((x) => !real.includes(x.metadata.name))) {
        expect(isReady(n), n.metadata.name).toBe(true);
        expect(n.metadata.annotations?.['kwok.x-k8s.io/node']).toBe('fake');
        expect(Number(n.status.allocatable?.pods)).toBeGreaterThan(0);
      }
    });

    it(
      'runs a 3-replica Deployment on the nodes, then rolls it to 3 new Ready pods and no old ones',
      SLOW,
      async () => {
        const name = 'web';
        const path = `/apis/apps/v1/namespaces/${NS}/deployments/${name}`;
        await create(admin, `/apis/apps/v1/namespaces/${NS}/deployments`, deployment(name, 3));

        const first = await waitFor(
          async () => {
            const pods = await podsOf(admin, name);
            return pods.length === 3 && pods.every(runningReady) ? pods : undefined;
          },
          { timeoutMs: 60_000, what: `${c.name}: 3 Running and Ready pods of ${name}` },
        );
        for (const p of first) {
          expect(NODE_NAMES as readonly string[]).toContain(p.spec.nodeName);
          expect(p.status.podIP).toMatch(/^10\.244\.\d+\.\d+$/);
          expect(p.status.hostIP).toMatch(/^10\.255\.0\.[1-3]$/);
        }
        expect(new Set(first.map((p) => p.status.podIP)).size).toBe(3);

        const at = new Date().toISOString();
        await patchTemplate(admin, path, at);
        const rolled = await waitFor(
          async () => {
            const pods = await podsOf(admin, name);
            const fresh = pods.filter((p) => p.metadata.annotations?.[RESTARTED_AT] === at);
            return pods.length === 3 && fresh.length === 3 && fresh.every(runningReady) ? pods : undefined;
          },
          { timeoutMs: 60_000, what: `${c.name}: 3 new Ready pods and no old pod of ${name}` },
        );
        const oldUids = new Set(first.map((p) => p.metadata.uid));
        expect(rolled.filter((p) => oldUids.has(p.metadata.uid))).toEqual([]);

        const dep = await waitFor(
          async () => {
            const d = (await admin.request<Workload>('GET', path)).body;
            return d.status?.observedGeneration === d.metadata.generation &&
              d.status?.updatedReplicas === 3 &&
              d.status?.availableReplicas === 3 &&
              d.status?.replicas === 3
              ? d
              : undefined;
          },
          { timeoutMs: 30_000, what: `${c.name}: ${name} status complete` },
        );
        expect(condition(dep, 'Progressing')?.reason).toBe('NewReplicaSetAvailable');
      },
    );
  });
}

// The remaining kinds and conventions on one cluster (the machinery is the same in all three).
describe(`workloads on ${clusters[0]?.name ?? 'alpha'}`, () => {
  const c = clusters[0];
  if (c === undefined) throw new Error('no cluster in clusters.json');
  const admin = clusterClient(c, 'admin');

  it.concurrent('"slow": Ready 10 s after the pod started', SLOW, async () => {
    const name = 'slow';
    await create(admin, `/apis/apps/v1/namespaces/${NS}/deployments`, deployment(name, 1, { [READINESS]: 'slow' }));
    const notYet = await waitFor(
      async () => {
        const pods = await podsOf(admin, name);
        return pods[0]?.status.phase === 'Running' ? pods[0] : undefined;
      },
      { timeoutMs: 30_000, what: 'the slow pod Running' },
    );
    expect(isReady(notYet)).toBe(false);
    const ready = await waitFor(
      async () => {
        const pods = await podsOf(admin, name);
        return pods[0] && isReady(pods[0]) ? pods[0] : undefined;
      },
      { timeoutMs: 60_000, what: 'the slow pod Ready' },
    );
    // Whole-second timestamps: a 10 s delay shows as 9 to 11 s.
    const started = Date.parse(ready.status.startTime ?? '');
    const readyAt = Date.parse(condition(ready, 'Ready')?.lastTransitionTime ?? '');
    expect((readyAt - started) / 1000).toBeGreaterThanOrEqual(9);
  });

  it.concurrent('"never": Running, never Ready; the Deployment reaches ProgressDeadlineExceeded', SLOW, async () => {
    const name = 'never';
    const path = `/apis/apps/v1/namespaces/${NS}/deployments/${name}`;
    await create(
      admin,
      `/apis/apps/v1/namespaces/${NS}/deployments`,
      deployment(name, 2, { [READINESS]: 'never' }, { progressDeadlineSeconds: 10 }),
    );
    const progressing = await waitFor(
      async () => {
        const d = (await admin.request<Workload>('GET', path)).body;
        const p = condition(d, 'Progressing');
        return p?.status === 'False' ? p : undefined;
      },
      { timeoutMs: 60_000, what: `${name}: Progressing False` },
    );
    expect(progressing.reason).toBe('ProgressDeadlineExceeded');
    const pods = await podsOf(admin, name);
    expect(pods).toHaveLength(2);
    for (const p of pods) {
      expect(p.status.phase).toBe('Running');
      expect(isReady(p)).toBe(false);
      expect(p.status.podIP).toBeTruthy();
    }
  });

  it.concurrent('rolls a 3-replica StatefulSet', SLOW, async () => {
    const name = 'db';
    const path = `/apis/apps/v1/namespaces/${NS}/statefulsets/${name}`;
    await create(admin, `/apis/apps/v1/namespaces/${NS}/statefulsets`, {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name },
      spec: { replicas: 3, serviceName: name, selector: { matchLabels: { app: name } }, template: podTemplate(name) },
    });
    const settled = async (): Promise<Workload | undefined> => {
      const s = (await admin.request<Workload>('GET', path)).body;
      const st = s.status ?? {};
      return st.observedGeneration === s.metadata.generation &&
        st.readyReplicas === 3 &&
        st.updatedReplicas === 3 &&
        st.updateRevision !== undefined &&
        st.updateRevision === st.currentRevision
        ? s
        : undefined;
    };
    const before = await waitFor(settled, { timeoutMs: 60_000, what: `${name}: 3 Ready replicas` });
    const firstPods = await podsOf(admin, name);
    expect(firstPods.map((p) => p.metadata.name).sort()).toEqual(['db-0', 'db-1', 'db-2']);

    const at = new Date().toISOString();
    await patchTemplate(admin, path, at);
    const after = await waitFor(
      async () => {
        const s = await settled();
        return s && s.status?.updateRevision !== before.status?.updateRevision ? s : undefined;
      },
      { timeoutMs: 60_000, what: `${name}: rolled to a new revision` },
    );
    const pods = await podsOf(admin, name);
    expect(pods).toHaveLength(3);
    for (const p of pods) {
      expect(runningReady(p)).toBe(true);
      expect(p.metadata.labels?.['controller-revision-hash']).toBe(after.status?.updateRevision);
      expect(firstPods.some((old) => old.metadata.uid === p.metadata.uid)).toBe(false);
    }
  });

  it.concurrent('runs one DaemonSet pod per node and rolls them', SLOW, async () => {
    const name = 'agent';
    const path = `/apis/apps/v1/namespaces/${NS}/daemonsets/${name}`;
    await create(admin, `/apis/apps/v1/namespaces/${NS}/daemonsets`, {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name },
      spec: { selector: { matchLabels: { app: name } }, template: podTemplate(name) },
    });
    const complete = async (): Promise<Workload | undefined> => {
      const d = (await admin.request<Workload>('GET', path)).body;
      const st = d.status ?? {};
      return st.observedGeneration === d.metadata.generation &&
        st.desiredNumberScheduled === 3 &&
        st.updatedNumberScheduled === 3 &&
        st.numberAvailable === 3
        ? d
        : undefined;
    };
    await waitFor(complete, { timeoutMs: 60_000, what: `${name}: 3 available pods` });
    const pods = await podsOf(admin, name);
    expect(pods.map((p) => p.spec.nodeName).sort()).toEqual([...NODE_NAMES]);

    const at = new Date().toISOString();
    await patchTemplate(admin, path, at);
    await waitFor(
      async () => {
        const pods2 = await podsOf(admin, name);
        return (
          pods2.length === 3 &&
          pods2.every((p) => runningReady(p) && p.metadata.annotations?.[RESTARTED_AT] === at) &&
          (await complete()) !== undefined
        );
      },
      { timeoutMs: 60_000, what: `${name}: rolled, one new pod per node` },
    );
  });

  it.concurrent("completes a Job made from a CronJob's template", SLOW, async () => {
    const name = 'nightly';
    const cronJob = {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { name },
      spec: {
        schedule: '0 3 * * *',
        suspend: true, // only the Job below runs
        jobTemplate: {
          spec: {
            ttlSecondsAfterFinished: 600,
            template: { ...podTemplate(name), spec: { ...podTemplate(name).spec, restartPolicy: 'Never' } },
          },
        },
      },
    };
    await create(admin, `/apis/batch/v1/namespaces/${NS}/cronjobs`, cronJob);
    const cj = (
      await admin.request<Workload & { spec: { jobTemplate: { spec: unknown } } }>(
        'GET',
        `/apis/batch/v1/namespaces/${NS}/cronjobs/${name}`,
      )
    ).body;
    // As `kubectl create job --from=cronjob/nightly` does.
    await create(admin, `/apis/batch/v1/namespaces/${NS}/jobs`, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: `${name}-manual`,
        annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' },
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name, uid: cj.metadata.uid, controller: true }],
      },
      spec: cj.spec.jobTemplate.spec,
    });
    const job = await waitFor(
      async () => {
        const j = (await admin.request<Workload>('GET', `/apis/batch/v1/namespaces/${NS}/jobs/${name}-manual`)).body;
        return condition(j, 'Complete')?.status === 'True' ? j : undefined;
      },
      { timeoutMs: 60_000, what: `Job ${name}-manual Complete` },
    );
    expect(job.status?.succeeded).toBe(1);
    const pods = await podsOf(admin, name);
    expect(pods.map((p) => p.status.phase)).toEqual(['Succeeded']);
  });
});

// The real Argo Rollouts controller (namespaced to ARGO_NAMESPACE on ARGO_CLUSTER): the status shape it writes is
// the one vault-rollout's health rules read (phase Healthy/Degraded, observedGeneration).
describe(`Argo Rollouts controller on ${ARGO_CLUSTER}`, () => {
  const c = clusters.find((x) => x.name === ARGO_CLUSTER);
  if (c === undefined) throw new Error(`no cluster ${ARGO_CLUSTER} in clusters.json`);
  const admin = clusterClient(c, 'admin');
  const base = `/apis/argoproj.io/v1alpha1/namespaces/${ARGO_NAMESPACE}/rollouts`;
  const suffix = randomBytes(3).toString('hex');
  interface RolloutView extends Workload {
    status?: Workload['status'] & {
      phase?: string;
      message?: string;
      observedGeneration?: string;
      stableRS?: string;
      currentPodHash?: string;
    };
  }
  const rollout = (name: string, annotations: Record<string, string> = {}, extra: Record<string, unknown> = {}) => ({
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    metadata: { name },
    spec: {
      replicas: 3,
      selector: { matchLabels: { app: name } },
      template: podTemplate(name, annotations),
      strategy: { canary: {} },
      ...extra,
    },
  });
  const podsIn = async (app: string): Promise<Pod[]> =>
    (
      await admin.request<List<Pod>>(
        'GET',
        `/api/v1/namespaces/${ARGO_NAMESPACE}/pods?labelSelector=${encodeURIComponent(`app=${app}`)}`,
      )
    ).body.items;
  const phaseOf = async (name: string, phase: string): Promise<RolloutView | undefined> => {
    const r = (await admin.request<RolloutView>('GET', `${base}/${name}`)).body;
    return r.status?.phase === phase && r.status.observedGeneration === String(r.metadata.generation) ? r : undefined;
  };

  afterAll(async () => {
    for (const name of [`web-${suffix}`, `never-${suffix}`])
      await admin.request('DELETE', `${base}/${name}`).catch(() => undefined);
  });

  it('brings a Rollout to Healthy, and again after a template change, with 3 new Ready pods', SLOW, async () => {
    const name = `web-${suffix}`;
    await create(admin, base, rollout(name));
    const healthy = await waitFor(() => phaseOf(name, 'Healthy'), {
      timeoutMs: 60_000,
      what: `Rollout ${name} Healthy`,
    });
    expect(healthy.status?.stableRS).toBe(healthy.status?.currentPodHash);
    const first = await podsIn(name);

    const at = new Date().toISOString();
    expectStatus(
      await admin.request('PATCH', `${base}/${name}`, {
        body: restartPatch(at),
        contentType: 'application/merge-patch+json',
      }),
      200,
    );
    const after = await waitFor(
      async () => {
        const r = await phaseOf(name, 'Healthy');
        return r &&
          r.status?.currentPodHash !== healthy.status?.currentPodHash &&
          r.status?.stableRS === r.status?.currentPodHash
          ? r
          : undefined;
      },
      { timeoutMs: 60_000, what: `Rollout ${name} Healthy on the new template` },
    );
    const pods = await waitFor(
      async () => {
        const ps = (await podsIn(name)).filter((p) => p.metadata.deletionTimestamp === undefined);
        return ps.length === 3 &&
          ps.every(
            (p) =>
              runningReady(p) && p.metadata.labels?.['rollouts-pod-template-hash'] === after.status?.currentPodHash,
          )
          ? ps
          : undefined;
      },
      { timeoutMs: 60_000, what: `3 Ready pods of ${name} on the new template` },
    );
    expect(pods.filter((p) => first.some((o) => o.metadata.uid === p.metadata.uid))).toEqual([]);
  });

  it('marks a Rollout whose pods never get Ready Degraded (ProgressDeadlineExceeded)', SLOW, async () => {
    const name = `never-${suffix}`;
    await create(admin, base, rollout(name, { [READINESS]: 'never' }, { replicas: 1, progressDeadlineSeconds: 10 }));
    const degraded = await waitFor(() => phaseOf(name, 'Degraded'), {
      timeoutMs: 60_000,
      what: `Rollout ${name} Degraded`,
    });
    expect(condition(degraded, 'Progressing')?.reason).toBe('ProgressDeadlineExceeded');
  });
});
