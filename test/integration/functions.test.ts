/**
 * End to end on a real test cluster: a signed POST to `vault-rollout serve` -> in-process queue -> worker ->
 * Deployment restarted; and the Lambda worker handler with an SQS batch holding one poison record.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveCommand } from '../../lib/cli/serve-command.ts';
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../lib/http/webhook-auth.ts';
import { changesByCluster } from '../../lib/pipeline/intake.ts';
import { planRollouts } from '../../lib/plan/planner.ts';
import { rolloutMessages } from '../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../lib/routing/routing-table.ts';
import { parseInput } from '../../lib/sources/parse.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { memoryIo } from '../helpers.ts';
import {
  cluster,
  createNamespace,
  createWorkload,
  deleteNamespace,
  expectReplicaSets,
  getWorkload,
  uniqueName,
} from './support.ts';
import { WEBHOOK_SECRET } from '../secrets.ts';
import { podTemplate, unreadyVersions } from './wave-fixtures.ts';
import { createFifoQueueWithDlq, emulatorClient, EMULATOR_REGION, startSqsEmulator } from '../sqs/emulator.ts';

const NS = uniqueName('vr-e2e');
const SECRET = WEBHOOK_SECRET;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-e2e-'));
const routesFile = join(dir, 'routes.yaml');
const audit = (key: string, version: number) =>
  JSON.stringify({
    time: new Date().toISOString(),
    type: 'response',
    request: {
      id: `e2e-${key}-${version}`,
      operation: 'update',
      mount_type: 'kv',
      mount_point: 'secret/',
      path: `secret/data/${key}`,
    },
    response: { data: { version } },
  });

beforeAll(async () => {
  writeFileSync(
    routesFile,
    `clusters:
  alpha: { kubeconfig: { file: ${JSON.stringify(cluster('alpha').vaultRolloutKubeconfig)} } }
  ghost: { kubeconfig: { env: VAULT_ROLLOUT_E2E_UNSET } }
vault: { mounts: { secret: 2 } }
routes:
  - name: e2e
    match: { path: "secret/e2e/{app}" }
    targets: [{ clusters: [alpha], namespace: ${NS}, names: ["*"], kind: Deployment, name: "{app}" }]
  - name: ghost
    match: { path: "secret/ghost" }
    targets: [{ clusters: [ghost], namespace: ${NS}, kind: Deployment, name: api }]
`,
  );
  await createNamespace('alpha', NS);
  await createWorkload('alpha', NS, 'Deployment', 'api');
  // The worker's restart to version 2 never becomes Ready (kwok reads the annotation): its rollout cannot have ended by
  // the invocation's one look, however slow the machine, so it must go on in a continuation.
  await createWorkload(
    'alpha',
    NS,
    'Deployment',
    'worker',
    {},
    {
      template: podTemplate('worker', unreadyVersions({ 'secret/e2e/worker': 2 })),
    },
  );
});
afterAll(async () => {
  await deleteNamespace('alpha', NS);
});

describe('vault-rollout serve', () => {
  it('refuses to start without authentication unless told --insecure-no-auth', async () => {
    const io = memoryIo({}, {});
    expect(await serveCommand(['--routes', routesFile, '--port', '0'], io)).toBe(1);
    expect(io.err).toContain('no authentication configured');
  });

  it('restarts a Deployment of a real cluster from a signed POST', async () => {
    const stop = new AbortController();
    const io = memoryIo({}, { VAULT_ROLLOUT_WEBHOOK_SECRET: SECRET, POWERTOOLS_METRICS_DISABLED: 'true' });
    io.readText = async (f) => (await import('node:fs/promises')).readFile(f, 'utf8');
    const running = serveCommand(
      [
        '--routes',
        routesFile,
        '--port',
        '0',
        '--queue-file',
        join(mkdtempSync(join(tmpdir(), 'vr-serve-')), 'queue.sqlite'),
      ],
      io,
      stop.signal,
    );
    const port = Number(
      await waitFor(async () => /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(io.err)?.[1], {
        timeoutMs: 10_000,
        what: 'serve to listen',
      }),
    );
    const body = audit('e2e/api', 4);
    const at = String(Math.floor(Date.now() / 1000));
    const res = await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, {
      method: 'POST',
      body,
      headers: { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(SECRET, at, body) },
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ accepted: 1, queued: 1 });
    await waitFor(
      async () =>
        (await getWorkload('alpha', NS, 'Deployment', 'api')).spec.template?.metadata?.annotations?.[
          'vault-rollout.io/versions'
        ] === '{"secret/e2e/api":4}',
      { timeoutMs: 30_000, what: 'the restart' },
    );
    await expectReplicaSets('alpha', NS, 'api', 2);
    const unsigned = await fetch(`http://127.0.0.1:${port}/v1/vault/audit`, { method: 'POST', body });
    expect(unsigned.status).toBe(401);
    stop.abort();
    expect(await running).toBe(0);
  });
});

describe('functions/worker', () => {
  const record = (messageId: string, body: string, group: string): SQSRecord => ({
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
      MessageGroupId: group,
      MessageDeduplicationId: messageId,
      SequenceNumber: '1',
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:vault-rollout-dev.fifo',
    awsRegion: 'eu-west-1',
  });

  it('restarts the good record, retries the failing cluster, refuses the poison and the forged record', async () => {
    const saved = { ...process.env };
    // The queue the step hands its continuation to (the rollout is followed out of line), on ElasticMQ.
    const emulator = await startSqsEmulator();
    const sqs = emulatorClient(emulator.endpoint);
    const queue = await createFifoQueueWithDlq(sqs, { name: 'functions-worker' });
    Object.assign(process.env, {
      VAULT_ROLLOUT_ROUTES: routesFile,
      VAULT_ROLLOUT_QUEUE_URL: queue.queueUrl,
      AWS_ENDPOINT_URL_SQS: emulator.endpoint,
      AWS_REGION: EMULATOR_REGION,
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
    });
    try {
      const { handler } = await import('../../functions/worker.ts');
      const table = loadRoutingTable((await import('node:fs')).readFileSync(routesFile, 'utf8'), routesFile);
      const changes = parseInput(`${audit('e2e/worker', 2)}\n${audit('ghost', 1)}`, { mounts: table.mounts }).changes;
      const byCluster = changesByCluster(changes, planRollouts(table, changes));
      const good = rolloutMessages('alpha', byCluster.get('alpha') ?? [], new Date().toISOString())[0];
      const ghost = rolloutMessages('ghost', byCluster.get('ghost') ?? [], new Date().toISOString())[0];
      // The ghost cluster's change, put in alpha's group: it plans nothing in alpha, so nothing may run.
      const forged = rolloutMessages('alpha', byCluster.get('ghost') ?? [], new Date().toISOString())[0];
      const event: SQSEvent = {
        Records: [
          record('good', JSON.stringify(good), 'alpha'),
          record('poison', 'not a rollout message', 'other'),
          record('ghost', JSON.stringify(ghost), 'ghost'),
          record('forged', JSON.stringify(forged), 'alpha'),
        ],
      };
      const response = await handler(event);
      // Refused messages are never acknowledged unseen: with no DLQ URL (VAULT_ROLLOUT_DLQ_URL) they come back, and the
      // redrive policy moves them to the DLQ (lambda-holds.test.ts shows them sent there with their reason). The
      // unreachable cluster's message comes back too. Nothing of the poison or the forged record was executed.
      expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['forged', 'ghost', 'poison']);
      const annotations =
        (await getWorkload('alpha', NS, 'Deployment', 'worker')).spec.template?.metadata?.annotations ?? {};
      expect(annotations['vault-rollout.io/versions']).toBe('{"secret/e2e/worker":2}');
      // The good record's rollout went on in a continuation of its own group, not in the invocation.
      const sent = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queue.queueUrl,
          MaxNumberOfMessages: 10,
          MessageSystemAttributeNames: ['MessageGroupId'],
          WaitTimeSeconds: 1,
        }),
      );
      expect((sent.Messages ?? []).map((m) => m.Attributes?.MessageGroupId?.startsWith('follow-alpha-'))).toEqual([
        true,
      ]);
    } finally {
      process.env = saved;
      sqs.destroy();
      await emulator.stop();
    }
  });
});
