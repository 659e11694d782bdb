/** The operators' descriptors: refusals, and "synced after the nudge" read from the resource alone. */
import { describe, expect, it } from 'vitest';
import { externalSecret, SYNC_ANNOTATIONS, vaultStaticSecret } from '../../../lib/workloads/sync-kinds.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';

const nudgedAt = '2026-11-21T10:00:00.500Z';
const meta = (observed = 'v-before') => ({
  name: 'orders-db',
  annotations: { [SYNC_ANNOTATIONS.requestedAt]: nudgedAt, [SYNC_ANNOTATIONS.observed]: observed },
});
const es = (
  spec: Record<string, unknown>,
  status: Record<string, unknown> = {},
  metadata: KubeObject['metadata'] = meta(),
): KubeObject => ({ metadata, spec, status });
const ready = (status: string, reason: string, at = '2026-11-21T10:00:01Z', message = '') => ({
  conditions: [{ type: 'Ready', status, reason, message, lastTransitionTime: at }],
});

describe('ExternalSecret', () => {
  it.each([
    [
      'refreshPolicy CreatedOnce',
      { refreshPolicy: 'CreatedOnce' },
      /CreatedOnce: ESO syncs this ExternalSecret only when it is created.*use refreshPolicy OnChange/,
    ],
    [
      'Periodic with refreshInterval 0',
      { refreshPolicy: 'Periodic', refreshInterval: '0' },
      /refreshInterval 0: ESO ignores annotation changes.*use refreshPolicy: OnChange/,
    ],
    ['no policy (Periodic) with refreshInterval 0s', { refreshInterval: '0s' }, /refreshInterval 0s/],
    ['Periodic with 1h', { refreshPolicy: 'Periodic', refreshInterval: '1h' }, undefined],
    ['OnChange with 0', { refreshPolicy: 'OnChange', refreshInterval: '0' }, undefined],
    ['defaults', {}, undefined],
  ])('refusal: %s', (_name, spec, expected) => {
    const refusal = externalSecret.refusal(es(spec));
    if (expected === undefined) expect(refusal).toBeUndefined();
    else expect(refusal).toMatch(expected);
  });

  it.each([
    [
      'synced at the nudge second, marker moved',
      { refreshTime: '2026-11-21T10:00:00Z', syncedResourceVersion: 'v-after', ...ready('True', 'SecretSynced') },
      'complete',
    ],
    [
      'refreshTime before the nudge',
      { refreshTime: '2026-11-21T09:59:59Z', syncedResourceVersion: 'v-after', ...ready('True', 'SecretSynced') },
      'progressing',
    ],
    [
      'refreshed in the nudge second but the marker did not move (a refresh just before the nudge)',
      { refreshTime: '2026-11-21T10:00:00Z', syncedResourceVersion: 'v-before', ...ready('True', 'SecretSynced') },
      'progressing',
    ],
    [
      'Ready False SecretSyncedError after the nudge',
      {
        refreshTime: '2026-11-21T09:00:00Z',
        ...ready('False', 'SecretSyncedError', '2026-11-21T10:00:02Z', 'could not get secret data from provider'),
      },
      'failed',
    ],
    [
      'SecretSyncedError from before the nudge waits for the retry',
      { ...ready('False', 'SecretSyncedError', '2026-11-21T09:00:00Z', 'old error') },
      'progressing',
    ],
    ['no status yet', {}, 'progressing'],
  ])('health: %s', (_name, status, state) => {
    expect(externalSecret.health(es({}, status)).state).toBe(state);
  });

  it("says why it failed, with ESO's message", () => {
    expect(
      externalSecret.health(
        es({}, ready('False', 'SecretSyncedError', '2026-11-21T10:00:02Z', 'could not get secret data from provider')),
      ).message,
    ).toBe('ESO reports SecretSyncedError: could not get secret data from provider');
  });

  it('not nudged: nothing to wait for yet', () => {
    expect(
      externalSecret.health({
        metadata: { name: 'x' },
        status: { refreshTime: '2030-01-01T00:00:00Z', ...ready('True', 'SecretSynced') },
      }).state,
    ).toBe('progressing');
  });

  it('writes spec.target.name, else its own name', () => {
    expect(externalSecret.secretName(es({ target: { name: 'payments-db' } }))).toBe('payments-db');
    expect(externalSecret.secretName(es({ target: {} }))).toBe('orders-db');
  });

  it('the nudge is annotations only: token, versions, the nudge time and the marker before it', () => {
    const patch = externalSecret.restartPatch({
      annotations: {
        'kubectl.kubernetes.io/restartedAt': 't',
        'vault-rollout.io/restart-token': 'tok',
        'vault-rollout.io/versions': '{}',
      },
      restartAt: 't',
      now: nudgedAt,
      object: es({}, { syncedResourceVersion: '1-abc' }),
    });
    expect(patch).toEqual({
      metadata: {
        annotations: {
          'vault-rollout.io/restart-token': 'tok',
          'vault-rollout.io/versions': '{}',
          [SYNC_ANNOTATIONS.requestedAt]: nudgedAt,
          [SYNC_ANNOTATIONS.observed]: '1-abc',
        },
      },
    });
  });
});

describe('VaultStaticSecret', () => {
  const synced = (status: string, at: string, reason = 'SecretSynced') => ({
    conditions: [{ type: 'SecretSynced', status, reason, message: 'm', lastTransitionTime: at }],
  });
  it.each([
    ['the MAC moved', { secretMAC: 'mac-after', ...synced('True', '2026-11-21T09:00:00Z') }, 'complete'],
    [
      'the condition moved past the nudge (same data)',
      { secretMAC: 'v-before', ...synced('True', '2026-11-21T10:00:03Z') },
      'complete',
    ],
    ['nothing moved', { secretMAC: 'v-before', ...synced('True', '2026-11-21T09:00:00Z') }, 'progressing'],
    [
      'SecretSynced False after the nudge',
      { secretMAC: 'v-before', ...synced('False', '2026-11-21T10:00:03Z', 'SecretSyncError') },
      'failed',
    ],
  ])('health: %s', (_name, status, state) => {
    expect(vaultStaticSecret.health({ metadata: meta(), status }).state).toBe(state);
  });

  it('names the Secret it writes and the workloads VSO restarts itself', () => {
    const vss: KubeObject = {
      metadata: meta(),
      spec: {
        destination: { name: 'web-db' },
        rolloutRestartTargets: [
          { kind: 'Deployment', name: 'web' },
          { kind: 'argo.Rollout', name: 'canary' },
          { kind: 'Job', name: 'x' },
        ],
      },
    };
    expect(vaultStaticSecret.secretName(vss)).toBe('web-db');
    expect(vaultStaticSecret.restartedByOperator(vss)).toEqual([
      { kind: 'Deployment', name: 'web' },
      { kind: 'Rollout', name: 'canary' },
    ]);
  });

  it('hmacSecretData false: VSO ignores rolloutRestartTargets, so vault-rollout restarts them', () => {
    expect(
      vaultStaticSecret.restartedByOperator({
        spec: { hmacSecretData: false, rolloutRestartTargets: [{ kind: 'Deployment', name: 'web' }] },
      }),
    ).toEqual([]);
  });
});
