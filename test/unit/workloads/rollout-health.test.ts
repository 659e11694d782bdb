import { describe, expect, it } from 'vitest';
import {
  argoRolloutHealth,
  conditionHealth,
  daemonSetHealth,
  deploymentHealth,
  statefulSetHealth,
  type Health,
} from '../../../lib/workloads/rollout-health.ts';
import { resourceDescriptor, WORKLOAD_KINDS } from '../../../lib/workloads/workload-kinds.ts';

const obj = (generation: number, spec: object, status: object) => ({
  metadata: { name: 'x', generation },
  spec,
  status,
});
type Row = [string, unknown, Health['state'], string?, Health['pods']?];

describe('Deployment health (kubectl rollout status rules)', () => {
  const rows: Row[] = [
    [
      'generation not observed yet',
      obj(2, { replicas: 3 }, { observedGeneration: 1, replicas: 3, updatedReplicas: 3, availableReplicas: 3 }),
      'progressing',
      'observe',
    ],
    [
      'new pods not all created',
      obj(2, { replicas: 3 }, { observedGeneration: 2, replicas: 4, updatedReplicas: 1, availableReplicas: 3 }),
      'progressing',
      '1 of 3 new pods created',
      { desired: 3, updated: 1, ready: 0 },
    ],
    [
      'old pods pending termination',
      obj(2, { replicas: 3 }, { observedGeneration: 2, replicas: 4, updatedReplicas: 3, availableReplicas: 3 }),
      'progressing',
      '1 old pods pending termination',
      { desired: 3, updated: 3, ready: 2 },
    ],
    [
      'new pods not available',
      obj(2, { replicas: 3 }, { observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 1 }),
      'progressing',
      '2 of 3 new pods not available',
      { desired: 3, updated: 3, ready: 1 },
    ],
    [
      'complete',
      obj(2, { replicas: 3 }, { observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 3 }),
      'complete',
      undefined,
      { desired: 3, updated: 3, ready: 3 },
    ],
    [
      'observed a later generation',
      obj(2, { replicas: 3 }, { observedGeneration: 3, replicas: 3, updatedReplicas: 3, availableReplicas: 3 }),
      'complete',
    ],
    [
      'replicas omitted means 1',
      obj(1, {}, { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 }),
      'complete',
      undefined,
      { desired: 1, updated: 1, ready: 1 },
    ],
    [
      'scaled to zero',
      obj(1, { replicas: 0 }, { observedGeneration: 1 }),
      'complete',
      undefined,
      { desired: 0, updated: 0, ready: 0 },
    ],
    [
      'progress deadline exceeded',
      obj(
        2,
        { replicas: 3 },
        {
          observedGeneration: 2,
          replicas: 3,
          updatedReplicas: 3,
          availableReplicas: 1,
          conditions: [
            {
              type: 'Progressing',
              status: 'False',
              reason: 'ProgressDeadlineExceeded',
              message: 'ReplicaSet "x-1" has timed out progressing.',
            },
          ],
        },
      ),
      'failed',
      'ProgressDeadlineExceeded (ReplicaSet "x-1" has timed out progressing.)',
      { desired: 3, updated: 3, ready: 1 },
    ],
    ['no status at all', { metadata: { generation: 1 }, spec: { replicas: 2 } }, 'progressing'],
    ['not even an object', null, 'progressing'],
  ];
  it.each(rows)('%s', (_, o, state, message, pods) => {
    const h = deploymentHealth(o);
    expect(h.state).toBe(state);
    if (message) expect(h.message).toContain(message);
    if (pods) expect(h.pods).toEqual(pods);
  });
});

describe('StatefulSet health', () => {
  const rows: Row[] = [
    [
      'OnDelete has nothing to wait for',
      obj(2, { replicas: 3, updateStrategy: { type: 'OnDelete' } }, {}),
      'none',
      'OnDelete',
    ],
    ['observedGeneration 0', obj(2, { replicas: 3 }, { observedGeneration: 0 }), 'progressing', 'observe'],
    [
      'generation not observed',
      obj(2, { replicas: 3 }, { observedGeneration: 1, readyReplicas: 3 }),
      'progressing',
      'observe',
    ],
    [
      'pods not ready',
      obj(
        2,
        { replicas: 3 },
        { observedGeneration: 2, readyReplicas: 2, updatedReplicas: 1, currentRevision: 'a', updateRevision: 'b' },
      ),
      'progressing',
      '1 of 3 pods not Ready',
    ],
    [
      'revisions differ',
      obj(
        2,
        { replicas: 3 },
        { observedGeneration: 2, readyReplicas: 3, updatedReplicas: 2, currentRevision: 'a', updateRevision: 'b' },
      ),
      'progressing',
      '2 of 3 pods at revision b',
    ],
    [
      'complete',
      obj(
        2,
        { replicas: 3 },
        { observedGeneration: 2, readyReplicas: 3, updatedReplicas: 3, currentRevision: 'b', updateRevision: 'b' },
      ),
      'complete',
      undefined,
      { desired: 3, updated: 3, ready: 3 },
    ],
    [
      'partition: waiting',
      obj(
        2,
        { replicas: 3, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 1 } } },
        { observedGeneration: 2, readyReplicas: 3, updatedReplicas: 1, currentRevision: 'a', updateRevision: 'b' },
      ),
      'progressing',
      '1 of 2 new pods',
    ],
    [
      'partition: complete',
      obj(
        2,
        { replicas: 3, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 1 } } },
        { observedGeneration: 2, readyReplicas: 3, updatedReplicas: 2, currentRevision: 'a', updateRevision: 'b' },
      ),
      'complete',
      'partition 1',
    ],
  ];
  it.each(rows)('%s', (_, o, state, message, pods) => {
    const h = statefulSetHealth(o);
    expect(h.state).toBe(state);
    if (message) expect(h.message).toContain(message);
    if (pods) expect(h.pods).toEqual(pods);
  });
});

