/**
 * descriptorOf: the one descriptor of a target, shared by the engine, reconcile and status (lib/plan/target-descriptor.ts).
 * Before it there were three, and they differed on an operator's kind routed as `resource:`.
 */
import { describe, expect, it } from 'vitest';
import type { RolloutTarget } from '../../../lib/plan/planner.ts';
import { descriptorOf } from '../../../lib/plan/target-descriptor.ts';
import { SYNC_KINDS } from '../../../lib/workloads/sync-kinds.ts';
import { WORKLOAD_KINDS } from '../../../lib/workloads/workload-kinds.ts';

const base = {
  cluster: 'a',
  namespace: 'apps',
  routes: ['r'],
  paths: ['secret/x'],
  secrets: [],
  restartToken: 'tok',
  restartedAt: null,
};
const input = { annotations: { 'vault-rollout.io/versions': '{"secret/x":2}' }, restartAt: '2026-11-20T10:00:00Z' };

describe('descriptorOf', () => {
  it.each([
    {
      what: 'a Deployment target: the Deployment descriptor',
      target: { ...base, type: 'workload', kind: 'Deployment', name: 'api' },
      same: WORKLOAD_KINDS.Deployment,
    },
    {
      what: 'a CronJob target: the CronJob descriptor',
      target: { ...base, type: 'workload', kind: 'CronJob', name: 'job' },
      same: WORKLOAD_KINDS.CronJob,
    },
    {
      what: 'an ExternalSecret sync target: the operator descriptor',
      target: { ...base, type: 'consumers', kind: 'ExternalSecret', name: 'db', restart: 'consumers' },
      same: SYNC_KINDS.ExternalSecret,
    },
    {
      what: 'a VaultStaticSecret sync target: the operator descriptor',
      target: { ...base, type: 'consumers', kind: 'VaultStaticSecret', name: 'db', restart: 'none' },
      same: SYNC_KINDS.VaultStaticSecret,
    },
  ] as Array<{ what: string; target: RolloutTarget; same: unknown }>)('$what', ({ target, same }) => {
    expect(descriptorOf(target)).toBe(same);
  });

  it.each([
    { what: 'a custom resource', kind: 'Widget', apiVersion: 'example.com/v1', wait: { condition: 'Ready' } },
    {
      what: 'an operator kind routed as resource: (patched as the route says, not nudged)',
      kind: 'ExternalSecret',
      apiVersion: 'external-secrets.io/v1',
      wait: undefined,
    },
  ])('a resource target, $what: the route resource, its template and its wait', ({ kind, apiVersion, wait }) => {
    const target: RolloutTarget = {
      ...base,
      type: 'resource',
      apiVersion,
      kind,
      name: 'w',
      patch: { spec: { refresh: 'now' } },
      ...(wait ? { wait } : {}),
    };
    const d = descriptorOf(target);
    expect({ apiVersion: d.apiVersion, kind: d.kind }).toEqual({ apiVersion, kind });
    expect(d).not.toBe(SYNC_KINDS.ExternalSecret);
    expect(d.restartPatch(input)).toEqual({ spec: { refresh: 'now' }, metadata: { annotations: input.annotations } });
    expect(
      d.health({
        metadata: { generation: 1 },
        status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }] },
      }).state,
    ).toBe(wait ? 'complete' : 'none');
  });

  it.each([{ kind: 'Secret' }, { kind: 'SecretProviderClass' }] as const)(
    'a consumers target of a $kind has no descriptor of its own (each consumer has its kind)',
    ({ kind }) => {
      expect(() => descriptorOf({ ...base, type: 'consumers', kind, name: 'db', restart: 'consumers' })).toThrow(
        `a ${kind} target has no descriptor of its own`,
      );
    },
  );
});
