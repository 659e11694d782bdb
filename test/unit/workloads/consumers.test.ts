/** Consumer discovery's matcher: every way a pod template can reference a Secret or mount a SecretProviderClass. */
import { describe, expect, it } from 'vitest';
import {
  consumersAmong,
  discoverConsumers,
  podSpecOf,
  referencesIn,
  type ConsumedObject,
} from '../../../lib/workloads/consumers.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';

const db: ConsumedObject = { secret: 'db' };
const spc: ConsumedObject = { secretProviderClass: 'vault-web' };
const container = (extra: Record<string, unknown>) => ({ name: 'app', image: 'x', ...extra });

describe('referencesIn', () => {
  it.each([
    [
      'env valueFrom.secretKeyRef',
      {
        containers: [container({ env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] })],
      },
      db,
      ['env of container app (secretKeyRef)'],
    ],
    [
      'envFrom secretRef',
      { containers: [container({ envFrom: [{ secretRef: { name: 'db' } }] })] },
      db,
      ['envFrom of container app (secretRef)'],
    ],
    [
      'a secret volume',
      { containers: [container({})], volumes: [{ name: 'creds', secret: { secretName: 'db' } }] },
      db,
      ['secret volume creds'],
    ],
    [
      'a projected volume source',
      {
        containers: [container({})],
        volumes: [{ name: 'all', projected: { sources: [{ configMap: { name: 'c' } }, { secret: { name: 'db' } }] } }],
      },
      db,
      ['projected volume all'],
    ],
    [
      'an init container',
      {
        initContainers: [container({ name: 'migrate', envFrom: [{ secretRef: { name: 'db' } }] })],
        containers: [container({})],
      },
      db,
      ['envFrom of init container migrate (secretRef)'],
    ],
    [
      'an ephemeral container',
      {
        containers: [container({})],
        ephemeralContainers: [
          container({ name: 'debug', env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'k' } } }] }),
        ],
      },
      db,
      ['env of ephemeral container debug (secretKeyRef)'],
    ],
    [
      'several forms at once',
      {
        containers: [container({ envFrom: [{ secretRef: { name: 'db' } }] })],
        volumes: [{ name: 'v', secret: { secretName: 'db' } }],
      },
      db,
      ['envFrom of container app (secretRef)', 'secret volume v'],
    ],
    [
      'another Secret',
      {
        containers: [
          container({
            envFrom: [{ secretRef: { name: 'db-old' } }],
            env: [{ name: 'X', valueFrom: { configMapKeyRef: { name: 'db', key: 'k' } } }],
          }),
        ],
        volumes: [{ name: 'v', configMap: { name: 'db' } }],
      },
      db,
      [],
    ],
    [
      'a CSI volume of the Secrets Store driver',
      {
        containers: [container({})],
        volumes: [
          {
            name: 'secrets',
            csi: {
              driver: 'secrets-store.csi.k8s.io',
              readOnly: true,
              volumeAttributes: { secretProviderClass: 'vault-web' },
            },
          },
        ],
      },
      spc,
      ['CSI volume secrets'],
    ],
    [
      'a CSI volume of another class',
      {
        volumes: [
          {
            name: 's',
            csi: { driver: 'secrets-store.csi.k8s.io', volumeAttributes: { secretProviderClass: 'other' } },
          },
        ],
      },
      spc,
      [],
    ],
    [
      'another CSI driver naming the class',
      {
        volumes: [
          { name: 's', csi: { driver: 'example.csi.k8s.io', volumeAttributes: { secretProviderClass: 'vault-web' } } },
        ],
      },
      spc,
      [],
    ],
    [
      'a Secret named like the class is not a mount of it',
      { volumes: [{ name: 's', secret: { secretName: 'vault-web' } }] },
      spc,
      [],
    ],
    ['no pod spec at all', undefined, db, []],
    ['malformed fields', { containers: 'x', volumes: [null, 3, { secret: 'db' }] }, db, []],
  ])('%s', (_name, spec, consumed, expected) => {
    expect(referencesIn(spec, consumed)).toEqual(expected);
  });
});

describe('consumersAmong', () => {
  const pod = { spec: { containers: [container({ envFrom: [{ secretRef: { name: 'db' } }] })] } };
  it.each([
    ['Deployment', { spec: { template: pod } }],
    ['StatefulSet', { spec: { template: pod } }],
    ['DaemonSet', { spec: { template: pod } }],
    ['Rollout', { spec: { template: pod } }],
    ['CronJob', { spec: { jobTemplate: { spec: { template: pod } } } }],
  ] as const)('finds the pod template of a %s', (kind, object) => {
    expect(podSpecOf(kind, object as KubeObject)).toEqual(pod.spec);
    const found = consumersAmong(
      kind,
      [
        { metadata: { name: 'b' }, ...object },
        { metadata: { name: 'a' }, ...object },
        { metadata: { name: 'no' }, spec: {} },
      ] as KubeObject[],
      db,
    );
    expect(found.map((c) => [c.kind, c.name])).toEqual([
      [kind, 'a'],
      [kind, 'b'],
    ]);
  });

  it('an Argo Rollout with workloadRef has no template of its own: its Deployment is the consumer', () => {
    expect(
      consumersAmong(
        'Rollout',
        [{ metadata: { name: 'r' }, spec: { workloadRef: { kind: 'Deployment', name: 'd' } } }],
        db,
      ),
    ).toEqual([]);
  });
});

describe('discoverConsumers', () => {
  const deployment = {
    metadata: { name: 'api' },
    spec: { template: { spec: { containers: [container({ envFrom: [{ secretRef: { name: 'db' } }] })] } } },
  };
  it('lists each kind once; a kind the cluster does not serve has no consumers', async () => {
    const listed: string[] = [];
    const found = await discoverConsumers(
      async (kind) => {
        listed.push(kind.kind);
        if (kind.kind === 'Rollout')
          return { ok: false, failure: { reason: 'not found', retryable: false, detail: '404' } };
        return { ok: true, value: kind.kind === 'Deployment' ? [deployment] : [] };
      },
      'ns',
      db,
    );
    expect(listed.sort()).toEqual(['CronJob', 'DaemonSet', 'Deployment', 'Rollout', 'StatefulSet']);
    expect(found.ok && found.consumers.map((c) => `${c.kind}/${c.name}`)).toEqual(['Deployment/api']);
  });

  it('any other failure fails the discovery (restarting only some consumers would go unnoticed)', async () => {
    const found = await discoverConsumers(
      async (kind) =>
        kind.kind === 'StatefulSet'
          ? { ok: false, failure: { reason: 'forbidden', retryable: false, detail: 'no list' } }
          : { ok: true, value: [deployment] },
      'ns',
      db,
    );
    expect(found).toEqual({
      ok: false,
      reason: 'forbidden',
      detail: 'could not list StatefulSets in ns to find the consumers: no list',
    });
  });
});
