/**
 * rollout.maxUnavailable on the real clusters, the way Lambda runs it: changes for 60 Deployments (20 in each of
 * alpha, beta and gamma) go through the HTTP intake to the SQS FIFO queue (ElasticMQ); worker processes
 * (`vault-rollout worker`, three pollers: the clusters are worked concurrently) take their slots from DynamoDB
 * (DynamoDB Local) with a 5 s follow budget, so deferred targets travel in follow-ups. A sampler watches the
 * Deployments themselves and never sees more than 3 rolling in a cluster nor 5 over the fleet; the first worker
 * is SIGKILLed mid-rotation with slots in hand, a second one finishes: every Deployment restarted once (two
 * ReplicaSets), every slot given back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../lib/http/app.ts';
import { ANNOTATIONS } from '../../lib/plan/restart-record.ts';
import { WORKLOAD_KINDS, type KubeObject } from '../../lib/workloads/workload-kinds.ts';
import { memoryTelemetry } from '../../lib/kernel/telemetry.ts';
import { SqsRolloutQueue } from '../../lib/queue/sqs-queue.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { DynamoDbSlotStore } from '../../lib/slots/dynamodb-slot-store.ts';
import { clusterScope, FLEET_SCOPE } from '../../lib/slots/slot-store.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { createSlotTable, startDynamoDbLocal, type DynamoDbLocal } from '../dynamodb/dynamodb-local.ts';
import { recordOutput } from '../hygiene/capture.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { createFifoQueueWithDlq, emulatorClient, startSqsEmulator, type SqsEmulator } from '../sqs/emulator.ts';
import {
  admin,
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  replicaSetCount,
  repoRootDir,
  uniqueName,
} from './support.ts';

const NS = uniqueName('vr-slots');
const CLUSTERS = ['alpha', 'beta', 'gamma'] as const;
const APPS = Array.from({ length: 20 }, (_, i) => `app-${i}`);
const PER_CLUSTER = 3;
const FLEET = 5;
const SLOT_TABLE = 'rollout-slots';
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-slots-'));
const routesFile = join(dir, 'routes.yaml');
let sqsEmulator: SqsEmulator;
let sqs: SQSClient;
let dynamo: DynamoDbLocal;
let dynamoClient: DynamoDBClient;

beforeAll(async () => {
  [sqsEmulator, dynamo] = await Promise.all([startSqsEmulator(), startDynamoDbLocal()]);
  sqs = emulatorClient(sqsEmulator.endpoint);
  dynamoClient = dynamo.client();
  await createSlotTable(dynamoClient, SLOT_TABLE);
  writeFileSync(
    routesFile,
    `clusters:
${CLUSTERS.map((c) => `  ${c}: { kubeconfig: { file: ${JSON.stringify(cluster(c).vaultRolloutKubeconfig)} } }`).join('\n')}
vault: { mounts: { secret: 2 } }
rollout:
  timeout: 2m
  maxUnavailable: { perCluster: ${PER_CLUSTER}, fleet: ${FLEET} }
routes:
  - name: slots
    match: { path: "secret/slots/{app}" }
    targets: [{ clusters: [${CLUSTERS.join(', ')}], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
`,
  );
  await Promise.all(
    CLUSTERS.map(async (c) => {
      await createNamespace(c, NS);
      // replicas 1, pods Ready as soon as kwok binds them: a rollout takes about a second or two.
      for (const a of APPS) await createWorkload(c, NS, 'Deployment', a);
    }),
  );
}, 600_000);

afterAll(async () => {
  dynamoClient?.destroy();
  await Promise.all([sqsEmulator?.stop(), dynamo?.stop()]);
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
  rmSync(dir, { recursive: true, force: true });
});

const audit = (app: string) =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `slots-${app}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/slots/${app}`,
    },
    response: { data: { version: 2 } },
  });

/** What the clusters say: per cluster, the Deployments restarted by us, and those whose rollout has not ended. */
async function sample(): Promise<Record<string, { restarted: number; rolling: number; complete: number }>> {
  const out: Record<string, { restarted: number; rolling: number; complete: number }> = {};
  await Promise.all(
    CLUSTERS.map(async (c) => {
      const res = await admin(c).request('GET', `/apis/apps/v1/namespaces/${NS}/deployments`);
      const items = (res.body as { items: KubeObject[] }).items;
      const ours = items.filter(
        (d) =>
          (d.spec as { template?: { metadata?: { annotations?: Record<string, string> } } }).template?.metadata
            ?.annotations?.[ANNOTATIONS.restartToken] !== undefined,
      );
      const states = ours.map((d) => WORKLOAD_KINDS.Deployment.health(d).state);
      out[c] = {
        restarted: ours.length,
        rolling: states.filter((s) => s === 'progressing').length,
        complete: states.filter((s) => s === 'complete').length,
      };
    }),
  );
  return out;
}

