import { describe, expect, it } from 'vitest';
import { problemsOf as problems } from './problems.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { readRepoFile } from '../../helpers.ts';

const clusters = `clusters:
  prod-eu:
    kubeconfig: { file: eu.yaml }
    labels: { env: prod }
  prod-us:
    eks: { name: prod-us, region: us-east-1 }
    labels: { env: prod }
`;

describe('routing table', () => {
  it('loads the example table', () => {
    const table = loadRoutingTable(readRepoFile('infra/routes/example.yaml'), 'example.yaml');
    expect([...table.clusters.keys()]).toEqual(['alpha', 'beta', 'gamma']);
    expect(table.routes.map((r) => r.name)).toEqual([
      'payments-db',
      'shared-tls',
      'batch-opt-in',
      'registry-credentials',
    ]);
    expect(table.routes[0]?.targets[0]?.clusters).toEqual(['alpha', 'beta']);
    expect([...(table.routes[0]?.operations ?? [])]).toEqual(['write', 'undelete']);
    expect(table.mounts.get('team-a/secret')).toBe(2);
  });

  it.each([
    [
      'an unknown cluster',
      `${clusters}routes:
  - name: r
    match: { path: "secret/x" }
    targets:
      - { clusters: [prod-eu, prod-ap], namespace: n, kind: Deployment, name: x }
`,
      'routes.yaml:12:21: routes[0].targets[0].clusters: unknown cluster "prod-ap"; defined: prod-eu, prod-us',
    ],
    [
      'a label selector that selects nothing',
      `${clusters}routes:
  - name: r
    match: { path: "secret/x" }
    targets:
      - { clusters: { env: dev }, namespace: n, kind: Deployment, name: x }
`,
      'routes.yaml:12:21: routes[0].targets[0].clusters: the label selector {"env":"dev"} selects no cluster',
    ],
    [
      'an undefined capture',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{app}" }
    targets:
      - { clusters: [prod-eu], namespace: n, kind: Deployment, name: "{service}" }
`,
      'routes.yaml:12:70: routes[0].targets[0].name: undefined capture {service}: the path "secret/{app}" captures {app}',
    ],
    [
      'an unused capture',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{app}/{env}" }
    targets:
      - { clusters: [prod-eu], namespace: n, names: [api], kind: Deployment, name: "{app}" }
`,
      'routes.yaml:10:20: routes[0].match.path: unused capture {env}: no target uses it (use * to match without capturing)',
    ],
    [
      'a duplicate route name',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Deployment, name: a }]
  - name: r
    match: { path: "secret/b" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Deployment, name: b }]
`,
      'routes.yaml:12:11: routes[1].name: duplicate route name "r" (first at routes[0])',
    ],
    [
      'a target that names no workload',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets:
      - clusters: [prod-eu]
        namespace: n
        kind: Deployment
`,
      'routes.yaml:12:9: routes[0].targets[0]: give exactly one of name, selector or annotated: true',
    ],
    [
      'a target that names two',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Deployment, name: a, annotated: true }]
