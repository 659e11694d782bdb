import { describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import {
  admissionPolicy,
  admissionPolicyYaml,
  AdmissionPolicyError,
  DEFAULT_IDENTITY,
  mergeTrees,
  restartableKinds,
  restartFields,
  type NamespaceScope,
} from '../../../lib/deploy/admission-policy.ts';
import { fieldPaths, globRegex, sameExcept, type FieldTree } from '../../../lib/deploy/admission-cel.ts';
import { admissionPolicyCheck, type AdmissionObjects } from '../../../lib/deploy/doctor-admission.ts';
import { resourceDescriptor, WORKLOAD_KINDS } from '../../../lib/workloads/workload-kinds.ts';
import { loadRoutingTable, type RoutingTable } from '../../../lib/routing/routing-table.ts';
import { memoryIo, readRepoFile } from '../../helpers.ts';

const RECORD = [
  '"kubectl.kubernetes.io/restartedAt"',
  '"vault-rollout.io/restart-token"',
  '"vault-rollout.io/versions"',
];

const table = (routes: string) =>
  loadRoutingTable(
    `clusters:\n  a: { kubeconfig: { file: a.yaml } }\nvault: { mounts: { secret: 2 } }\nroutes:\n${routes}`,
    'routes.yaml',
  );

const resourceRoute = (
  name: string,
  patch: string,
  kind = 'Harbor',
  apiVersion = 'example.com/v1',
) => `  - name: ${name}
    match: { path: "secret/${name}/{registry}" }
    targets: [{ clusters: [a], resource: { apiVersion: ${apiVersion}, kind: ${kind}, namespace: ns, name: "{registry}" }, names: ["*"], patch: ${patch} }]
`;

interface Policy {
  metadata: { annotations: Record<string, string> };
  spec: {
    matchConstraints: { resourceRules: unknown[] };
    matchConditions: Array<{ name: string; expression: string }>;
    validations: Array<{ expression: string; message?: string; messageExpression?: string }>;
    failurePolicy: string;
  };
}

describe('what each kind restart writes, read from its descriptor', () => {
  it.each<[string, string[]]>([
    ['Deployment', RECORD.map((k) => `spec.template.metadata.annotations[${k}]`)],
    ['StatefulSet', RECORD.map((k) => `spec.template.metadata.annotations[${k}]`)],
    ['DaemonSet', RECORD.map((k) => `spec.template.metadata.annotations[${k}]`)],
    ['CronJob', RECORD.map((k) => `spec.jobTemplate.spec.template.metadata.annotations[${k}]`)],
    // Argo restarts in place at spec.restartAt; the record lives in metadata, without restartedAt.
    [
      'Rollout',
      [
        'metadata.annotations["vault-rollout.io/restart-token"]',
        'metadata.annotations["vault-rollout.io/versions"]',
        'spec.restartAt',
      ],
    ],
  ])('%s', (kind, paths) => {
    expect(fieldPaths(restartFields(WORKLOAD_KINDS[kind as keyof typeof WORKLOAD_KINDS]))).toEqual(paths);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    [
      'a spec field',
      { spec: { secretVersion: '{version}' } },
      [
        'metadata.annotations["vault-rollout.io/restart-token"]',
        'metadata.annotations["vault-rollout.io/versions"]',
        'spec.secretVersion',
      ],
    ],
    [
      'a declared annotation, kept beside the record',
      { metadata: { annotations: { 'operator.io/reload': '{version}' } } },
      [
        'metadata.annotations["operator.io/reload"]',
        'metadata.annotations["vault-rollout.io/restart-token"]',
        'metadata.annotations["vault-rollout.io/versions"]',
      ],
    ],
    [
      'an array or an empty object is replaced whole by a merge patch',
      { spec: { list: ['{version}'], opaque: {} } },
      [
        'metadata.annotations["vault-rollout.io/restart-token"]',
        'metadata.annotations["vault-rollout.io/versions"]',
        'spec.list',
        'spec.opaque',
      ],
    ],
  ])('a custom resource route: %s', (_what, patch, paths) => {
    expect(fieldPaths(restartFields(resourceDescriptor('example.com/v1', 'Harbor', patch)))).toEqual(paths);
  });
});

describe('restartable kinds from the routing table', () => {
  it("only the kinds the routes target; a custom resource with the union of its routes' patches", () => {
    const kinds = restartableKinds(
      table(
        resourceRoute('one', '{ spec: { secretVersion: "{version}" } }') +
          resourceRoute('two', '{ spec: { tlsVersion: "{version}" } }') +
          resourceRoute('three', '{ spec: { x: 1 } }', 'Vault', 'vault.example.org/v1beta1'),
      ),
    );
    expect(kinds.map((k) => k.kind)).toEqual(['example.com/Harbor', 'vault.example.org/Vault']);
    expect(fieldPaths(kinds.find((k) => k.kind === 'example.com/Harbor')?.fields ?? {})).toEqual([
      'metadata.annotations["vault-rollout.io/restart-token"]',
      'metadata.annotations["vault-rollout.io/versions"]',
      'spec.secretVersion',
      'spec.tlsVersion',
    ]);
  });

  // The record is read only where vault-rollout writes it (readRecord), and the policy lets it write exactly there.
  it("a pod-template kind: exactly the restart record on the template and reconcile's versions annotation on the metadata", () => {
    const kinds = restartableKinds(
      table(
        '  - name: w\n    match: { path: "secret/w" }\n    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: api }, { clusters: [a], namespace: ns, kind: CronJob, name: nightly }]\n',
      ),
    );
    expect(fieldPaths(kinds.find((k) => k.kind === 'apps/Deployment')?.fields ?? {})).toEqual([
      'metadata.annotations["vault-rollout.io/versions"]',
      ...RECORD.map((k) => `spec.template.metadata.annotations[${k}]`),
    ]);
    expect(fieldPaths(kinds.find((k) => k.kind === 'batch/CronJob')?.fields ?? {})).toEqual([
      'metadata.annotations["vault-rollout.io/versions"]',
      ...RECORD.map((k) => `spec.jobTemplate.spec.template.metadata.annotations[${k}]`),
    ]);
  });

  it("a sync target's nudge writes annotations only", () => {
    const kinds = restartableKinds(
      table(`  - name: s
    match: { path: "secret/s" }
    targets: [{ clusters: [a], namespace: ns, sync: { kind: ExternalSecret, name: s }, restart: none }]
`),
    );
    expect(kinds.map((k) => k.kind)).toEqual(['external-secrets.io/ExternalSecret']);
    expect(fieldPaths(kinds[0]?.fields ?? {})).toEqual([
      'metadata.annotations["vault-rollout.io/restart-token"]',
      'metadata.annotations["vault-rollout.io/sync-observed"]',
      'metadata.annotations["vault-rollout.io/sync-requested-at"]',
      'metadata.annotations["vault-rollout.io/versions"]',
    ]);
  });

  const reloaderPatch = '{ spec: { template: { metadata: { annotations: { "reloader/hash": "{version}" } } } } }';
  const RESOURCE_WRITES = [
    'metadata.annotations["vault-rollout.io/restart-token"]',
    'metadata.annotations["vault-rollout.io/versions"]',
    'spec.template.metadata.annotations["reloader/hash"]',
  ];
  const RESTART_WRITES = RECORD.map((k) => `spec.template.metadata.annotations[${k}]`);
  it.each<[string, string, string[]]>([
    [
      'as a resource only: its patch and the record, no restart annotations',
      resourceRoute('dep', reloaderPatch, 'Deployment', 'apps/v1'),
      RESOURCE_WRITES,
    ],
    [
      'as a resource and as a workload: both writes',
      resourceRoute('dep', reloaderPatch, 'Deployment', 'apps/v1') +
        '  - name: w\n    match: { path: "secret/w" }\n    targets: [{ clusters: [a], namespace: ns, kind: Deployment, name: api }]\n',
      [...RESOURCE_WRITES, ...RESTART_WRITES].sort(),
    ],
  ])('a route may patch a built-in kind %s', (_what, routes, paths) => {
    const kinds = restartableKinds(table(routes));
    expect(fieldPaths(kinds.find((k) => k.kind === 'apps/Deployment')?.fields ?? {})).toEqual(paths);
  });

  it.each<[string, FieldTree, FieldTree, FieldTree]>([
    ['disjoint keys', { a: true }, { b: true }, { a: true, b: true }],
    ['a whole field wins over parts of it', { a: { x: true } }, { a: true }, { a: true }],
    ['parts merge', { a: { x: true } }, { a: { y: true } }, { a: { x: true, y: true } }],
  ])('mergeTrees: %s', (_what, a, b, merged) => {
    expect(mergeTrees(a, b)).toEqual(merged);
    expect(mergeTrees(b, a)).toEqual(merged);
  });
});

const ALL_WORKLOADS = ['apps/DaemonSet', 'apps/Deployment', 'apps/StatefulSet', 'argoproj.io/Rollout', 'batch/CronJob'];
const scope = (names: string[], globs: string[] = []): NamespaceScope => ({ names, globs, anywhere: [] });
const route = (name: string, target: string, path = `secret/${name}`) =>
  `  - name: ${name}\n    match: { path: "${path}" }\n    targets: [${target}]\n`;

describe('where each kind may be patched: the namespaces the routes target', () => {
  it.each<[string, string, Record<string, NamespaceScope>]>([
    [
      'a literal namespace',
      route('d', '{ clusters: [a], namespace: payments, kind: Deployment, name: api }'),
      { 'apps/Deployment': scope(['payments']) },
    ],
    [
      'two routes, one kind: the union',
      route('d', '{ clusters: [a], namespace: payments, kind: Deployment, name: api }') +
        route('e', '{ clusters: [a], namespace: edge, kind: Deployment, selector: "x=y" }'),
      { 'apps/Deployment': scope(['edge', 'payments']) },
    ],
    [
      'an annotated (watch) target: its namespace only',
      route('w', '{ clusters: [a], namespace: batch, kind: CronJob, annotated: true }'),
      { 'batch/CronJob': scope(['batch']) },
    ],
    [
      'a namespace from the path: its namespaces bound, names and globs',
      route(
        'c',
        '{ clusters: [a], namespace: "{team}", namespaces: [payments, "team-*"], kind: StatefulSet, selector: "x=y" }',
        'secret/{team}/db',
      ),
      { 'apps/StatefulSet': scope(['payments'], ['team-*']) },
    ],
    [
      'a literal namespace inside a bound: the literal',
      route('l', '{ clusters: [a], namespace: payments, namespaces: ["pay*"], kind: Rollout, name: api }'),
      { 'argoproj.io/Rollout': scope(['payments']) },
    ],
    ['a custom resource', resourceRoute('h', '{ spec: { v: "{version}" } }'), { 'example.com/Harbor': scope(['ns']) }],
    [
      'a cluster-scoped custom resource: the cluster scope only',
      route(
        'cs',
        '{ clusters: [a], resource: { apiVersion: example.com/v1, kind: Mesh, name: main }, patch: { spec: { v: "{version}" } } }',
      ),
      { 'example.com/Mesh': scope(['']) },
    ],
    [
      'consumers: every workload kind, in that namespace',
      route('k', '{ clusters: [a], namespace: shop, consumers: { secret: db } }'),
      Object.fromEntries(ALL_WORKLOADS.map((k) => [k, scope(['shop'])])),
    ],
    [
      'a sync target: the operator kind and its consumers, in that namespace',
      route('s', '{ clusters: [a], namespace: shop, sync: { kind: VaultStaticSecret, name: db } }'),
      Object.fromEntries(
        [...ALL_WORKLOADS, 'secrets.hashicorp.com/VaultStaticSecret'].map((k) => [k, scope(['shop'])]),
      ),
    ],
    [
      'a sync target with restart none: the operator kind only',
      route('s', '{ clusters: [a], namespace: shop, sync: { kind: ExternalSecret, name: db }, restart: none }'),
      { 'external-secrets.io/ExternalSecret': scope(['shop']) },
    ],
  ])('%s', (_what, routes, expected) => {
    expect(Object.fromEntries(restartableKinds(table(routes)).map((k) => [k.kind, k.namespaces]))).toEqual(expected);
  });

  it('no route: no kind at all', () => {
    expect(restartableKinds({ routes: [] })).toEqual([]);
  });

  it.each<[string, string, string[]]>([
    [
      'namespaces ["*"]',
      route(
        'any',
        '{ clusters: [a], namespace: "{ns}", namespaces: ["*"], kind: Deployment, selector: "x=y" }',
        'secret/{ns}/db',
      ),
      ['route any, target 1: namespaces ["*"] reaches every namespace'],
    ],
    [
      'a "*" beside names',
      route(
        'any',
        '{ clusters: [a], namespace: "{ns}", namespaces: [payments, "**"], kind: Deployment, selector: "x=y" }',
        'secret/{ns}/db',
      ),
      ['route any, target 1: namespaces ["**"] reaches every namespace'],
    ],
  ])('a target that reaches every namespace leaves its kind unbounded, and says why: %s', (_what, routes, anywhere) => {
    const [deployment] = restartableKinds(
      table(routes + route('d', '{ clusters: [a], namespace: payments, kind: Deployment, name: api }')),
    );
    expect(deployment).toMatchObject({ kind: 'apps/Deployment', namespaces: { names: ['payments'], anywhere } });
  });

  it('a namespace rendered from the path with no bound (a table validate refused) is unbounded too, and says why', () => {
    const valid = table(
      route(
        'c',
        '{ clusters: [a], namespace: "{team}", namespaces: ["team-*"], kind: Deployment, selector: "x=y" }',
        'secret/{team}/db',
      ),
    );
    const [compiled] = valid.routes[0]?.targets ?? [];
    const { namespaces: _bound, ...target } = compiled?.target as { namespaces?: string[] };
    const unbounded = { routes: [{ ...valid.routes[0], targets: [{ target, clusters: ['a'] }] }] } as unknown as Pick<
      RoutingTable,
      'routes'
    >;
    expect(restartableKinds(unbounded)[0]?.namespaces.anywhere).toEqual([
      'route c, target 1: the namespace "{team}" is rendered from the path with no namespaces bound',
    ]);
  });

  it.each<[string, string, boolean]>([
    ['team-*', 'team-a', true],
    ['team-*', 'team-', true],
    ['team-*', 'xteam-a', false],
    ['team-*', 'team', false],
    ['*-prod', 'payments-prod', true],
    ['*-prod', 'payments-prod-2', false],
    ['a*b*c', 'a-x-b-y-c', true],
  ])('glob %s as an anchored regex: %s -> %s', (glob, namespace, matches) => {
    expect(new RegExp(globRegex(glob)).test(namespace)).toBe(matches);
  });
});

describe('the policy allows UPDATEs only in the namespaces the routes target', () => {
  const policyOf = (routes: string) => {
    const manifests = admissionPolicy(table(routes), DEFAULT_IDENTITY);
    return {
      ...manifests,
      p: manifests.policy as unknown as Policy & { spec: { variables: Array<{ name: string; expression: string }> } },
    };
  };
  const namespaceRules = (p: Policy) =>
    p.spec.validations.filter((v) => v.messageExpression?.startsWith('"vault-rollout may not patch a '));

  it.each<[string, string, string[]]>([
    [
      'literal names',
      route('d', '{ clusters: [a], namespace: payments, kind: Deployment, name: api }') +
        route('e', '{ clusters: [a], namespace: edge, kind: Deployment, name: api }'),
      [
        'request.operation != "UPDATE" || variables.kind != "apps/Deployment" ||\nvariables.requestNamespace in ["edge", "payments"]',
      ],
    ],
    [
      'names and globs',
      route(
        'c',
        '{ clusters: [a], namespace: "{team}", namespaces: [payments, "team-*"], kind: DaemonSet, selector: "x=y" }',
        'secret/{team}/db',
      ),
      [
        'request.operation != "UPDATE" || variables.kind != "apps/DaemonSet" ||\nvariables.requestNamespace in ["payments"] || variables.requestNamespace.matches("^team-.*$")',
      ],
    ],
    [
      'the cluster scope',
      route(
        'cs',
        '{ clusters: [a], resource: { apiVersion: example.com/v1, kind: Mesh, name: main }, patch: { spec: { v: "{version}" } } }',
      ),
      ['request.operation != "UPDATE" || variables.kind != "example.com/Mesh" ||\nvariables.requestNamespace in [""]'],
    ],
    [
      'every namespace for one kind: no rule for it, the others keep theirs',
      route(
        'any',
        '{ clusters: [a], namespace: "{ns}", namespaces: ["*"], kind: Deployment, selector: "x=y" }',
        'secret/{ns}/db',
      ) + route('w', '{ clusters: [a], namespace: batch, kind: CronJob, annotated: true }'),
      [
        'request.operation != "UPDATE" || variables.kind != "batch/CronJob" ||\nvariables.requestNamespace in ["batch"]',
      ],
    ],
  ])('%s', (_what, routes, expressions) => {
    const { p } = policyOf(routes);
    expect(namespaceRules(p).map((v) => v.expression)).toEqual(expressions);
    // The request's namespace as a variable that cannot fail (absent for cluster-scoped objects).
    expect(p.spec.variables).toContainEqual({
      name: 'requestNamespace',
      expression: 'has(request.namespace) ? request.namespace : ""',
    });
  });

  it('names every variable with a CEL identifier the API server accepts (not a reserved word such as namespace)', () => {
    const RESERVED = [
      'as',
      'break',
      'const',
      'continue',
      'else',
      'false',
      'for',
      'function',
      'if',
      'import',
      'in',
      'let',
      'loop',
      'package',
      'namespace',
      'null',
      'return',
      'true',
      'var',
      'void',
      'while',
    ];
    const { p } = policyOf(
      route(
        'c',
        '{ clusters: [a], namespace: "{team}", namespaces: [payments, "team-*"], kind: Deployment, selector: "x=y" }',
        'secret/{team}/db',
      ),
    );
    for (const { name } of p.spec.variables) {
      expect(name).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
      expect(RESERVED).not.toContain(name);
    }
  });

  it('says where it refused, and where the routes do target the kind', () => {
    const { p } = policyOf(
      route(
        'c',
        '{ clusters: [a], namespace: "{team}", namespaces: [payments, "team-*"], kind: Deployment, selector: "x=y" }',
        'secret/{team}/db',
      ),
    );
    expect(namespaceRules(p)[0]?.messageExpression).toBe(
      '"vault-rollout may not patch a apps/Deployment in " + (variables.requestNamespace == "" ? "the cluster scope" : "namespace " + variables.requestNamespace) + ": its routes target it only in " + "payments, team-*"',
    );
    expect(p.metadata.annotations['vault-rollout.io/restartable-namespaces']).toBe(
      '{"apps/Deployment":["payments","team-*"]}',
    );
  });

  it.each<[string, string, string[]]>([
    [
      'no sync route: neither operator kind',
      route('d', '{ clusters: [a], namespace: payments, kind: Deployment, name: api }'),
      ['apps/Deployment'],
    ],
    [
      'an ExternalSecret route: ExternalSecret, not VaultStaticSecret',
      route('s', '{ clusters: [a], namespace: shop, sync: { kind: ExternalSecret, name: db }, restart: none }'),
      ['external-secrets.io/ExternalSecret'],
    ],
    [
      'a StatefulSet route: no Deployment',
      route('s', '{ clusters: [a], namespace: shop, kind: StatefulSet, name: db }'),
      ['apps/StatefulSet'],
    ],
  ])('UPDATE only of the kinds a route targets: %s', (_what, routes, kinds) => {
    const { p } = policyOf(routes);
    expect(p.spec.validations[0]?.expression).toContain(
      `variables.subResource == "" && variables.kind in ${JSON.stringify(kinds).replaceAll(',', ', ')})`,
    );
    expect(JSON.parse(p.metadata.annotations['vault-rollout.io/restartable-kinds'] ?? '')).toEqual(kinds);
  });

  it('warns, in the output and on stderr, for each kind left in every namespace; nothing for a bounded table', async () => {
    const routes = route(
      'any',
      '{ clusters: [a], namespace: "{ns}", namespaces: ["*"], kind: Deployment, selector: "x=y" }',
      'secret/{ns}/db',
    );
    const manifests = policyOf(routes);
    expect(manifests.warnings).toEqual([
      'apps/Deployment may be patched in every namespace: route any, target 1: namespaces ["*"] reaches every namespace',
    ]);
    expect(admissionPolicyYaml(manifests, 'r.yaml')).toContain(
      '# WARNING: no namespace bound for these kinds (a target reaches every namespace):\n#   apps/Deployment may be patched in every namespace: route any, target 1: namespaces ["*"] reaches every namespace\n',
    );
    const file = `clusters:\n  a: { kubeconfig: { file: a.yaml } }\nvault: { mounts: { secret: 2 } }\nroutes:\n${routes}`;
    const io = memoryIo({ 'r.yaml': file });
    expect(await main(['admission-policy', '--routes', 'r.yaml'], io)).toBe(0);
    expect(io.err).toBe(
      'vault-rollout admission-policy: warning: apps/Deployment may be patched in every namespace: route any, target 1: namespaces ["*"] reaches every namespace; the policy bounds its fields, not its namespaces\n',
    );
    const bounded = memoryIo({ 'r.yaml': readRepoFile('infra/routes/example.yaml') });
    expect(await main(['admission-policy', '--routes', 'r.yaml'], bounded)).toBe(0);
    expect(bounded.err).toBe('');
    expect(bounded.out).not.toContain('WARNING');
  });
});

describe('CEL: equal except the allowed fields', () => {
  it('compares every other key both ways and descends into the allowed maps', () => {
    expect(sameExcept('object', 'oldObject', { spec: { restartAt: true } }).split(' &&\n')).toEqual([
      'object.all(k, k in ["spec"] || (k in oldObject && object[k] == oldObject[k]))',
      'oldObject.all(k, k in ["spec"] || k in object)',
      'object.?spec.orValue({}).all(k, k in ["restartAt"] || (k in oldObject.?spec.orValue({}) && object.?spec.orValue({})[k] == oldObject.?spec.orValue({})[k]))',
      'oldObject.?spec.orValue({}).all(k, k in ["restartAt"] || k in object.?spec.orValue({}))',
    ]);
  });

  it('selects keys that are not identifiers by index, and matches {capture} keys as patterns', () => {
    const cel = sameExcept('object', 'oldObject', {
      metadata: { annotations: { 'team.io/{app}-version': true, 'a.b/c': true } },
    });
    expect(cel).toContain('object.?metadata.?annotations.orValue({})');
    expect(cel).toContain('k in ["a.b/c"] || k.matches("^team\\\\.io/.*-version$")');
  });

  it('string literals are escaped', () => {
    expect(sameExcept('a', 'b', { 'x"y\\z': true })).toContain('k in ["x\\"y\\\\z"]');
  });
});

describe('the policy and its binding', () => {
  const example = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');

  it('binds the identity by user name or group, and fails closed', () => {
    const { policy, binding } = admissionPolicy(example, { users: ['u2', 'u1', 'u1'], groups: ['g'] });
    const p = policy as unknown as Policy;
    expect(p.spec.failurePolicy).toBe('Fail');
    expect(p.spec.matchConditions).toEqual([
      {
        name: 'is-vault-rollout',
        expression:
          '(has(request.userInfo.username) && request.userInfo.username in ["u1", "u2"]) ||\n(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["g"]))',
      },
    ]);
    expect(p.spec.matchConstraints.resourceRules).toEqual([
      { apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'], scope: '*' },
    ]);
    expect(p.metadata.annotations).toMatchObject({
      'vault-rollout.io/users': '["u1","u2"]',
      'vault-rollout.io/groups': '["g"]',
    });
    expect(binding).toEqual({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'vault-rollout', labels: { 'app.kubernetes.io/name': 'vault-rollout' } },
      spec: { policyName: 'vault-rollout', validationActions: ['Deny'] },
    });
  });

  it.each<[string, { users: string[]; groups: string[] }, string]>([
    [
      'users only',
      { users: ['vault-rollout'], groups: [] },
      '(has(request.userInfo.username) && request.userInfo.username in ["vault-rollout"])',
    ],
    [
      'groups only',
      { users: [], groups: ['eks-vault-rollout'] },
      '(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["eks-vault-rollout"]))',
    ],
  ])('%s', (_what, identity, expression) => {
    expect((admissionPolicy(example, identity).policy as unknown as Policy).spec.matchConditions[0]?.expression).toBe(
      expression,
    );
  });

  it.each([[{ users: [], groups: [] }], [{ users: [' '], groups: [] }]])(
    'refuses an identity that names nobody: %j',
    (identity) => {
      expect(() => admissionPolicy(example, identity)).toThrow(AdmissionPolicyError);
    },
  );

  it('allows creating only Events and self reviews, updating only restartable kinds, and bounds each kind', () => {
    // Every kind: consumers (the workload kinds), both operators' kinds, a custom resource.
    const everyKind = table(
      route('k', '{ clusters: [a], namespace: ns, consumers: { secret: db } }') +
        route('e', '{ clusters: [a], namespace: ns, sync: { kind: ExternalSecret, name: db }, restart: none }') +
        route('v', '{ clusters: [a], namespace: ns, sync: { kind: VaultStaticSecret, name: db }, restart: none }') +
        resourceRoute('h', '{ spec: { secretVersion: "{version}" } }'),
    );
    const p = admissionPolicy(everyKind, DEFAULT_IDENTITY).policy as unknown as Policy;
    const [first, ...rest] = p.spec.validations;
    // The field profiles (the namespace rules, one per kind, come first and are tested above).
    const perKind = rest.filter((v) => v.message !== undefined);
    expect(rest.length - perKind.length).toBe(8);
    expect(first?.expression).toContain(
      'request.operation == "CREATE" && variables.kind in ["/Event", "authentication.k8s.io/SelfSubjectReview", "authorization.k8s.io/SelfSubjectAccessReview", "authorization.k8s.io/SelfSubjectRulesReview"]',
    );
    expect(first?.expression).toContain(
      'request.operation == "UPDATE" && variables.subResource == "" && variables.kind in ["apps/DaemonSet", "apps/Deployment", "apps/StatefulSet", "argoproj.io/Rollout", "batch/CronJob", "example.com/Harbor", "external-secrets.io/ExternalSecret", "secrets.hashicorp.com/VaultStaticSecret"]',
    );
    expect(perKind.map((v) => v.expression.split('\n')[0])).toEqual(
      [
        'apps/DaemonSet',
        'apps/Deployment',
        'apps/StatefulSet',
        'argoproj.io/Rollout',
        'batch/CronJob',
        'example.com/Harbor',
        'external-secrets.io/ExternalSecret',
        'secrets.hashicorp.com/VaultStaticSecret',
      ].map((k) => `request.operation != "UPDATE" || variables.kind != "${k}" ||`),
    );
    // The fields the API server writes on every update are exempt for every kind.
    for (const v of perKind)
      expect(v.expression).toMatch(
        /variables\.k\d+_\d+\.all\(k, k in \[("annotations", )?"generation", "managedFields", "resourceVersion"\]/,
      );
    // The maps below the allowed keys are variables, computed once per request and only for the kind requested.
    const variables = (p.spec as unknown as { variables: Array<{ name: string; expression: string }> }).variables;
    expect(variables.filter((v) => v.name.startsWith('k4_'))).toEqual([
      { name: 'k4_42', expression: 'object.?metadata.orValue({})' },
      { name: 'k4_43', expression: 'oldObject.?metadata.orValue({})' },
      { name: 'k4_44', expression: 'variables.k4_42.?annotations.orValue({})' },
      { name: 'k4_45', expression: 'variables.k4_43.?annotations.orValue({})' },
      { name: 'k4_46', expression: 'object.?spec.orValue({})' },
      { name: 'k4_47', expression: 'oldObject.?spec.orValue({})' },
      { name: 'k4_48', expression: 'variables.k4_46.?jobTemplate.orValue({})' },
      { name: 'k4_49', expression: 'variables.k4_47.?jobTemplate.orValue({})' },
      { name: 'k4_50', expression: 'variables.k4_48.?spec.orValue({})' },
      { name: 'k4_51', expression: 'variables.k4_49.?spec.orValue({})' },
      { name: 'k4_52', expression: 'variables.k4_50.?template.orValue({})' },
      { name: 'k4_53', expression: 'variables.k4_51.?template.orValue({})' },
      { name: 'k4_54', expression: 'variables.k4_52.?metadata.orValue({})' },
      { name: 'k4_55', expression: 'variables.k4_53.?metadata.orValue({})' },
      { name: 'k4_56', expression: 'variables.k4_54.?annotations.orValue({})' },
      { name: 'k4_57', expression: 'variables.k4_55.?annotations.orValue({})' },
    ]);
    expect(perKind.find((v) => v.message?.endsWith('example.com/Harbor: a restart writes nothing else'))?.message).toBe(
      'vault-rollout may change only metadata.annotations["vault-rollout.io/restart-token"], metadata.annotations["vault-rollout.io/versions"], spec.secretVersion of a example.com/Harbor: a restart writes nothing else',
    );
  });
});

describe('vault-rollout admission-policy', () => {
  it.each([
    ['infra/routes/example.yaml', 'infra/rbac/admission-policy.yaml'],
    // What the test clusters apply: every kind in every namespace, with the generator's warning in it.
    ['test/clusters/admission-routes.yaml', 'test/clusters/admission-policy.yaml'],
  ])(
    'prints what the committed output of %s holds (regenerate %s after changing the routes or the kinds)',
    async (routes, output) => {
      const io = memoryIo({ [routes]: readRepoFile(routes) });
      expect(await main(['admission-policy', '--routes', routes], io)).toBe(0);
      expect(io.out).toBe(readRepoFile(output));
    },
  );

  it('takes the identity from --user and --group, and refuses bad usage', async () => {
    const io = memoryIo({ 'r.yaml': readRepoFile('infra/routes/example.yaml') });
    expect(await main(['admission-policy', '--routes', 'r.yaml', '--group', 'platform:vault-rollout'], io)).toBe(0);
    expect(io.out).toContain('request.userInfo.groups.exists(g, g in ["platform:vault-rollout"])');
    expect(io.out).not.toContain('request.userInfo.username');
    expect(await main(['admission-policy'], memoryIo())).toBe(64);
    expect(
      await main(
        ['admission-policy', '--routes', 'r.yaml', '--user', ''],
        memoryIo({ 'r.yaml': readRepoFile('infra/routes/example.yaml') }),
      ),
    ).toBe(64);
  });
});

describe('doctor: is the admission policy in place?', () => {
  const installed = (
    annotations: Record<string, string> = {
      'vault-rollout.io/restartable-kinds': '["apps/Deployment","example.com/Harbor"]',
      'vault-rollout.io/users': '["vault-rollout"]',
      'vault-rollout.io/groups': '["platform"]',
    },
  ): AdmissionObjects => ({
    policy: { annotations },
    binding: { policyName: 'vault-rollout', validationActions: ['Deny'] },
  });
  const me = { username: 'vault-rollout', groups: ['system:authenticated'] };

  it.each<[string, AdmissionObjects, { username?: string; groups?: string[] } | undefined, string[], boolean, string]>([
    [
      'installed, enforced, binds us, covers the table',
      installed(),
      me,
      ['apps/Deployment'],
      true,
      'installed and enforced: this identity may change only what a restart writes (2 kinds)',
    ],
    [
      'binds us by group',
      installed(),
      { username: 'arn:aws:sts::1:assumed-role/x', groups: ['platform'] },
      [],
      true,
      'installed and enforced: this identity may change only what a restart writes (2 kinds)',
    ],
    [
      'not installed',
      { policy: { failure: 'not found' }, binding: { failure: 'not found' } },
      me,
      [],
      false,
      'not installed: only RBAC bounds what this identity may patch',
    ],
    [
      'not readable',
      { policy: { failure: 'forbidden' }, binding: { failure: 'forbidden' } },
      me,
      [],
      false,
      'cannot check: may not read validatingadmissionpolicies/vault-rollout',
    ],
    [
      'not bound',
      { ...installed(), binding: { failure: 'not found' } },
      me,
      [],
      false,
      'the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding vault-rollout with validationActions [Deny]',
    ],
    [
      'bound to warn only',
      { ...installed(), binding: { policyName: 'vault-rollout', validationActions: ['Warn'] } },
      me,
      [],
      false,
      'the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding vault-rollout with validationActions [Deny]',
    ],
    [
      'binds someone else',
      installed(),
      { username: 'other', groups: [] },
      [],
      false,
      'installed, but it binds vault-rollout, group platform, not other',
    ],
    [
      'older than the table',
      installed(),
      me,
      ['apps/Deployment', 'example.com/Vault'],
      false,
      'installed, but it does not let this identity restart example.com/Vault (generated for another routing table)',
    ],
    [
      'unreadable annotations count as covering nothing',
      installed({ 'vault-rollout.io/restartable-kinds': 'nope', 'vault-rollout.io/users': '["vault-rollout"]' }),
      me,
      ['apps/Deployment'],
      false,
      'installed, but it does not let this identity restart apps/Deployment (generated for another routing table)',
    ],
  ])('%s', (_what, found, who, kinds, ok, detail) => {
    const check = admissionPolicyCheck(found, who, kinds);
    expect(check).toMatchObject({ ok, detail });
    expect(check.fix === undefined).toBe(ok);
  });

  // Where the table needs each kind patched here, against the policy's namespaces annotation.
  const withNamespaces = (namespaces: Record<string, string[]>) =>
    installed({
      'vault-rollout.io/restartable-kinds': '["apps/Deployment","example.com/Harbor"]',
      'vault-rollout.io/restartable-namespaces': JSON.stringify(namespaces),
      'vault-rollout.io/users': '["vault-rollout"]',
    });
  const need = (kind: string, names: string[], globs: string[] = [], anywhere: string[] = []) => ({
    kind,
    namespaces: { names, globs, anywhere },
  });
  it.each<[string, AdmissionObjects, Array<ReturnType<typeof need>>, boolean, string]>([
    [
      'covers every namespace the table targets',
      withNamespaces({ 'apps/Deployment': ['edge', 'payments', 'team-*'] }),
      [need('apps/Deployment', ['payments'], ['team-*'])],
      true,
      'installed and enforced: this identity may change only what a restart writes (2 kinds)',
    ],
    [
      'a policy for every namespace of the kind',
      withNamespaces({ 'apps/Deployment': ['*'] }),
      [need('apps/Deployment', [], [], ['route r, target 1: namespaces ["*"] reaches every namespace'])],
      true,
      'installed and enforced: this identity may change only what a restart writes (2 kinds)',
    ],
    [
      'a policy from before namespace bounds (no annotation): every namespace',
      installed(),
      [need('apps/Deployment', ['payments'])],
      true,
      'installed and enforced: this identity may change only what a restart writes (2 kinds)',
    ],
    [
      'a namespace added to the table since',
      withNamespaces({ 'apps/Deployment': ['edge'], 'example.com/Harbor': [''] }),
      [need('apps/Deployment', ['edge', 'payments'], ['team-*']), need('example.com/Harbor', [''])],
      false,
      'installed, but it does not let this identity patch apps/Deployment in payments, team-* (generated for another routing table)',
    ],
    [
      'a target that now reaches every namespace',
      withNamespaces({ 'apps/Deployment': ['edge'] }),
      [need('apps/Deployment', ['edge'], [], ['route r, target 1: namespaces ["*"] reaches every namespace'])],
      false,
      'installed, but it does not let this identity patch apps/Deployment in every namespace (generated for another routing table)',
    ],
    [
      'an unreadable annotation covers nothing',
      installed({
        'vault-rollout.io/restartable-kinds': '["apps/Deployment"]',
        'vault-rollout.io/restartable-namespaces': 'nope',
        'vault-rollout.io/users': '["vault-rollout"]',
      }),
      [need('apps/Deployment', ['edge'])],
      false,
      'installed, but it does not let this identity patch apps/Deployment in edge (generated for another routing table)',
    ],
  ])('namespaces: %s', (_what, found, needs, ok, detail) => {
    expect(
      admissionPolicyCheck(
        found,
        me,
        needs.map((n) => n.kind),
        needs,
      ),
    ).toMatchObject({ ok, detail });
  });
});