describe('rollout.maxUnavailable', () => {
  it(`never has more than ${PER_CLUSTER} per cluster or ${FLEET} over the fleet rolling; a killed worker loses no slot and restarts nothing twice`, async () => {
    const queue = await createFifoQueueWithDlq(sqs, { name: 'slots', maxReceiveCount: 5, visibilityTimeoutSeconds: 8 });
    const app = buildApp({
      table: loadRoutingTable(readFileSync(routesFile, 'utf8'), routesFile),
      queue: new SqsRolloutQueue({ client: sqs, queueUrl: queue.queueUrl }),
      telemetry: memoryTelemetry(),
      secrets: async () => ({ bearerToken: BEARER_TOKEN }),
    });
    const startWorker = (): ChildProcess => {
      const child = spawn(
        process.execPath,
        [
          join(repoRootDir, 'lib/cli/main.ts'),
          'worker',
          '--routes',
          routesFile,
          '--queue-url',
          queue.queueUrl,
          '--concurrency',
          '3',
        ],
        {
          env: {
            ...process.env,
            AWS_ENDPOINT_URL_SQS: sqsEmulator.endpoint,
            AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
            AWS_REGION: 'us-east-1',
            AWS_ACCESS_KEY_ID: 'test',
            AWS_SECRET_ACCESS_KEY: 'test',
            VAULT_ROLLOUT_SLOTS_TABLE: SLOT_TABLE,
            POWERTOOLS_METRICS_DISABLED: 'true',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      // The worker's logs are test output too: the secrets hygiene check reads them.
      child.stdout?.on('data', recordOutput);
      child.stderr?.on('data', recordOutput);
      return child;
    };
    const slots = new DynamoDbSlotStore({ client: dynamoClient, table: SLOT_TABLE });
    const max = { cluster: 0, fleet: 0, leasesCluster: 0, leasesFleet: 0 };
    let samples = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [s, fleetLeases, clusterLeases] = await Promise.all([
          sample(),
          slots.leases(FLEET_SCOPE),
          Promise.all(CLUSTERS.map((c) => slots.leases(clusterScope(c)))),
        ]);
        samples++;
        max.cluster = Math.max(max.cluster, ...CLUSTERS.map((c) => s[c]?.rolling ?? 0));
        max.fleet = Math.max(
          max.fleet,
          CLUSTERS.reduce((n, c) => n + (s[c]?.rolling ?? 0), 0),
        );
        max.leasesFleet = Math.max(max.leasesFleet, fleetLeases.length);
        max.leasesCluster = Math.max(max.leasesCluster, ...clusterLeases.map((l) => l.length));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    const started = Date.now();
    expect(
      (
        await app.request('/v1/vault/audit', {
          method: 'POST',
          body: APPS.map(audit).join('\n'),
          headers: { authorization: `Bearer ${BEARER_TOKEN}` },
        })
      ).status,
    ).toBe(202);
    let worker = startWorker();
    try {
      // Mid-rotation: some restarted, most still waiting for a slot. Then the worker dies with slots in hand.
      const restartedAtKill = await waitFor(
        async () => {
          const s = await sample();
          const restarted = CLUSTERS.reduce((n, c) => n + (s[c]?.restarted ?? 0), 0);
          return restarted >= 12 ? restarted : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 100, what: 'the rotation to be under way' },
      );
      worker.kill('SIGKILL');
      const leasesAtKill = (await slots.leases(FLEET_SCOPE)).length;
      expect(restartedAtKill).toBeLessThan(CLUSTERS.length * APPS.length);
      worker = startWorker();
      await waitFor(
        async () => {
          const s = await sample();
          return CLUSTERS.every((c) => s[c]?.complete === APPS.length) || undefined;
        },
        { timeoutMs: 300_000, intervalMs: 500, what: 'every Deployment restarted and complete' },
      );
      const elapsed = (Date.now() - started) / 1000;
      // The last follow-ups find everything complete and give the last slots back.
      await waitFor(async () => (await slots.leases(FLEET_SCOPE)).length === 0 || undefined, {
        timeoutMs: 60_000,
        what: 'every slot given back',
      });
      await waitFor(
        async () =>
          (
            await sqs.send(
              new GetQueueAttributesCommand({
                QueueUrl: queue.queueUrl,
                AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
              }),
            )
          ).Attributes?.ApproximateNumberOfMessagesNotVisible === '0' || undefined,
        {
          timeoutMs: 60_000,
          what: 'the queue to drain',
        },
      );
      console.log(
        `maxUnavailable: ${CLUSTERS.length * APPS.length} Deployments in ${elapsed.toFixed(1)} s; killed with ${restartedAtKill} restarted and ${leasesAtKill} slots held; sampled ${samples} times: max rolling ${max.cluster}/cluster, ${max.fleet}/fleet; max leases ${max.leasesCluster}/cluster, ${max.leasesFleet}/fleet`,
      );
    } finally {
      sampling = false;
      await sampler;
      worker.kill('SIGKILL');
    }
    expect(max.cluster).toBeLessThanOrEqual(PER_CLUSTER);
    expect(max.fleet).toBeLessThanOrEqual(FLEET);
    expect(max.leasesCluster).toBeLessThanOrEqual(PER_CLUSTER);
    expect(max.leasesFleet).toBeLessThanOrEqual(FLEET);
    // The bound was used, not just respected: several rolled at once.
    expect(max.leasesFleet).toBe(FLEET);
    // Restarted once each: the original ReplicaSet and one new one, for all 60.
    for (const c of CLUSTERS) {
      const counts = await Promise.all(APPS.map((a) => replicaSetCount(c, NS, a)));
      expect(counts, c).toEqual(APPS.map(() => 2));
    }
  }, 480_000);
});