`,
      'routes.yaml:11:15: routes[0].targets[0]: give exactly one of name, selector or annotated: true',
    ],
    [
      'an unknown kind',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Pod, name: a }]
`,
      'routes.yaml:11:58: routes[0].targets[0].kind: unsupported value "Pod"; supported values: "Deployment", "StatefulSet", "DaemonSet", "Rollout", "CronJob"',
    ],
    [
      'a bad pattern',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a**" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Deployment, name: a }]
`,
      'routes.yaml:10:20: routes[0].match.path: "**" must be a whole segment, found "a**"',
    ],
    [
      'a pattern that would backtrack',
      `${clusters}routes:
  - name: r
    match: { path: "secret/*a*a*a*a*a*a*a*b" }
    targets: [{ clusters: [prod-eu], namespace: n, kind: Deployment, name: a }]
`,
      'routes.yaml:10:20: routes[0].match.path: "*a*a*a*a*a*a*a*b" has 8 wildcards and captures; at most 4 per segment',
    ],
    [
      'a placeholder in a patch key',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{field}" }
    targets:
      - clusters: [prod-eu]
        resource: { apiVersion: a.io/v1, kind: K, name: x }
        patch:
          spec:
            "{field}": "{version}"
`,
      'routes.yaml:16:24: routes[0].targets[0].patch.spec.{field}: placeholder in the patch key "{field}": placeholders may only appear in values, so a path can never choose which field is written',
    ],
    [
      'a literal namespace outside its own bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: kube-system, namespaces: [payments, "team-*"], kind: Deployment, name: a }]
`,
      'routes.yaml:11:74: routes[0].targets[0].namespaces: the target\'s namespace "kube-system" is outside its own namespaces: payments, team-*',
    ],
    [
      'a namespace bound on a cluster-scoped resource',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespaces: [a], resource: { apiVersion: a.io/v1, kind: K, name: x }, patch: { spec: { v: "{version}" } } }]
`,
      'routes.yaml:11:50: routes[0].targets[0].namespaces: the resource has no namespace (cluster-scoped), so namespaces bounds nothing; remove it',
    ],
    [
      'a resource namespace rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{ns}" }
    targets: [{ clusters: [prod-eu], resource: { apiVersion: a.io/v1, kind: K, namespace: "{ns}", name: x }, patch: { spec: { v: "{version}" } } }]
`,
      'routes.yaml:11:91: routes[0].targets[0].resource.namespace: the namespace "{ns}" is rendered from the path: list the namespaces it may reach in namespaces: [names or globs such as team-*]',
    ],
    [
      'a namespace glob over the pattern bounds',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{ns}" }
    targets: [{ clusters: [prod-eu], namespace: "{ns}", namespaces: ["*a*a*a*a*"], kind: Deployment, name: a }]
`,
      'routes.yaml:11:70: routes[0].targets[0].namespaces[0]: "*a*a*a*a*" has 5 wildcards and captures; at most 4 per segment',
    ],
    [
      'a namespace rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{ns}" }
    targets: [{ clusters: [prod-eu], namespace: "{ns}", kind: Deployment, name: a }]
`,
      'routes.yaml:11:49: routes[0].targets[0].namespace: the namespace "{ns}" is rendered from the path: list the namespaces it may reach in namespaces: [names or globs such as team-*]',
    ],
    [
      'a namespace bound that is no namespace',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{ns}" }
    targets: [{ clusters: [prod-eu], namespace: "{ns}", namespaces: ["Team_*"], kind: Deployment, name: a }]
`,
      'routes.yaml:11:70: routes[0].targets[0].namespaces[0]: must be a namespace name or a glob of one, e.g. payments or team-*',
    ],
    [
      'a workload name rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/payments/{service}" }
    targets: [{ clusters: [prod-eu], namespace: payments, kind: Deployment, name: "{service}" }]
`,
      'routes.yaml:11:83: routes[0].targets[0].name: the name "{service}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]',
    ],
    [
      'a name partly rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/card/{component}" }
    targets: [{ clusters: [prod-eu], namespace: card, kind: StatefulSet, name: "card-{component}" }]
`,
      'routes.yaml:11:80: routes[0].targets[0].name: the name "card-{component}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]',
    ],
    [
      'a resource name rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/registry/{registry}" }
    targets: [{ clusters: [prod-eu], resource: { apiVersion: a.io/v1, kind: K, namespace: registry, name: "{registry}" }, patch: { spec: { v: "{version}" } } }]
`,
      'routes.yaml:11:107: routes[0].targets[0].resource.name: the name "{registry}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]',
    ],
    [
      'a synced resource rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/eso/{name}" }
    targets: [{ clusters: [prod-eu], namespace: apps, sync: { kind: ExternalSecret, name: "{name}" } }]
`,
      'routes.yaml:11:91: routes[0].targets[0].sync.name: the name "{name}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]',
    ],
    [
      'a consumed Secret rendered from the path without a bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/db/{secret}" }
    targets: [{ clusters: [prod-eu], namespace: apps, consumers: { secret: "{secret}" } }]
`,
      'routes.yaml:11:76: routes[0].targets[0].consumers.secret: the name "{secret}" is rendered from the path: list the names it may reach in names: [names or globs such as api-*]',
    ],
    [
      'a literal name outside its own bound',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: payments, names: [api, "web-*"], kind: Deployment, name: admin }]
`,
      'routes.yaml:11:66: routes[0].targets[0].names: the target\'s name "admin" is outside its own names: api, web-*',
    ],
    [
      'a name bound on a target that names nothing',
      `${clusters}routes:
  - name: r
    match: { path: "secret/a" }
    targets: [{ clusters: [prod-eu], namespace: payments, names: [api], kind: Deployment, selector: "app=x" }]
`,
      'routes.yaml:11:66: routes[0].targets[0].names: the target finds its workloads by selector or annotation, so names bounds nothing; remove it',
    ],
    [
      'a name bound that is no name',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{app}" }
    targets: [{ clusters: [prod-eu], namespace: payments, names: ["Api_*"], kind: Deployment, name: "{app}" }]
`,
      'routes.yaml:11:67: routes[0].targets[0].names[0]: must be a Kubernetes object name or a glob of one, e.g. api or api-*',
    ],
    [
      'a capture named like a built-in',
      `${clusters}routes:
  - name: r
    match: { path: "secret/{version}" }
    targets: [{ clusters: [prod-eu], resource: { apiVersion: a.io/v1, kind: K, name: x }, patch: { spec: { v: "{version}" } } }]
`,
      'routes.yaml:10:20: routes[0].match.path: {version} is a built-in placeholder; name the capture differently',
    ],
    [
      'a cluster with two credentials',
      `clusters:
  c:
    kubeconfig: { env: KC }
    eks: { name: c, region: eu-west-1 }
`,
      'routes.yaml:3:5: clusters.c: give exactly one of kubeconfig, eks or inCluster: true',
    ],
    [
      'an unknown kubeconfig source',
      `clusters:
  c:
    kubeconfig: { vault: secret/kc }
`,
      'routes.yaml:3:17: clusters.c.kubeconfig: must be exactly one of { file }, { env }, { inline } (each with optional allowExec, allowTokenFile), { ssm } or { secretsManager }',
    ],
    ...(
      [
        ['an SSM parameter', 'kubeconfig: { ssm: "/vr/kubeconfigs/*" }', '2:27: clusters.c.kubeconfig.ssm'],
        [
          'a Secrets Manager secret',
          'kubeconfig: { secretsManager: "vr/prod-?" }',
          '2:38: clusters.c.kubeconfig.secretsManager',
        ],
        ['an EKS cluster name', 'eks: { name: "prod-*", region: us-east-1 }', '2:21: clusters.c.eks.name'],
        [
          'a role ARN',
          'eks: { name: p, region: us-east-1, roleArn: "arn:aws:iam::123456789012:role/*" }',
          '2:52: clusters.c.eks.roleArn',
        ],
      ] as const
    ).map(([what, cluster, where]) => [
      `an IAM wildcard in ${what}`,
      `clusters:\n  c: { ${cluster} }\n`,
      `routes.yaml:${where}: must not contain * or ?: the IAM policy derived from the routing table would read it as a wildcard`,
    ]),
    [
      'broken YAML',
      'clusters: {\n  a: [\n',
      'routes.yaml:3:1: YAML syntax: Flow sequence in block collection must be sufficiently indented and end with a ]',
    ],
    [
      'an unknown top-level field',
      `${clusters}rutes: []\n`,
      'routes.yaml:8:1: rutes: unknown field "rutes" (did you mean "routes"?)',
    ],
  ])('reports %s with file, line and field', (_name, yaml, expected) => {
    // Problems come in the order of the text; the one named may follow another the same table has.
    expect(problems(yaml)).toContainEqual(expect.stringContaining(expected));
  });

  it('reports every problem at once', () => {
    const found = problems(`${clusters}routes:
  - name: r
    match: { path: "secret/{app}" }
    targets:
      - { clusters: [nope], namespace: n, names: [api], kind: Deployment, name: "{svc}" }
`);
    expect(found).toHaveLength(3);
  });

  it('allows built-in placeholders in resource patch templates but not in workload names', () => {
    expect(
      problems(`${clusters}routes:
  - name: r
    match: { path: "secret/{app}" }
    targets:
      - { clusters: [prod-eu], names: [api], resource: { apiVersion: a.io/v1, kind: K, name: "{app}" }, patch: { spec: { v: "{version}", p: "{path}" } } }
      - { clusters: [prod-eu], namespace: n, names: ["api-*"], kind: Deployment, name: "{app}-{version}" }
`),
    ).toEqual([
      'routes.yaml:13:88: routes[0].targets[1].name: undefined capture {version}: the path "secret/{app}" captures {app}',
    ]);
  });
});
