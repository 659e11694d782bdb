import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  importRoutes,
  renderImport,
  type ImportCluster,
  type ImportSource,
} from '../../../lib/importer/import-routes.ts';
import {
  emptyInventory,
  reloaderRestarts,
  referencesSecret,
  type ClusterInventory,
} from '../../../lib/importer/import-sources.ts';
import type { KubeObject } from '../../../lib/workloads/workload-kinds.ts';

// Objects as the operators' CRDs and the API server return them (trimmed to the fields that matter).
const vss = (ns: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'secrets.hashicorp.com/v1beta1',
  kind: 'VaultStaticSecret',
  metadata: { namespace: ns, name },
  spec,
});
const vssKv2 = (ns: string, name: string, path: string, extra: Record<string, unknown> = {}) =>
  vss(ns, name, {
    vaultAuthRef: 'auth',
    mount: 'secret',
    type: 'kv-v2',
    path,
    refreshAfter: '1h',
    destination: { name: `${name}-secret`, create: true },
    ...extra,
  });
const vaultAuth = (ns: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  kind: 'VaultAuth',
  metadata: { namespace: ns, name },
  spec,
});
const vaultConnection = (ns: string, name: string, address: string): KubeObject => ({
  kind: 'VaultConnection',
  metadata: { namespace: ns, name },
  spec: { address },
});
const store = (
  kind: 'SecretStore' | 'ClusterSecretStore',
  name: string,
  provider: Record<string, unknown>,
  ns?: string,
): KubeObject => ({
  kind,
  metadata: { name, ...(ns ? { namespace: ns } : {}) },
  spec: { provider },
});
const vaultStore = (name: string, vault: Record<string, unknown>, ns = 'payments') =>
  store(
    'SecretStore',
    name,
    {
      vault: {
        server: 'https://vault.example:8200',
        auth: { kubernetes: { mountPath: 'kubernetes', role: 'eso' } },
        ...vault,
      },
    },
    ns,
  );
const es = (ns: string, name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: 'external-secrets.io/v1',
  kind: 'ExternalSecret',
  metadata: { namespace: ns, name },
  spec: { refreshInterval: '1h', secretStoreRef: { name: 'vault', kind: 'SecretStore' }, ...spec },
});

const deployment = (
  ns: string,
  name: string,
  annotations: Record<string, string>,
  pod: Record<string, unknown>,
  kind = 'Deployment',
): KubeObject => ({
  kind,
  metadata: { namespace: ns, name, annotations },
  spec: kind === 'CronJob' ? { jobTemplate: { spec: { template: { spec: pod } } } } : { template: { spec: pod } },
});
const envFrom = (secret: string) => ({
  containers: [{ name: 'app', image: 'app', envFrom: [{ secretRef: { name: secret } }] }],
});

const inventory = (cluster: string, parts: Partial<ClusterInventory>): ClusterInventory => ({
  ...emptyInventory(cluster),
  ...parts,
});
const CLUSTERS: ImportCluster[] = [
  { name: 'alpha', kubeconfig: 'alpha.kubeconfig', labels: { env: 'prod' } },
  { name: 'beta', kubeconfig: 'beta.kubeconfig', labels: { env: 'prod' } },
  { name: 'gamma', kubeconfig: 'gamma.kubeconfig', labels: { env: 'staging' } },
];
const ALL = new Set<ImportSource>(['vso', 'eso', 'reloader']);
const run = (
  invs: ClusterInventory[],
  from: ReadonlySet<ImportSource> = ALL,
  vaultAddr?: string,
  vsoOperatorNamespace?: string,
) =>
  importRoutes(invs, {
    clusters: CLUSTERS,
    from,
    ...(vaultAddr ? { vaultAddr } : {}),
    ...(vsoOperatorNamespace ? { vsoOperatorNamespace } : {}),
  });

