/** The worker's batch semantics: FIFO per cluster, partial failures, poison messages, credential refresh. */
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { memoryTelemetry } from '../../../lib/observability/telemetry.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import { planRollouts, targetsByCluster } from '../../../lib/plan/planner.ts';
import { rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import type { SecretChange } from '../../../lib/sources/secret-change.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a, b], namespace: ns, kind: Deployment, name: "{app}" }]
`);

const change = (key: string, version: number): SecretChange => ({ namespace: '', mount: 'secret', key, path: `secret/${key}`, operation: 'write', version, kvVersion: 2, kvVersionFrom: 'routes', source: 'audit', via: 'direct', id: `id-${key}-${version}`, time: '2026-11-20T10:00:00Z', record: 'line 1' });

let n = 0;
/** Queue records as the intake would queue them for these changes, one message per cluster. */
function records(...changes: SecretChange[]): QueueRecord[] {
  const plan = planRollouts(table, changes);
  return [...targetsByCluster(plan.targets)].flatMap(([cluster, targets]) => rolloutMessages(cluster, targets, changes.map((c) => c.id), '2026-11-20T10:00:01Z').map((m) => ({ messageId: `m${++n}`, body: JSON.stringify(m), groupId: cluster })));
}

describe('processBatch', () => {
  it('restarts every message, measures the lag, and reports no failure', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const telemetry = memoryTelemetry();
    const out = await processBatch(records(change('api', 1)), { table, telemetry, executor: options(fake.apiFor), now: () => Date.parse('2026-11-20T10:00:02Z') });
    expect(out.failed).toEqual([]);
    expect(out.results.map((r) => `${r.cluster}:${r.outcome}`).sort()).toEqual(['a:restarted', 'b:restarted']);
    expect(telemetry.metrics.filter((m) => m.name === 'VaultToPatchLag').map((m) => m.value)).toEqual([2000, 2000]);
  });

  it('fails the message of a failing cluster and the later messages of its group, not the other cluster', async () => {
    const fake = fakeClusters({ a: ['api', 'web'], b: ['api', 'web'] }, [{ cluster: 'a', op: 'patch', error: () => new ApiException(503, 'x', {}, {}), times: 99 }]);
    const first = records(change('api', 1));
    const second = records(change('web', 1));
    const batch = [...first, ...second];
    const out = await processBatch(batch, { table, telemetry: memoryTelemetry(), executor: options(fake.apiFor, { retry: { maxAttempts: 2, baseDelayMs: 1, maxDelayMs: 1, maxRetryAfterMs: 1 } }) });
    const ids = (cluster: string) => batch.filter((r) => r.groupId === cluster).map((r) => r.messageId);
    expect(out.failed.sort()).toEqual(ids('a').sort());
    // The second message of group a was not processed: its workload was never patched.
    expect(fake.calls.filter((c) => c.cluster === 'a' && c.name === 'web')).toEqual([]);
    expect(out.results.filter((r) => r.cluster === 'b').map((r) => r.outcome)).toEqual(['restarted', 'restarted']);
  });

  it('sends an unreadable message to the dead-letter path and says why', async () => {
    const telemetry = memoryTelemetry();
    const fake = fakeClusters({ a: ['api'] });
    const out = await processBatch([{ messageId: 'poison', body: '{"v":1,"cluster":"a"}', groupId: 'a' }, ...records(change('api', 1)).filter((r) => r.groupId === 'a')], { table, telemetry, executor: options(fake.apiFor) });
    expect(out.failed).toHaveLength(2);
    expect(telemetry.lines.find((l) => l.level === 'error')).toMatchObject({ message: 'unreadable rollout message', fields: { messageId: 'poison', error: expect.stringContaining('targets') } });
  });

  it('drops cached credentials of a cluster that refused them', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] }, [{ cluster: 'a', op: 'read', error: () => new ApiException(401, 'x', {}, {}), times: 1 }]);
    const invalidated: string[] = [];
    const out = await processBatch(records(change('api', 1)), { table, telemetry: memoryTelemetry(), executor: options(fake.apiFor), invalidate: (c) => void invalidated.push(c) });
    expect(invalidated).toEqual(['a']);
    expect(out.failed).toHaveLength(1);
  });

  it('is safe to redeliver: a message run twice restarts once', async () => {
    const fake = fakeClusters({ a: ['api'], b: ['api'] });
    const batch = records(change('api', 3));
    await processBatch(batch, { table, telemetry: memoryTelemetry(), executor: options(fake.apiFor) });
    const again = await processBatch(batch, { table, telemetry: memoryTelemetry(), executor: options(fake.apiFor) });
    expect(again.results.map((r) => r.outcome)).toEqual(['unchanged', 'unchanged']);
  });
});
