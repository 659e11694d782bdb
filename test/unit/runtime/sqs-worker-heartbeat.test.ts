/**
 * The `worker` command's poller (lib/runtime/sqs-worker.ts): every receive asks for an explicit visibility timeout,
 * and while a message is worked a heartbeat extends it, so a step longer than the timeout is neither received again
 * by another poller nor dead-lettered; the heartbeat stops once the message is handed back.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/kernel/telemetry.ts';
import { changesByCluster } from '../../../lib/pipeline/intake.ts';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { startSqsWorker } from '../../../lib/runtime/sqs-worker.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/vault-rollout.fifo';
const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a], namespace: ns, names: ["*"], kind: Deployment, name: "{app}" }]
`);
const change: SecretChange = {
  namespace: '',
  mount: 'secret',
  key: 'api',
  path: 'secret/api',
  operation: 'write',
  version: 1,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id: 'id-api-1',
  time: '2026-11-20T10:00:00Z',
  record: 'line 1',
};
const VISIBILITY_SECONDS = 3;

describe('startSqsWorker: the visibility heartbeat', () => {
  it('extends the visibility of a message worked for longer than its timeout, then deletes it once', async () => {
    const [message] = [...changesByCluster([change], planRollouts(table, [change]))].flatMap(([cluster, cs]) =>
      rolloutMessages(cluster, cs, '2026-11-20T10:00:01Z'),
    );
    const sqs = mockClient(SQSClient);
    let served = false;
    sqs.on(ReceiveMessageCommand).callsFake(async () => {
      await new Promise((r) => setTimeout(r, 20));
      if (served) return {};
      served = true;
      return {
        Messages: [
          {
            MessageId: 'm1',
            ReceiptHandle: 'rh-m1',
            Body: JSON.stringify(message),
            Attributes: { MessageGroupId: 'a', ApproximateReceiveCount: '1' },
          },
        ],
      };
    });
    sqs.on(ChangeMessageVisibilityBatchCommand).resolves({ Successful: [{ Id: 'h0' }], Failed: [] });
    sqs.on(DeleteMessageBatchCommand).resolves({ Successful: [{ Id: 'd0' }], Failed: [] });
    const fake = fakeClusters({ a: ['api'] });
    // A read of the workload takes longer than a visibility timeout: the step outlasts it.
    const apiFor: typeof fake.apiFor = (access) => {
      const api = fake.apiFor(access);
      return {
        ...api,
        read: async (...args: Parameters<typeof api.read>) => (
          await new Promise((r) => setTimeout(r, 1.2 * VISIBILITY_SECONDS * 1000)),
          api.read(...args)
        ),
      };
    };
    const telemetry = memoryTelemetry();
    const worker = startSqsWorker(
      new SQSClient({ region: 'eu-west-1' }),
      { table, rotations: new MemoryRotationStore(), telemetry, executor: options(apiFor) },
      { queueUrl: QUEUE_URL, concurrency: 1, visibilityTimeoutSeconds: VISIBILITY_SECONDS },
    );
    try {
      // Bounded wait (at most 20 s) for the hand-back.
      for (let i = 0; i < 2000 && sqs.commandCalls(DeleteMessageBatchCommand).length === 0; i++)
        await new Promise((r) => setTimeout(r, 10));
    } finally {
      await worker.stop();
    }
    expect(sqs.commandCalls(ReceiveMessageCommand)[0]?.args[0].input.VisibilityTimeout).toBe(VISIBILITY_SECONDS);
    const beats = sqs
      .commandCalls(ChangeMessageVisibilityBatchCommand)
      .map((c) => c.args[0].input.Entries?.map((e) => [e.ReceiptHandle, e.VisibilityTimeout]));
    expect(beats.length).toBeGreaterThanOrEqual(1);
    for (const beat of beats) expect(beat).toEqual([['rh-m1', VISIBILITY_SECONDS]]);
    expect(
      sqs.commandCalls(DeleteMessageBatchCommand).map((c) => c.args[0].input.Entries?.map((e) => e.ReceiptHandle)),
    ).toEqual([['rh-m1']]);
    expect(telemetry.lines.filter((l) => l.level === 'error')).toEqual([]);
    sqs.restore();
  }, 30_000);
});
