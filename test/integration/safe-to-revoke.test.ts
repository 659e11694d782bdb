// "Safe to revoke" counted in pods, on the real test clusters (kwok nodes run the pods; the ReplicaSet, StatefulSet
// and Deployment controllers are the real ones): `apply` restarts, then `status --safe-to-revoke` and serve's
// GET /safe-to-revoke answer. A StatefulSet with updateStrategy OnDelete, an old pod stuck terminating behind a
// finalizer, and a paused Deployment are never called safe; each turns safe only once no older pod runs. An Argo
// Rollout with `restartBy: template` gets its restart on the pod template (the record on its metadata, no restartAt):
// no Argo controller reconciles the test's own namespace, so there the patch and the object are asserted; in the one
// namespace the real Argo Rollouts controller reconciles, a Rollout restarted each way rolls out (a new pod-template
// hash by template, the same one by restartAt) and is safe once its pod runs the restart.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../lib/cli/main.ts';
import { statusCommand } from '../../lib/cli/status-command.ts';
import { ARGO_CLUSTER, ARGO_NAMESPACE } from '../clusters/clusters.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import { BEARER_TOKEN, STATUS_TOKEN } from '../secrets.ts';
import {
  admin,
  clusters,
  createNamespace,
  createWorkload,
  deleteNamespace,
  spawnServe,
  uniqueName,
  type ServeChild,
} from './support.ts';
import { kvWriteAudit, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-revoke');
const ROUTES = `clusters:
${clusters.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2 } }
routes:
  - name: apps
    match: { path: "secret/revoke/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: [api, held, paused], kind: Deployment, name: "{app}" }]
  - name: db
    match: { path: "secret/revoke/db" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: StatefulSet, name: db }]
  - name: canary
    match: { path: "secret/revoke/canary" }
    targets: [{ clusters: [alpha], namespace: ${NS}, kind: Rollout, name: canary, restartBy: template }]
`;
// The real Argo Rollouts controller reconciles ARGO_NAMESPACE on ARGO_CLUSTER only: a Rollout restarted each way there.
const ARGO_SUFFIX = NS.slice(-4);
const ARGO_ROUTES = `clusters:
${clusters.map((c) => `  ${c.name}: { kubeconfig: { file: ${JSON.stringify(c.vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2 } }
routes:
  - name: argo-template
    match: { path: "secret/revoke-argo/template" }
    targets: [{ clusters: [${ARGO_CLUSTER}], namespace: ${ARGO_NAMESPACE}, kind: Rollout, name: tpl-${ARGO_SUFFIX}, restartBy: template }]
  - name: argo-restart-at
    match: { path: "secret/revoke-argo/restart-at" }
    targets: [{ clusters: [${ARGO_CLUSTER}], namespace: ${ARGO_NAMESPACE}, kind: Rollout, name: at-${ARGO_SUFFIX} }]
`;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-revoke-'));
const kube = () => admin('alpha');

async function apply(app: string, version: number): Promise<void> {
  const io = memoryIo({
    'routes.yaml': ROUTES,
    '-': kvWriteAudit(`revoke-${app}-${version}`, `secret/revoke/${app}`, version),
  });
  expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io), io.out + io.err).toBe(0);
}

interface Answer {
  safe: boolean;
  consumers: number;
  pods: { onRecorded: number; older: number };
  waitingFor: Array<{ verdict: string; detail: string }>;
  reasons: string[];
}

async function safeToRevoke(app: string, wait?: string): Promise<{ code: number; answer: Answer }> {
  const io = memoryIo({ 'routes.yaml': ROUTES });
  const args = ['--routes', 'routes.yaml', '--path', `secret/revoke/${app}`, '--safe-to-revoke'];
  const code = await statusCommand(
    [...args, ...(wait ? ['--wait', '--timeout', wait, '--interval', '500ms'] : [])],
    io,
  );
  return { code, answer: JSON.parse(io.out) as Answer };
}

/** The pods of the namespace with this app label: name, finalizers, whether terminating. */
async function pods(app: string): Promise<Array<{ name: string; terminating: boolean }>> {
  const res = await kube().request('GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3D${app}`);
  const items = (res.body as { items: Array<{ metadata: { name: string; deletionTimestamp?: string } }> }).items;
  return items.map((p) => ({ name: p.metadata.name, terminating: p.metadata.deletionTimestamp !== undefined }));
}

const patchPod = (name: string, body: unknown) =>
  kube().request('PATCH', `/api/v1/namespaces/${NS}/pods/${name}`, {
    body,
    contentType: 'application/merge-patch+json',
  });

let serve: ServeChild | undefined;

beforeAll(async () => {
  await createNamespace('alpha', NS);
  await createWorkload('alpha', NS, 'Deployment', 'api', {}, { replicas: 2 });
  await createWorkload('alpha', NS, 'Deployment', 'held');
  await createWorkload('alpha', NS, 'Deployment', 'paused');
  await createWorkload('alpha', NS, 'StatefulSet', 'db');
  await kube().request('PATCH', `/apis/apps/v1/namespaces/${NS}/statefulsets/db`, {
    body: { spec: { updateStrategy: { type: 'OnDelete', rollingUpdate: null } } },
    contentType: 'application/merge-patch+json',
  });
  await createWorkload('alpha', NS, 'Rollout', 'canary');
  await waitFor(async () => (await pods('held')).length === 1 && (await pods('db')).length === 1, {
    timeoutMs: 30_000,
    what: 'the first pods',
  });
  writeFileSync(join(dir, 'routes.yaml'), ROUTES);
  serve = await spawnServe({
    routesFile: join(dir, 'routes.yaml'),
    queueFile: join(dir, 'queue.sqlite'),
    args: ['--status-page'],
    env: serveEnv(dir, join(dir, 'state.sqlite'), { VAULT_ROLLOUT_STATUS_TOKEN: STATUS_TOKEN }),
  });
}, 120_000);

afterAll(async () => {
  serve?.child.kill('SIGTERM');
  // Let a held pod go, so the namespace can be deleted.
  for (const p of await pods('held').catch(() => [])) await patchPod(p.name, { metadata: { finalizers: null } });
  await deleteNamespace('alpha', NS);
});

describe('safe to revoke, counted in pods', () => {
  it('a Deployment rolled out: safe once every pod runs the restarted template (exit 0; serve: 200)', async () => {
    await apply('api', 1);
    const { code, answer } = await safeToRevoke('api', '40s');
    expect(answer).toMatchObject({ safe: true, consumers: 1, pods: { onRecorded: 2, older: 0 }, reasons: [] });
    expect(code).toBe(0);
    const res = await fetch(`http://127.0.0.1:${serve!.port}/safe-to-revoke?path=secret/revoke/api`, {
      headers: { authorization: `Bearer ${STATUS_TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ safe: true, pods: { onRecorded: 2, older: 0 } });
    expect((await fetch(`http://127.0.0.1:${serve!.port}/safe-to-revoke?path=secret/revoke/api`)).status).toBe(401);
  }, 60_000);

  it('an old pod stuck terminating behind a finalizer: the Deployment says complete, status says OLD PODS', async () => {
    const [old] = await pods('held');
    expect((await patchPod(old!.name, { metadata: { finalizers: ['vault-rollout.test/hold'] } })).status).toBe(200);
    await apply('held', 1);
    await waitFor(async () => (await pods('held')).some((p) => p.name === old!.name && p.terminating), {
      timeoutMs: 30_000,
      what: 'the old pod terminating',
    });
    await waitFor(async () => (await pods('held')).some((p) => p.name !== old!.name && !p.terminating), {
      timeoutMs: 30_000,
      what: 'the new pod',
    });
    const held = await waitFor(
      async () => {
        const r = await safeToRevoke('held');
        return r.answer.waitingFor[0]?.verdict === 'OLD PODS' ? r : undefined;
      },
      { timeoutMs: 30_000, what: 'OLD PODS' },
    );
    expect(held.code).toBe(1);
    expect(held.answer).toMatchObject({ safe: false, pods: { onRecorded: 1, older: 1 } });
    // serve reuses its read of the fleet for 5 s: asked until its read is newer than the restart.
    const served = await waitFor(
      async () => {
        const res = await fetch(`http://127.0.0.1:${serve!.port}/safe-to-revoke?path=secret/revoke/held`, {
          headers: { authorization: `Bearer ${STATUS_TOKEN}` },
        });
        const body = (await res.json()) as Answer;
        return body.pods.older === 1 ? { status: res.status, body } : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 1_000, what: "serve's answer to count the old pod" },
    );
    expect(served).toMatchObject({ status: 409, body: { safe: false, pods: { onRecorded: 1, older: 1 } } });
    // Once the finalizer goes, the pod goes, and the answer turns.
    await patchPod(old!.name, { metadata: { finalizers: null } });
    expect((await safeToRevoke('held', '30s')).code).toBe(0);
  }, 90_000);

  it('a StatefulSet with OnDelete: its pod keeps the old revision (the kind says nothing to wait for); safe once deleted', async () => {
    await apply('db', 1);
    const before = await safeToRevoke('db');
    expect(before.code).toBe(1);
    expect(before.answer).toMatchObject({ safe: false, pods: { onRecorded: 0, older: 1 } });
    expect(before.answer.waitingFor[0]).toMatchObject({ verdict: 'OLD PODS' });
    await kube().request('DELETE', `/api/v1/namespaces/${NS}/pods/db-0`);
    // The StatefulSet controller recreates db-0 from the new revision: safe, with that pod counted.
    const after = await waitFor(
      async () => {
        const r = await safeToRevoke('db');
        return r.code === 0 && r.answer.pods.onRecorded === 1 ? r : undefined;
      },
      { timeoutMs: 40_000, what: 'db-0 recreated on the new revision' },
    );
    expect(after.answer).toMatchObject({ safe: true, pods: { onRecorded: 1, older: 0 } });
  }, 60_000);

  it('a paused Deployment is never called safe: a restart that landed as it was paused leaves its old pod running', async () => {
    await apply('paused', 1);
    expect((await safeToRevoke('paused', '30s')).code).toBe(0);
    // Paused, then the template changed as a restart for version 2 writes it (the controller rolls nothing out).
    const patchDeployment = (body: unknown) =>
      kube().request('PATCH', `/apis/apps/v1/namespaces/${NS}/deployments/paused`, {
        body,
        contentType: 'application/merge-patch+json',
      });
    await patchDeployment({ spec: { paused: true } });
    const record = { 'vault-rollout.io/versions': JSON.stringify({ 'secret/revoke/paused': 2 }) };
    await patchDeployment({ spec: { template: { metadata: { annotations: record } } } });
    const paused = await safeToRevoke('paused');
    expect(paused.code).toBe(1);
    expect(paused.answer).toMatchObject({ safe: false, pods: { onRecorded: 0, older: 1 } });
    // Refused while paused: a restart never patches a paused Deployment.
    const io = memoryIo({ 'routes.yaml': ROUTES, '-': kvWriteAudit('revoke-paused-3', 'secret/revoke/paused', 3) });
    await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io);
    expect(io.out + io.err).toMatch(/paused/);
    expect((await safeToRevoke('paused')).answer.safe).toBe(false);
  }, 60_000);

  it('a Rollout with restartBy: template: the pod template carries the restart, the metadata the record, no restartAt', async () => {
    await apply('canary', 3);
    const rollout = (await kube().request('GET', `/apis/argoproj.io/v1alpha1/namespaces/${NS}/rollouts/canary`))
      .body as {
      metadata: { annotations?: Record<string, string> };
      spec: { restartAt?: string; template: { metadata: { annotations?: Record<string, string> } } };
    };
    expect(rollout.spec.restartAt).toBeUndefined();
    const template = rollout.spec.template.metadata.annotations ?? {};
    expect(JSON.parse(template['vault-rollout.io/versions'] ?? '{}')).toEqual({ 'secret/revoke/canary': 3 });
    expect(template['kubectl.kubernetes.io/restartedAt']).toMatch(/^\d{4}-/);
    expect(template['vault-rollout.io/restart-token']).toBe(
      rollout.metadata.annotations?.['vault-rollout.io/restart-token'],
    );
    expect(JSON.parse(rollout.metadata.annotations?.['vault-rollout.io/versions'] ?? '{}')).toEqual({
      'secret/revoke/canary': 3,
    });
    // A replay is recognised from the metadata's record: nothing patched again.
    const version = (await kube().request('GET', `/apis/argoproj.io/v1alpha1/namespaces/${NS}/rollouts/canary`))
      .body as { metadata: { resourceVersion: string } };
    await apply('canary', 3);
    const again = (await kube().request('GET', `/apis/argoproj.io/v1alpha1/namespaces/${NS}/rollouts/canary`)).body as {
      metadata: { resourceVersion: string };
    };
    expect(again.metadata.resourceVersion).toBe(version.metadata.resourceVersion);
  }, 60_000);
});

describe(`Argo Rollouts restarted both ways, with the real controller (${ARGO_CLUSTER}/${ARGO_NAMESPACE})`, () => {
  const base = `/apis/argoproj.io/v1alpha1/namespaces/${ARGO_NAMESPACE}/rollouts`;
  interface RolloutView {
    metadata: { generation?: number };
    status?: { phase?: string; observedGeneration?: string; currentPodHash?: string; restartedAt?: string };
  }
  const get = async (name: string) => (await kube().request('GET', `${base}/${name}`)).body as RolloutView;
  const healthy = (r: RolloutView) =>
    r.status?.phase === 'Healthy' && r.status.observedGeneration === String(r.metadata.generation);
  const answer = async (way: string) => {
    const io = memoryIo({ 'routes.yaml': ARGO_ROUTES });
    const args = ['--routes', 'routes.yaml', '--path', `secret/revoke-argo/${way}`, '--safe-to-revoke'];
    const code = await statusCommand(args, io);
    return { code, answer: JSON.parse(io.out) as Answer };
  };
  const restart = async (way: string) => {
    const line = kvWriteAudit(`revoke-argo-${way}-${ARGO_SUFFIX}`, `secret/revoke-argo/${way}`, 1);
    const io = memoryIo({ 'routes.yaml': ARGO_ROUTES, '-': line });
    expect(await main(['apply', '--routes', 'routes.yaml', '--no-wait'], io), io.out + io.err).toBe(0);
  };

  beforeAll(async () => {
    for (const name of [`tpl-${ARGO_SUFFIX}`, `at-${ARGO_SUFFIX}`]) {
      const body = {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Rollout',
        metadata: { name },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
          },
          strategy: { canary: {} },
        },
      };
      expect((await kube().request('POST', base, { body })).status).toBe(201);
    }
    for (const name of [`tpl-${ARGO_SUFFIX}`, `at-${ARGO_SUFFIX}`])
      await waitFor(async () => healthy(await get(name)), { timeoutMs: 60_000, what: `Rollout ${name} Healthy` });
  }, 90_000);
  afterAll(async () => {
    for (const name of [`tpl-${ARGO_SUFFIX}`, `at-${ARGO_SUFFIX}`])
      await kube()
        .request('DELETE', `${base}/${name}`)
        .catch(() => undefined);
  });

  it.each([
    ['template', 'a new revision (new pod-template hash)'],
    ['restart-at', 'the same revision, its pod replaced'],
  ])(
    '%s: %s; safe only once the pod runs the restart',
    async (way) => {
      const name = `${way === 'template' ? 'tpl' : 'at'}-${ARGO_SUFFIX}`;
      const before = await get(name);
      await restart(way);
      const early = await answer(way);
      // Right after the patch the old pod still runs (or the controller has not observed it): never safe.
      if (early.code === 0) expect(early.answer.pods.older).toBe(0);
      const done = await waitFor(
        async () => {
          const r = await get(name);
          const moved =
            way === 'template'
              ? r.status?.currentPodHash !== before.status?.currentPodHash
              : r.status?.restartedAt !== undefined;
          return healthy(r) && moved ? r : undefined;
        },
        { timeoutMs: 60_000, what: `Rollout ${name} Healthy after its restart` },
      );
      if (way === 'restart-at') expect(done.status?.currentPodHash).toBe(before.status?.currentPodHash);
      const safe = await waitFor(
        async () => {
          const a = await answer(way);
          return a.code === 0 ? a : undefined;
        },
        { timeoutMs: 30_000, what: `${name} safe to revoke` },
      );
      expect(safe.answer).toMatchObject({ safe: true, pods: { onRecorded: 1, older: 0 } });
    },
    120_000,
  );

  it('template, through serve: the intake restarts it again (version 2), a new revision again; safe once it runs', async () => {
    const name = `tpl-${ARGO_SUFFIX}`;
    const before = await get(name);
    const argoDir = mkdtempSync(join(tmpdir(), 'vault-rollout-revoke-argo-'));
    writeFileSync(join(argoDir, 'routes.yaml'), ARGO_ROUTES);
    const argoServe = await spawnServe({
      routesFile: join(argoDir, 'routes.yaml'),
      queueFile: join(argoDir, 'queue.sqlite'),
      env: serveEnv(argoDir, join(argoDir, 'state.sqlite')),
    });
    try {
      const res = await fetch(`http://127.0.0.1:${argoServe.port}/v1/vault/audit`, {
        method: 'POST',
        body: kvWriteAudit(`revoke-argo-template-2-${ARGO_SUFFIX}`, 'secret/revoke-argo/template', 2),
        headers: { authorization: `Bearer ${BEARER_TOKEN}` },
      });
      expect(res.status).toBe(202);
      await waitFor(
        async () => {
          const r = await get(name);
          return healthy(r) && r.status?.currentPodHash !== before.status?.currentPodHash ? r : undefined;
        },
        { timeoutMs: 60_000, what: `Rollout ${name} on a new revision after serve restarted it` },
      );
    } finally {
      argoServe.child.kill('SIGTERM');
    }
    const safe = await waitFor(
      async () => {
        const a = await answer('template');
        return a.code === 0 ? a : undefined;
      },
      { timeoutMs: 30_000, what: `${name} safe to revoke after version 2` },
    );
    expect(safe.answer).toMatchObject({ safe: true, pods: { onRecorded: 1, older: 0 } });
  }, 120_000);
});