describe('referencesSecret', () => {
  it.each([
    ['envFrom', envFrom('db'), true],
    [
      'env secretKeyRef',
      {
        containers: [{ name: 'a', env: [{ name: 'P', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] }],
      },
      true,
    ],
    ['secret volume', { containers: [{ name: 'a' }], volumes: [{ name: 'v', secret: { secretName: 'db' } }] }, true],
    [
      'projected volume',
      {
        containers: [{ name: 'a' }],
        volumes: [{ name: 'v', projected: { sources: [{ configMap: { name: 'x' } }, { secret: { name: 'db' } }] } }],
      },
      true,
    ],
    [
      'init container',
      { containers: [{ name: 'a' }], initContainers: [{ name: 'i', envFrom: [{ secretRef: { name: 'db' } }] }] },
      true,
    ],
    ['another Secret', envFrom('other'), false],
    ['a ConfigMap of that name', { containers: [{ name: 'a', envFrom: [{ configMapRef: { name: 'db' } }] }] }, false],
  ])('%s → %s', (_what, pod, expected) => {
    expect(referencesSecret(deployment('ns', 'w', {}, pod), 'db')).toBe(expected);
  });

  it('reads a CronJob from its jobTemplate', () => {
    expect(referencesSecret(deployment('ns', 'w', {}, envFrom('db'), 'CronJob'), 'db')).toBe(true);
  });
});

describe('reloaderRestarts', () => {
  it.each([
    ['auto and referenced', { 'reloader.stakater.com/auto': 'true' }, envFrom('db'), {}, true],
    ['auto but not referenced', { 'reloader.stakater.com/auto': 'true' }, envFrom('other'), {}, false],
    ['secret auto and referenced', { 'secret.reloader.stakater.com/auto': 'true' }, envFrom('db'), {}, true],
    ['auto "false"', { 'reloader.stakater.com/auto': 'false' }, envFrom('db'), {}, false],
    ['named', { 'secret.reloader.stakater.com/reload': 'cache, db' }, envFrom('other'), {}, true],
    ['named by regexp', { 'secret.reloader.stakater.com/reload': 'd.*' }, envFrom('other'), {}, true],
    ['named, another', { 'secret.reloader.stakater.com/reload': 'dbx,cache' }, envFrom('db'), {}, false],
    [
      'nested quantifiers, evaluated without backtracking',
      { 'secret.reloader.stakater.com/reload': '(d+)+' },
      envFrom('db'),
      {},
      false,
    ],
    // Reloader compiles "^" + name + "$" with Go's regexp: the whole of its syntax counts, not only . and *.
    ['an alternation in a group', { 'secret.reloader.stakater.com/reload': '(cache|db)' }, envFrom('other'), {}, true],
    ['a class and +', { 'secret.reloader.stakater.com/reload': '[a-d]+' }, envFrom('other'), {}, true],
    ['more than four stars', { 'secret.reloader.stakater.com/reload': 'd.*.*.*.*.*b' }, envFrom('other'), {}, true],
    [
      '"^" + "d|x" + "$" is ^d|x$: a prefix d matches',
      { 'secret.reloader.stakater.com/reload': 'd|x' },
      envFrom('other'),
      {},
      true,
    ],
    [
      'a pattern Go does not compile is compared as text',
      { 'secret.reloader.stakater.com/reload': 'd**' },
      envFrom('other'),
      {},
      false,
    ],
    [
      'search, Secret matched',
      { 'reloader.stakater.com/search': 'true' },
      envFrom('db'),
      { 'reloader.stakater.com/match': 'true' },
      true,
    ],
    ['search, Secret not matched', { 'reloader.stakater.com/search': 'true' }, envFrom('db'), {}, false],
    [
      'Secret ignored',
      { 'reloader.stakater.com/auto': 'true' },
      envFrom('db'),
      { 'reloader.stakater.com/ignore': 'true' },
      false,
    ],
    ['no annotation', {}, envFrom('db'), {}, false],
  ])('%s → %s', (_what, annotations, pod, secretAnnotations, expected) => {
    expect(reloaderRestarts(deployment('ns', 'w', annotations, pod), 'db', secretAnnotations)).toBe(expected);
  });
});

describe('reloaderRestarts: crafted entries of the named list', () => {
  // One 253-character entry of wildcards against a 253-character name took 255 ms by backtracking; the matcher is
  // linear (its time is a figure of `npm run bench -- go-regexp`), and the answer is Go's.
  const reload = 'secret.reloader.stakater.com/reload';
  it.each([
    ['stars', `${'.*'.repeat(126)}x`],
    ['nested groups', `${'(a*)*'.repeat(50)}x`],
    ['alternations', `${'(a|a)*'.repeat(42)}x`],
  ])('%s: a 253-character name that does not match is not restarted', (_what, entry) => {
    expect(entry.length).toBeLessThanOrEqual(253);
    expect(reloaderRestarts(deployment('ns', 'w', { [reload]: entry }, envFrom('other')), 'a'.repeat(252), {})).toBe(
      false,
    );
    expect(
      reloaderRestarts(deployment('ns', 'w', { [reload]: entry }, envFrom('other')), `${'a'.repeat(251)}x`, {}),
    ).toBe(true);
  });
});

describe('importRoutes: VaultStaticSecrets', () => {
  const auth = vaultAuth('payments', 'auth', { method: 'kubernetes', namespace: 'team-a', vaultConnectionRef: 'conn' });
  const conn = vaultConnection('payments', 'conn', 'https://vault.example:8200');

  it('one route per path, the same target in two prod clusters as a label selector', () => {
    const parts = {
      vaultStaticSecrets: [
        vssKv2('payments', 'api-db', 'payments/api/db', {
          rolloutRestartTargets: [{ kind: 'Deployment', name: 'api' }],
        }),
      ],
      vaultAuths: [auth],
      vaultConnections: [conn],
    };
    const result = run([inventory('alpha', parts), inventory('beta', parts), inventory('gamma', {})]);
    expect(result.mounts).toEqual({ 'team-a/secret': 2 });
    expect(result.servers).toEqual(['https://vault.example:8200']);
    expect(result.routes).toEqual([
      {
        name: 'team-a-secret-payments-api-db',
        match: { namespace: 'team-a', path: 'secret/payments/api/db' },
        targets: [
          {
            clusters: { env: 'prod' },
            namespace: 'payments',
            sync: { kind: 'VaultStaticSecret', name: 'api-db' },
            restart: 'consumers',
          },
        ],
        notes: [],
      },
    ]);
  });

  it.each([
    [
      'kv-v1 in the root namespace',
      vss('web', 'legacy', { mount: 'legacy', type: 'kv-v1', path: 'web/token', destination: { name: 'token' } }),
      { legacy: 1 },
      'legacy/web/token',
      undefined,
    ],
    [
      'spec.namespace overrides the VaultAuth',
      vssKv2('payments', 'x', 'a/b', { namespace: 'team-b/' }),
      { 'team-b/secret': 2 },
      'secret/a/b',
      'team-b',
    ],
    [
      'slashes trimmed',
      vss('p', 'y', { mount: '/kv/', type: 'kv-v2', path: '/app/', destination: { name: 's' } }),
      { kv: 2 },
      'kv/app',
      undefined,
    ],
  ])('%s', (_what, object, mounts, path, namespace) => {
    const result = run([inventory('alpha', { vaultStaticSecrets: [object], vaultAuths: [auth] })], new Set(['vso']));
    expect(result.mounts).toEqual(mounts);
    expect(result.routes[0]?.match).toEqual({ ...(namespace ? { namespace } : {}), path });
  });

  it.each([
    [
      vss('p', 'dyn', { mount: 'database', type: 'database', path: 'creds/app', destination: { name: 's' } }),
      'type database is not kv-v1 or kv-v2',
    ],
    [vssKv2('p', 'pinned', 'a', { version: 3 }), 'spec.version pins version 3'],
    [vssKv2('p', 'star', 'apps/*'), 'which a route path reads as a pattern'],
    [vssKv2('p', 'tpl', 'apps/{{ .Env }}'), 'is a template'],
    [
      vss('p', 'nodest', { mount: 'secret', type: 'kv-v2', path: 'a', destination: {} }),
      'spec.destination.name is empty',
    ],
  ])('%j is not imported', (object, reason) => {
    const result = run([inventory('alpha', { vaultStaticSecrets: [object] })]);
    expect(result.routes).toEqual([]);
    expect(result.unmapped).toEqual([
      expect.objectContaining({
        cluster: 'alpha',
        kind: 'VaultStaticSecret',
        name: object.metadata?.name,
        reason: expect.stringContaining(reason),
      }),
    ]);
  });

  it('rolloutRestartTargets count only while hmacSecretData is on (VSO ignores them otherwise)', () => {
    const targets = { rolloutRestartTargets: [{ kind: 'argo.Rollout', name: 'web' }] };
    expect(
      run([inventory('alpha', { vaultStaticSecrets: [vssKv2('p', 'on', 'a', targets)] })]).routes[0]?.targets[0],
    ).toMatchObject({ restart: 'consumers' });
    expect(
      run([
        inventory('alpha', { vaultStaticSecrets: [vssKv2('p', 'off', 'a', { ...targets, hmacSecretData: false })] }),
      ]).routes[0]?.targets[0],
    ).toMatchObject({ restart: 'none' });
  });

  it('lists dynamic and PKI secrets as not imported', () => {
    const result = run([
      inventory('alpha', {
        vaultDynamicSecrets: [{ metadata: { namespace: 'p', name: 'db' } }],
        vaultPkiSecrets: [{ metadata: { namespace: 'p', name: 'tls' } }],
      }),
    ]);
    expect(result.unmapped.map((u) => [u.kind, u.reason.split(':')[0]])).toEqual([
      ['VaultDynamicSecret', 'a dynamic secret'],
      ['VaultPKISecret', 'a PKI certificate'],
    ]);
  });

  it('a sync that restarts nothing today is a sync with restart: none, and says so', () => {
    const result = run([inventory('alpha', { vaultStaticSecrets: [vssKv2('p', 'plain', 'a')] })]);
    expect(result.routes[0]?.targets).toEqual([
      { clusters: ['alpha'], namespace: 'p', sync: { kind: 'VaultStaticSecret', name: 'plain' }, restart: 'none' },
    ]);
    expect(result.routes[0]?.notes[0]).toContain('nothing restarted on a sync today');
  });

  it('clusters that read different Vault servers need --vault-addr; with it, the others are listed', () => {
    const other = {
      vaultStaticSecrets: [vssKv2('payments', 'api-db', 'x')],
      vaultAuths: [auth],
      vaultConnections: [vaultConnection('payments', 'conn', 'https://other:8200')],
    };
    const both = [
      inventory('alpha', {
        vaultStaticSecrets: [vssKv2('payments', 'api-db', 'x')],
        vaultAuths: [auth],
        vaultConnections: [conn],
      }),
      inventory('beta', other),
    ];
    expect(run(both).servers).toEqual(['https://other:8200', 'https://vault.example:8200']);
    const chosen = run(both, ALL, 'https://vault.example:8200/');
    expect(chosen.routes[0]?.targets[0]?.clusters).toEqual(['alpha']);
    expect(chosen.unmapped[0]).toMatchObject({
      cluster: 'beta',
      reason: 'reads Vault at https://other:8200, not --vault-addr https://vault.example:8200/',
    });
  });
});

describe('importRoutes: VSO defaults live in the operator namespace only', () => {
  const OPERATOR = 'vault-secrets-operator-system';
  // A tenant of namespace "evil" may create a VaultAuth named default, pointing at its own Vault namespace and address.
  const tenantDefault = [
    vaultAuth('evil', 'default', { method: 'kubernetes', namespace: 'evil', vaultConnectionRef: 'conn' }),
  ];
  const tenantConnection = [vaultConnection('evil', 'conn', 'https://evil.example:8200')];
  const operatorDefault = (ns: string) => [vaultAuth(ns, 'default', { method: 'kubernetes', namespace: 'platform' })];
  const operatorConnection = (ns: string) => [vaultConnection(ns, 'default', 'https://vault.example:8200')];
  const noRef = vss('payments', 'api-db', {
    mount: 'secret',
    type: 'kv-v2',
    path: 'payments/api/db',
    destination: { name: 'api-db' },
  });
  const refTo = (ref: string) =>
    vss('payments', 'api-db', {
      vaultAuthRef: ref,
      mount: 'secret',
      type: 'kv-v2',
      path: 'payments/api/db',
      destination: { name: 'api-db' },
    });

  it.each([
    [
      "only a tenant's default: not the payments namespace's default",
      [noRef],
      tenantDefault,
      tenantConnection,
      undefined,
      undefined,
      [],
    ],
    [
      "the operator's default beside a tenant's: the operator's",
      [noRef],
      [...tenantDefault, ...operatorDefault(OPERATOR)],
      [...tenantConnection, ...operatorConnection(OPERATOR)],
      undefined,
      'platform',
      ['https://vault.example:8200'],
    ],
    [
      '--vso-operator-namespace names where the default is',
      [noRef],
      [...operatorDefault('vso'), ...operatorDefault(OPERATOR).map((a) => ({ ...a, spec: { namespace: 'wrong' } }))],
      operatorConnection('vso'),
      'vso',
      'platform',
      ['https://vault.example:8200'],
    ],
    [
      'a cross-namespace ref the VaultAuth allows (allowedNamespaces)',
      [refTo('evil/default')],
      [
        vaultAuth('evil', 'default', {
          namespace: 'evil',
          vaultConnectionRef: 'conn',
          allowedNamespaces: ['payments'],
        }),
      ],
      tenantConnection,
      undefined,
      'evil',
      ['https://evil.example:8200'],
    ],
    [
      'allowedNamespaces ["*"]',
      [refTo('evil/default')],
      [vaultAuth('evil', 'default', { namespace: 'evil', vaultConnectionRef: 'conn', allowedNamespaces: ['*'] })],
      tenantConnection,
      undefined,
      'evil',
      ['https://evil.example:8200'],
    ],
    [
      "a tenant's own ref to its own default",
      [{ ...refTo('default'), metadata: { namespace: 'evil', name: 'x' } }],
      tenantDefault,
      tenantConnection,
      undefined,
      'evil',
      ['https://evil.example:8200'],
    ],
  ])('%s', (_what, objects, vaultAuths, vaultConnections, operatorNamespace, vaultNamespace, servers) => {
    const result = run(
      [inventory('alpha', { vaultStaticSecrets: objects, vaultAuths, vaultConnections })],
      new Set(['vso']),
      undefined,
      operatorNamespace,
    );
    expect(result.unmapped).toEqual([]);
    expect(result.routes[0]?.match).toEqual({
      ...(vaultNamespace ? { namespace: vaultNamespace } : {}),
      path: 'secret/payments/api/db',
    });
    expect(result.servers).toEqual(servers);
  });

  it('a VaultAuth in another namespace that does not allow this one is not imported (VSO refuses it)', () => {
    const result = run(
      [
        inventory('alpha', {
          vaultStaticSecrets: [refTo('evil/default')],
          vaultAuths: tenantDefault,
          vaultConnections: tenantConnection,
        }),
      ],
      new Set(['vso']),
    );
    expect(result.routes).toEqual([]);
    expect(result.unmapped).toEqual([
      {
        cluster: 'alpha',
        kind: 'VaultStaticSecret',
        namespace: 'payments',
        name: 'api-db',
        reason:
          'VaultAuth evil/default does not allow namespace payments (spec.allowedNamespaces): VSO refuses to sync it',
      },
    ]);
  });
});

describe('importRoutes: ClusterSecretStore conditions', () => {
  const shared = (conditions?: unknown[]) => ({
    ...store('ClusterSecretStore', 'shared', {
      vault: { server: 'https://vault.example:8200', path: 'shared', version: 'v2' },
    }),
    spec: {
      provider: { vault: { server: 'https://vault.example:8200', path: 'shared', version: 'v2' } },
      ...(conditions ? { conditions } : {}),
    },
  });
  const object = es('payments', 'api-db', {
    secretStoreRef: { name: 'shared', kind: 'ClusterSecretStore' },
    data: [{ secretKey: 'p', remoteRef: { key: 'payments/api/db' } }],
  });
  const ns = (labels: Record<string, string>): KubeObject => ({
    kind: 'Namespace',
    metadata: { name: 'payments', labels: { 'kubernetes.io/metadata.name': 'payments', ...labels } },
  });
  const refused =
    'data[0]: ClusterSecretStore shared does not serve namespace payments (spec.conditions): ESO does not sync it';

  it.each<[string, unknown[] | undefined, KubeObject[], string | undefined]>([
    ['no conditions: every namespace', undefined, [], undefined],
    ['namespaces names it', [{ namespaces: ['payments'] }], [], undefined],
    ['namespaces names others', [{ namespaces: ['orders', 'web'] }], [], refused],
    ['an unanchored regex (Go MatchString)', [{ namespaceRegexes: ['ment'] }], [], undefined],
    ['an anchored regex that does not match', [{ namespaceRegexes: ['^pay$'] }], [], refused],
    ['the second condition serves it', [{ namespaces: ['orders'] }, { namespaceRegexes: ['^pay.*s$'] }], [], undefined],
    [
      'a namespaceSelector on its labels',
      [{ namespaceSelector: { matchLabels: { team: 'pay' } } }],
      [ns({ team: 'pay' })],
      undefined,
    ],
    [
      'a namespaceSelector with matchExpressions',
      [
        {
          namespaceSelector: {
            matchExpressions: [
              { key: 'team', operator: 'In', values: ['pay', 'web'] },
              { key: 'frozen', operator: 'DoesNotExist' },
            ],
          },
        },
      ],
      [ns({ team: 'pay' })],
      undefined,
    ],
    [
      'a namespaceSelector its labels do not match',
      [{ namespaceSelector: { matchLabels: { team: 'pay' } } }],
      [ns({ team: 'web' })],
      refused,
    ],
    ['an empty namespaceSelector selects all', [{ namespaceSelector: {} }], [], undefined],
    [
      'labels not read',
      [{ namespaceSelector: { matchLabels: { team: 'pay' } } }],
      [],
      'data[0]: ClusterSecretStore shared admits namespaces by label (conditions[0].namespaceSelector) and the labels of namespace payments could not be read (list Namespaces)',
    ],
    [
      'labels not read, but a later condition names it',
      [{ namespaceSelector: { matchLabels: { team: 'pay' } } }, { namespaces: ['payments'] }],
      [],
      undefined,
    ],
    ['a case-insensitive regex, as Go reads it', [{ namespaceRegexes: ['(?i)^PAY'] }], [], undefined],
    [
      'a regex Go refuses',
      [{ namespaceRegexes: ['pay**'] }],
      [],
      'data[0]: ClusterSecretStore shared: conditions[0].namespaceRegexes[0] "pay**" is not a regexp Go compiles, so import cannot tell what ESO serves: error parsing regexp: invalid nested repetition operator: `**`',
    ],
    ['a crafted regex runs in linear time and does not match', [{ namespaceRegexes: [`^(a|a)*(a*)*b$`] }], [], refused],
  ])('%s', (_what, conditions, namespaces, reason) => {
    const crafted = reason === refused && JSON.stringify(conditions).includes('(a|a)');
    const objects = crafted ? [{ ...object, metadata: { namespace: 'a'.repeat(63), name: 'api-db' } }] : [object];
    const result = run(
      [inventory('alpha', { externalSecrets: objects, clusterSecretStores: [shared(conditions)], namespaces })],
      new Set(['eso']),
    );
    if (reason === undefined) {
      expect(result.unmapped).toEqual([]);
      expect(result.routes.map((r) => r.match.path)).toEqual(['shared/payments/api/db']);
    } else {
      expect(result.routes).toEqual([]);
      expect(result.unmapped.map((u) => u.reason)).toEqual([
        crafted ? reason.replaceAll('payments', 'a'.repeat(63)) : reason,
      ]);
    }
  });

  it('a SecretStore has no conditions (ESO checks them on ClusterSecretStores only)', () => {
    const namespaced = {
      ...vaultStore('vault', { path: 'secret' }),
      spec: { provider: { vault: { path: 'secret' } }, conditions: [{ namespaces: ['other'] }] },
    };
    const result = run(
      [
        inventory('alpha', {
          externalSecrets: [es('payments', 'a', { data: [{ secretKey: 'p', remoteRef: { key: 'a' } }] })],
          secretStores: [namespaced],
        }),
      ],
      new Set(['eso']),
    );
    expect(result.routes.map((r) => r.match.path)).toEqual(['secret/a']);
  });
});

describe('importRoutes: ExternalSecrets', () => {
  const stores = [
    vaultStore('vault', { path: 'secret', version: 'v2' }),
    vaultStore('vault-v1', { path: 'legacy', version: 'v1' }),
    vaultStore('nopath', { version: 'v2' }),
    store('SecretStore', 'aws', { aws: { service: 'SecretsManager', region: 'eu-west-1' } }, 'payments'),
  ];
  const clusterStores = [
    store('ClusterSecretStore', 'shared', {
      vault: { server: 'https://vault.example:8200', path: 'shared', version: 'v2', namespace: 'platform' },
    }),
  ];
  const api = deployment('payments', 'api', { 'reloader.stakater.com/auto': 'true' }, envFrom('api-db'));

  it.each([
    [
      'remoteRef.key under the store path',
      { data: [{ secretKey: 'p', remoteRef: { key: 'payments/api/db', property: 'password' } }] },
      'secret/payments/api/db',
      { secret: 2 },
    ],
    [
      'a key that repeats the mount and data/',
      { data: [{ secretKey: 'p', remoteRef: { key: 'secret/data/payments/api/db' } }] },
      'secret/payments/api/db',
      { secret: 2 },
    ],
    [
      'dataFrom.extract',
      { dataFrom: [{ extract: { key: 'payments/api/db' } }] },
      'secret/payments/api/db',
      { secret: 2 },
    ],
    [
      'KV v1 store',
      { secretStoreRef: { name: 'vault-v1' }, data: [{ secretKey: 'p', remoteRef: { key: 'api' } }] },
      'legacy/api',
      { legacy: 1 },
    ],
    [
      'a store without path: the first segment is the mount',
      { secretStoreRef: { name: 'nopath' }, data: [{ secretKey: 'p', remoteRef: { key: 'kv/data/api' } }] },
      'kv/api',
      { kv: 2 },
    ],
  ])('%s', (_what, spec, path, mounts) => {
    const result = run([
      inventory('alpha', { externalSecrets: [es('payments', 'api-db', spec)], secretStores: stores, workloads: [api] }),
    ]);
    expect(result.unmapped).toEqual([]);
    expect(result.mounts).toEqual(mounts);
    expect(result.routes).toEqual([
      expect.objectContaining({
        match: { path },
        targets: [
          {
            clusters: ['alpha'],
            namespace: 'payments',
            sync: { kind: 'ExternalSecret', name: 'api-db' },
            restart: 'consumers',
          },
        ],
        notes: [],
      }),
    ]);
  });

  it('a ClusterSecretStore with a Vault namespace; target.name names the Secret', () => {
    const worker = deployment(
      'jobs',
      'worker',
      { 'secret.reloader.stakater.com/reload': 'shared-tls' },
      { containers: [{ name: 'w', volumeMounts: [] }], volumes: [{ name: 't', secret: { secretName: 'shared-tls' } }] },
    );
    const object = es('jobs', 'tls', {
      secretStoreRef: { kind: 'ClusterSecretStore', name: 'shared' },
      target: { name: 'shared-tls' },
      dataFrom: [{ extract: { key: 'tls/bundle' } }],
    });
    const result = run([
      inventory('alpha', { externalSecrets: [object], clusterSecretStores: clusterStores, workloads: [worker] }),
      inventory('gamma', { externalSecrets: [object], clusterSecretStores: clusterStores, workloads: [worker] }),
    ]);
    expect(result.mounts).toEqual({ 'platform/shared': 2 });
    expect(result.routes).toEqual([
      expect.objectContaining({
        name: 'platform-shared-tls-bundle',
        match: { namespace: 'platform', path: 'shared/tls/bundle' },
        targets: [
          {
            clusters: ['alpha', 'gamma'],
            namespace: 'jobs',
            sync: { kind: 'ExternalSecret', name: 'tls' },
            restart: 'consumers',
          },
        ],
      }),
    ]);
  });

  it.each([
    [
      { secretStoreRef: { name: 'aws' }, data: [{ secretKey: 'p', remoteRef: { key: 'x' } }] },
      'data[0]: SecretStore aws is not a Vault store (provider: aws)',
    ],
    [
      { secretStoreRef: { name: 'gone' }, data: [{ secretKey: 'p', remoteRef: { key: 'x' } }] },
      'data[0]: SecretStore gone was not found',
    ],
    [{ dataFrom: [{ find: { path: 'payments', name: { regexp: '.*' } } }] }, 'dataFrom[0].find searches Vault'],
    [
      { dataFrom: [{ sourceRef: { generatorRef: { kind: 'VaultDynamicSecret', name: 'pg' } } }] },
      'dataFrom[0] uses a generator',
    ],
    [{ data: [{ secretKey: 'p', remoteRef: { key: 'a/{{ .team }}' } }] }, 'is a template'],
    [{ data: [{ secretKey: 'p', remoteRef: { key: 'a', version: '3' } }] }, 'pinned to version 3'],
    [
      { refreshPolicy: 'CreatedOnce', data: [{ secretKey: 'p', remoteRef: { key: 'a' } }] },
      'refreshPolicy: CreatedOnce',
    ],
    [{ refreshInterval: '0', data: [{ secretKey: 'p', remoteRef: { key: 'a' } }] }, 'refreshInterval: 0'],
  ])('%j is not imported', (spec, reason) => {
    const result = run([inventory('alpha', { externalSecrets: [es('payments', 'x', spec)], secretStores: stores })]);
    expect(result.routes).toEqual([]);
    expect(result.unmapped).toEqual([
      expect.objectContaining({ kind: 'ExternalSecret', name: 'x', reason: expect.stringContaining(reason) }),
    ]);
  });

  it('a store of a kind that could not be listed is said so, not "not found"', () => {
    const object = es('payments', 'x', {
      secretStoreRef: { kind: 'ClusterSecretStore', name: 'shared' },
      data: [{ secretKey: 'p', remoteRef: { key: 'a' } }],
    });
    const result = run([
      inventory('alpha', {
        externalSecrets: [object],
        missing: ['ClusterSecretStore (external-secrets.io/v1): list is forbidden'],
      }),
    ]);
    expect(result.unmapped[0]?.reason).toBe(
      'data[0]: ClusterSecretStore shared could not be read: ClusterSecretStore (external-secrets.io/v1): list is forbidden',
    );
  });

  it('says where restart: consumers restarts more than Reloader did', () => {
    const plain = deployment('payments', 'report', {}, envFrom('api-db'));
    const result = run([
      inventory('alpha', {
        externalSecrets: [es('payments', 'api-db', { dataFrom: [{ extract: { key: 'payments/api/db' } }] })],
        secretStores: stores,
        workloads: [api, plain],
      }),
    ]);
    expect(result.routes[0]?.notes).toEqual([
      'alpha/payments: restart: consumers also restarts Deployment/report, which read Secret api-db without a Reloader annotation',
    ]);
  });

  it('--from reloader alone: consumers targets, no sync', () => {
    const result = run(
      [
        inventory('alpha', {
          externalSecrets: [es('payments', 'api-db', { dataFrom: [{ extract: { key: 'payments/api/db' } }] })],
          secretStores: stores,
          workloads: [api],
        }),
      ],
      new Set(['reloader']),
    );
    expect(result.routes[0]?.targets).toEqual([
      { clusters: ['alpha'], namespace: 'payments', consumers: { secret: 'api-db' } },
    ]);
    expect(result.routes[0]?.notes[0]).toContain('not imported (--from)');
  });

  it('--from reloader alone, where Reloader covers only some consumers: those, by name', () => {
    const plain = deployment('payments', 'report', {}, envFrom('api-db'));
    const result = run(
      [
        inventory('alpha', {
          externalSecrets: [es('payments', 'api-db', { dataFrom: [{ extract: { key: 'payments/api/db' } }] })],
          secretStores: stores,
          workloads: [api, plain],
        }),
      ],
      new Set(['reloader']),
    );
    expect(result.routes[0]?.targets).toEqual([
      { clusters: ['alpha'], namespace: 'payments', kind: 'Deployment', name: 'api' },
    ]);
  });

  it('a workload Reloader names without reading the Secret gets a target by name beside the sync', () => {
    const named = deployment(
      'payments',
      'cache',
      { 'secret.reloader.stakater.com/reload': 'api-db' },
      envFrom('other'),
    );
    const result = run([
      inventory('alpha', {
        externalSecrets: [es('payments', 'api-db', { dataFrom: [{ extract: { key: 'payments/api/db' } }] })],
        secretStores: stores,
        workloads: [api, named],
      }),
    ]);
    expect(result.routes[0]?.targets).toEqual([
      { clusters: ['alpha'], namespace: 'payments', kind: 'Deployment', name: 'cache' },
      {
        clusters: ['alpha'],
        namespace: 'payments',
        sync: { kind: 'ExternalSecret', name: 'api-db' },
        restart: 'consumers',
      },
    ]);
    expect(result.routes[0]?.notes[0]).toContain(
      'Deployment/cache named by secret.reloader.stakater.com/reload without reading Secret api-db',
    );
  });

  it('one path, different targets per cluster: one route, a target per cluster set', () => {
    const object = es('payments', 'api-db', { dataFrom: [{ extract: { key: 'payments/api/db' } }] });
    const withReloader = inventory('alpha', { externalSecrets: [object], secretStores: stores, workloads: [api] });
    const result = run([
      withReloader,
      { ...withReloader, cluster: 'beta' },
      inventory('gamma', { externalSecrets: [object], secretStores: stores }),
    ]);
    expect(result.routes).toHaveLength(1);
    expect(result.routes[0]?.targets).toEqual([
      { clusters: ['gamma'], namespace: 'payments', sync: { kind: 'ExternalSecret', name: 'api-db' }, restart: 'none' },
      {
        clusters: { env: 'prod' },
        namespace: 'payments',
        sync: { kind: 'ExternalSecret', name: 'api-db' },
        restart: 'consumers',
      },
    ]);
  });

  it.each([
    ['in one cluster', 'alpha', 'alpha'],
    ['across clusters', 'alpha', 'beta'],
  ])(
    'a mount read as KV v1 and v2 %s fails the import, naming both objects, whichever comes first',
    (_what, v2Cluster, v1Cluster) => {
      const v1 = vaultStore('v1', { path: 'secret', version: 'v1' });
      const v2Object = es('payments', 'a', { data: [{ secretKey: 'p', remoteRef: { key: 'a' } }] });
      const v1Object = es('tenant', 'b', {
        secretStoreRef: { name: 'v1' },
        data: [{ secretKey: 'p', remoteRef: { key: 'b' } }],
      });
      const invs =
        v2Cluster === v1Cluster
          ? [
              inventory('alpha', {
                externalSecrets: [v2Object, v1Object],
                secretStores: [...stores, { ...v1, metadata: { name: 'v1', namespace: 'tenant' } }],
              }),
            ]
          : [
              inventory('alpha', { externalSecrets: [v2Object], secretStores: stores }),
              inventory('beta', {
                externalSecrets: [v1Object],
                secretStores: [{ ...v1, metadata: { name: 'v1', namespace: 'tenant' } }],
              }),
            ];
      const message =
        `mount secret is read as KV v1 by ${v1Cluster}: ExternalSecret tenant/b and as KV v2 by ${v2Cluster}: ExternalSecret payments/a; a mount has one KV version: ` +
        "fix the object that is wrong (VaultStaticSecret spec.type kv-v1|kv-v2, or the store's spec.provider.vault.version v1|v2; `vault secrets list -detailed` shows the mount's version), " +
        'or leave its namespace or cluster out of the import (--namespace, --cluster)';
      expect(() => run(invs)).toThrow(message);
      // The first object seen no longer decides: the other order fails alike.
      const reversed =
        invs.length === 1
          ? [{ ...invs[0], externalSecrets: [...(invs[0]?.externalSecrets ?? [])].reverse() } as ClusterInventory]
          : [...invs].reverse();
      expect(() => run(reversed)).toThrow(message);
    },
  );

  it('a mount read with one KV version by many objects is no conflict', () => {
    const objects = ['a', 'b', 'c'].map((k) =>
      es('payments', k, { data: [{ secretKey: 'p', remoteRef: { key: k } }] }),
    );
    expect(
      run([
        inventory('alpha', { externalSecrets: objects, secretStores: stores }),
        inventory('beta', { externalSecrets: objects, secretStores: stores }),
      ]).mounts,
    ).toEqual({ secret: 2 });
  });
});

describe('renderImport', () => {
  it('writes the clusters, mounts and routes, notes beside their route and what was not imported at the end', () => {
    const result = run([
      inventory('alpha', { vaultStaticSecrets: [vssKv2('p', 'plain', 'a'), vssKv2('p', 'bad', 'b', { version: 2 })] }),
    ]);
    const text = renderImport(result, ['Imported by a test.']);
    expect(text.split('\n')[0]).toBe('# Imported by a test.');
    expect(text).toContain('  # note: alpha/p: VaultStaticSecret plain: nothing restarted');
    expect(text).toContain('#   alpha: VaultStaticSecret p/bad: spec.version pins version 2');
    expect(parse(text)).toEqual({
      clusters: {
        alpha: { kubeconfig: { file: 'alpha.kubeconfig' }, labels: { env: 'prod' } },
        beta: { kubeconfig: { file: 'beta.kubeconfig' }, labels: { env: 'prod' } },
        gamma: { kubeconfig: { file: 'gamma.kubeconfig' }, labels: { env: 'staging' } },
      },
      vault: { mounts: { secret: 2 } },
      routes: [
        {
          name: 'secret-a',
          match: { path: 'secret/a' },
          targets: [
            {
              clusters: ['alpha'],
              namespace: 'p',
              sync: { kind: 'VaultStaticSecret', name: 'plain' },
              restart: 'none',
            },
          ],
        },
      ],
    });
  });
});