describe('DaemonSet health', () => {
  const rows: Row[] = [
    ['OnDelete', obj(2, { updateStrategy: { type: 'OnDelete' } }, {}), 'none'],
    [
      'not observed',
      obj(2, {}, { observedGeneration: 1, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 3 }),
      'progressing',
    ],
    [
      'not all scheduled',
      obj(2, {}, { observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 2, numberAvailable: 3 }),
      'progressing',
      '2 of 3 new pods scheduled',
    ],
    [
      'not all available',
      obj(2, {}, { observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 2 }),
      'progressing',
      '1 of 3 new pods not available',
    ],
    [
      'complete',
      obj(2, {}, { observedGeneration: 2, desiredNumberScheduled: 3, updatedNumberScheduled: 3, numberAvailable: 3 }),
      'complete',
      undefined,
      { desired: 3, updated: 3, ready: 3 },
    ],
  ];
  it.each(rows)('%s', (_, o, state, message, pods) => {
    const h = daemonSetHealth(o);
    expect(h.state).toBe(state);
    if (message) expect(h.message).toContain(message);
    if (pods) expect(h.pods).toEqual(pods);
  });
});

describe('Argo Rollout health', () => {
  const spec = { replicas: 2, restartAt: '2026-01-01T00:00:00Z' };
  const rows: Row[] = [
    [
      'observedGeneration is a string that does not match',
      obj(3, spec, { observedGeneration: '2', phase: 'Healthy', restartedAt: '2026-01-01T00:00:00Z' }),
      'progressing',
      'observe',
    ],
    [
      'Healthy but not restarted yet',
      obj(3, spec, { observedGeneration: '3', phase: 'Healthy', restartedAt: '2025-12-01T00:00:00Z' }),
      'progressing',
      'restarted',
    ],
    [
      'Healthy and restarted',
      obj(3, spec, {
        observedGeneration: '3',
        phase: 'Healthy',
        restartedAt: '2026-01-01T00:00:00Z',
        updatedReplicas: 2,
        availableReplicas: 2,
      }),
      'complete',
      'Healthy',
      { desired: 2, updated: 2, ready: 2 },
    ],
    [
      'Degraded',
      obj(3, spec, { observedGeneration: '3', phase: 'Degraded', message: 'ProgressDeadlineExceeded: timed out' }),
      'failed',
      'Degraded (ProgressDeadlineExceeded: timed out)',
    ],
    [
      'Degraded of an older generation is not ours',
      obj(3, spec, { observedGeneration: '2', phase: 'Degraded' }),
      'progressing',
    ],
    [
      'Paused',
      obj(3, spec, {
        observedGeneration: '3',
        phase: 'Paused',
        restartedAt: '2026-01-01T00:00:00Z',
        message: 'CanaryPauseStep',
      }),
      'progressing',
      'Paused (CanaryPauseStep)',
    ],
  ];
  it.each(rows)('%s', (_, o, state, message, pods) => {
    const h = argoRolloutHealth(o);
    expect(h.state).toBe(state);
    if (message) expect(h.message).toContain(message);
    if (pods) expect(h.pods).toEqual(pods);
  });
});

describe('custom resources wait for a named condition', () => {
  const ready = conditionHealth({ condition: 'Ready' });
  const rows: Row[] = [
    ['no condition', obj(2, {}, {}), 'progressing', 'no Ready condition yet'],
    [
      'older generation observed',
      obj(2, {}, { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }] }),
      'progressing',
    ],
    [
      'condition on an older generation',
      obj(2, {}, { conditions: [{ type: 'Ready', status: 'True', observedGeneration: 1 }] }),
      'progressing',
    ],
    [
      'False with reason',
      obj(
        2,
        {},
        {
          observedGeneration: 2,
          conditions: [{ type: 'Ready', status: 'False', reason: 'Reconciling', message: 'syncing' }],
        },
      ),
      'progressing',
      'Ready=False Reconciling: syncing',
    ],
    ['True', obj(2, {}, { observedGeneration: 2, conditions: [{ type: 'Ready', status: 'True' }] }), 'complete'],
  ];
  it.each(rows)('%s', (_, o, state, message) => {
    const h = ready(o);
    expect(h.state).toBe(state);
    if (message) expect(h.message).toContain(message);
  });
});

describe('descriptors carry their health rule', () => {
  it('CronJob and resources without a condition have nothing to wait for', () => {
    expect(WORKLOAD_KINDS.CronJob.health({}).state).toBe('none');
    expect(resourceDescriptor('example.com/v1', 'Harbor', { spec: { x: 1 } }).health({}).state).toBe('none');
    expect(
      resourceDescriptor('example.com/v1', 'Harbor', { spec: { x: 1 } }, { condition: 'Ready' }).health({}).state,
    ).toBe('progressing');
  });
  it('workload kinds use the kubectl rules', () => {
    expect(WORKLOAD_KINDS.Deployment.health).toBe(deploymentHealth);
    expect(WORKLOAD_KINDS.StatefulSet.health).toBe(statefulSetHealth);
    expect(WORKLOAD_KINDS.DaemonSet.health).toBe(daemonSetHealth);
    expect(WORKLOAD_KINDS.Rollout.health).toBe(argoRolloutHealth);
  });
});
