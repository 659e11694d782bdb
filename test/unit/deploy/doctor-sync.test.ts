/** What doctor checks for sync and consumers targets: the operator's kind, and every workload kind discovery lists. */
import { describe, expect, it } from 'vitest';
import { requiredAccess } from '../../../lib/deploy/doctor.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';

const table = (targets: string) =>
  loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
routes:
  - name: r
    match: { path: "secret/x" }
    targets:
${targets}`);

const brief = (t: ReturnType<typeof table>) =>
  (requiredAccess(t).get('a') ?? []).map((k) => `${k.kind} ${k.namespace}${k.consumer ? ' (consumer)' : ''}`);

describe('requiredAccess', () => {
  it.each([
    [
      'a sync target: the operator kind, then every workload kind as a consumer',
      '      - { clusters: [a], namespace: p, sync: { kind: ExternalSecret, name: x } }\n',
      [
        'ExternalSecret p',
        'Deployment p (consumer)',
        'StatefulSet p (consumer)',
        'DaemonSet p (consumer)',
        'Rollout p (consumer)',
        'CronJob p (consumer)',
      ],
    ],
    [
      'sync only (restart: none): the operator kind alone',
      '      - { clusters: [a], namespace: p, sync: { kind: VaultStaticSecret, name: x }, restart: none }\n',
      ['VaultStaticSecret p'],
    ],
    [
      'a named Rollout target stays required beside a consumers target',
      '      - { clusters: [a], namespace: p, consumers: { secret: s } }\n      - { clusters: [a], namespace: p, kind: Rollout, name: r }\n',
      [
        'Deployment p (consumer)',
        'StatefulSet p (consumer)',
        'DaemonSet p (consumer)',
        'Rollout p',
        'CronJob p (consumer)',
      ],
    ],
  ])('%s', (_name, targets, expected) => {
    expect(brief(table(targets))).toEqual(expected);
  });
});
