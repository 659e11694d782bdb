import { describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { admissionPolicy, AdmissionPolicyError, DEFAULT_IDENTITY, fieldPaths, mergeTrees, restartableKinds, restartFields, sameExcept, type FieldTree } from '../../../lib/deploy/admission-policy.ts';
import { admissionPolicyCheck, type AdmissionObjects } from '../../../lib/deploy/doctor.ts';
import { resourceDescriptor, WORKLOAD_KINDS } from '../../../lib/workloads/workload-kinds.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { memoryIo, readRepoFile } from '../../helpers.ts';

const RECORD = ['"kubectl.kubernetes.io/restartedAt"', '"vault-rollout.io/restart-token"', '"vault-rollout.io/versions"'];

const table = (routes: string) =>
  loadRoutingTable(`clusters:\n  a: { kubeconfig: { file: a.yaml } }\nvault: { mounts: { secret: 2 } }\nroutes:\n${routes}`, 'routes.yaml');

const resourceRoute = (name: string, patch: string, kind = 'Harbor', apiVersion = 'example.com/v1') => `  - name: ${name}
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
    ['Rollout', ['metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/versions"]', 'spec.restartAt']],
  ])('%s', (kind, paths) => {
    expect(fieldPaths(restartFields(WORKLOAD_KINDS[kind as keyof typeof WORKLOAD_KINDS]))).toEqual(paths);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    ['a spec field', { spec: { secretVersion: '{version}' } }, ['metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/versions"]', 'spec.secretVersion']],
    ['a declared annotation, kept beside the record', { metadata: { annotations: { 'operator.io/reload': '{version}' } } }, ['metadata.annotations["operator.io/reload"]', 'metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/versions"]']],
    ['an array or an empty object is replaced whole by a merge patch', { spec: { list: ['{version}'], opaque: {} } }, ['metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/versions"]', 'spec.list', 'spec.opaque']],
  ])('a custom resource route: %s', (_what, patch, paths) => {
    expect(fieldPaths(restartFields(resourceDescriptor('example.com/v1', 'Harbor', patch)))).toEqual(paths);
  });
});

describe('restartable kinds from the routing table', () => {
  it('always the built-in kinds; a custom resource with the union of its routes\' patches', () => {
    const kinds = restartableKinds(table(resourceRoute('one', '{ spec: { secretVersion: "{version}" } }') + resourceRoute('two', '{ spec: { tlsVersion: "{version}" } }') + resourceRoute('three', '{ spec: { x: 1 } }', 'Vault', 'vault.example.org/v1beta1')));
    expect(kinds.map((k) => k.kind)).toEqual(['apps/DaemonSet', 'apps/Deployment', 'apps/StatefulSet', 'argoproj.io/Rollout', 'batch/CronJob', 'example.com/Harbor', 'external-secrets.io/ExternalSecret', 'secrets.hashicorp.com/VaultStaticSecret', 'vault.example.org/Vault']);
    // A sync target's nudge: annotations only.
    expect(fieldPaths(kinds.find((k) => k.kind === 'external-secrets.io/ExternalSecret')?.fields ?? {})).toEqual(['metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/sync-observed"]', 'metadata.annotations["vault-rollout.io/sync-requested-at"]', 'metadata.annotations["vault-rollout.io/versions"]']);
    expect(fieldPaths(kinds.find((k) => k.kind === 'example.com/Harbor')?.fields ?? {})).toEqual(['metadata.annotations["vault-rollout.io/restart-token"]', 'metadata.annotations["vault-rollout.io/versions"]', 'spec.secretVersion', 'spec.tlsVersion']);
  });

  // Issue #21: the record is read only where vault-rollout writes it (readRecord), and the policy lets it write exactly there.
  it('a pod-template kind: exactly the restart record on the template and reconcile\'s versions annotation on the metadata', () => {
    const kinds = restartableKinds(table(resourceRoute('one', '{ spec: { x: 1 } }')));
    expect(fieldPaths(kinds.find((k) => k.kind === 'apps/Deployment')?.fields ?? {})).toEqual(['metadata.annotations["vault-rollout.io/versions"]', ...RECORD.map((k) => `spec.template.metadata.annotations[${k}]`)]);
    expect(fieldPaths(kinds.find((k) => k.kind === 'batch/CronJob')?.fields ?? {})).toEqual(['metadata.annotations["vault-rollout.io/versions"]', ...RECORD.map((k) => `spec.jobTemplate.spec.template.metadata.annotations[${k}]`)]);
  });

  it('a route may patch a built-in kind as a resource: both writes are allowed for it', () => {
    const kinds = restartableKinds(table(resourceRoute('dep', '{ spec: { template: { metadata: { annotations: { "reloader/hash": "{version}" } } } } }', 'Deployment', 'apps/v1')));
    expect(fieldPaths(kinds.find((k) => k.kind === 'apps/Deployment')?.fields ?? {})).toEqual([
      'metadata.annotations["vault-rollout.io/restart-token"]',
      'metadata.annotations["vault-rollout.io/versions"]',
      'spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"]',
      'spec.template.metadata.annotations["reloader/hash"]',
      'spec.template.metadata.annotations["vault-rollout.io/restart-token"]',
      'spec.template.metadata.annotations["vault-rollout.io/versions"]',
    ]);
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
    const cel = sameExcept('object', 'oldObject', { metadata: { annotations: { 'team.io/{app}-version': true, 'a.b/c': true } } });
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
    expect(p.spec.matchConditions).toEqual([{ name: 'is-vault-rollout', expression: '(has(request.userInfo.username) && request.userInfo.username in ["u1", "u2"]) ||\n(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["g"]))' }]);
    expect(p.spec.matchConstraints.resourceRules).toEqual([{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'], scope: '*' }]);
    expect(p.metadata.annotations).toMatchObject({ 'vault-rollout.io/users': '["u1","u2"]', 'vault-rollout.io/groups': '["g"]' });
    expect(binding).toEqual({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'vault-rollout', labels: { 'app.kubernetes.io/name': 'vault-rollout' } }, spec: { policyName: 'vault-rollout', validationActions: ['Deny'] } });
  });

  it.each<[string, { users: string[]; groups: string[] }, string]>([
    ['users only', { users: ['vault-rollout'], groups: [] }, '(has(request.userInfo.username) && request.userInfo.username in ["vault-rollout"])'],
    ['groups only', { users: [], groups: ['eks-vault-rollout'] }, '(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["eks-vault-rollout"]))'],
  ])('%s', (_what, identity, expression) => {
    expect((admissionPolicy(example, identity).policy as unknown as Policy).spec.matchConditions[0]?.expression).toBe(expression);
  });

  it.each([[{ users: [], groups: [] }], [{ users: [' '], groups: [] }]])('refuses an identity that names nobody: %j', (identity) => {
    expect(() => admissionPolicy(example, identity)).toThrow(AdmissionPolicyError);
  });

  it('allows creating only Events and self reviews, updating only restartable kinds, and bounds each kind', () => {
    const p = admissionPolicy(example, DEFAULT_IDENTITY).policy as unknown as Policy;
    const [first, ...perKind] = p.spec.validations;
    expect(first?.expression).toContain('request.operation == "CREATE" && variables.kind in ["/Event", "authentication.k8s.io/SelfSubjectReview", "authorization.k8s.io/SelfSubjectAccessReview", "authorization.k8s.io/SelfSubjectRulesReview"]');
    expect(first?.expression).toContain('request.operation == "UPDATE" && variables.subResource == "" && variables.kind in ["apps/DaemonSet", "apps/Deployment", "apps/StatefulSet", "argoproj.io/Rollout", "batch/CronJob", "example.com/Harbor", "external-secrets.io/ExternalSecret", "secrets.hashicorp.com/VaultStaticSecret"]');
    expect(perKind.map((v) => v.expression.split('\n')[0])).toEqual(['apps/DaemonSet', 'apps/Deployment', 'apps/StatefulSet', 'argoproj.io/Rollout', 'batch/CronJob', 'example.com/Harbor', 'external-secrets.io/ExternalSecret', 'secrets.hashicorp.com/VaultStaticSecret'].map((k) => `request.operation != "UPDATE" || variables.kind != "${k}" ||`));
    // The fields the API server writes on every update are exempt for every kind.
    for (const v of perKind) expect(v.expression).toMatch(/variables\.k\d+_\d+\.all\(k, k in \[("annotations", )?"generation", "managedFields", "resourceVersion"\]/);
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
    expect(perKind.find((v) => v.message?.endsWith('example.com/Harbor: a restart writes nothing else'))?.message).toBe('vault-rollout may change only metadata.annotations["vault-rollout.io/restart-token"], metadata.annotations["vault-rollout.io/versions"], spec.secretVersion of a example.com/Harbor: a restart writes nothing else');
  });
});

describe('vault-rollout admission-policy', () => {
  it('prints what infra/rbac/admission-policy.yaml holds (regenerate it after changing the example routes or the kinds)', async () => {
    const io = memoryIo({ 'infra/routes/example.yaml': readRepoFile('infra/routes/example.yaml') });
    expect(await main(['admission-policy', '--routes', 'infra/routes/example.yaml'], io)).toBe(0);
    expect(io.out).toBe(readRepoFile('infra/rbac/admission-policy.yaml'));
  });

  it('takes the identity from --user and --group, and refuses bad usage', async () => {
    const io = memoryIo({ 'r.yaml': readRepoFile('infra/routes/example.yaml') });
    expect(await main(['admission-policy', '--routes', 'r.yaml', '--group', 'platform:vault-rollout'], io)).toBe(0);
    expect(io.out).toContain('request.userInfo.groups.exists(g, g in ["platform:vault-rollout"])');
    expect(io.out).not.toContain('request.userInfo.username');
    expect(await main(['admission-policy'], memoryIo())).toBe(64);
    expect(await main(['admission-policy', '--routes', 'r.yaml', '--user', ''], memoryIo({ 'r.yaml': readRepoFile('infra/routes/example.yaml') }))).toBe(64);
  });
});

describe('doctor: is the admission policy in place?', () => {
  const installed = (annotations: Record<string, string> = { 'vault-rollout.io/restartable-kinds': '["apps/Deployment","example.com/Harbor"]', 'vault-rollout.io/users': '["vault-rollout"]', 'vault-rollout.io/groups': '["platform"]' }): AdmissionObjects => ({ policy: { annotations }, binding: { policyName: 'vault-rollout', validationActions: ['Deny'] } });
  const me = { username: 'vault-rollout', groups: ['system:authenticated'] };

  it.each<[string, AdmissionObjects, { username?: string; groups?: string[] } | undefined, string[], boolean, string]>([
    ['installed, enforced, binds us, covers the table', installed(), me, ['apps/Deployment'], true, 'installed and enforced: this identity may change only what a restart writes (2 kinds)'],
    ['binds us by group', installed(), { username: 'arn:aws:sts::1:assumed-role/x', groups: ['platform'] }, [], true, 'installed and enforced: this identity may change only what a restart writes (2 kinds)'],
    ['not installed', { policy: { failure: 'not found' }, binding: { failure: 'not found' } }, me, [], false, 'not installed: only RBAC bounds what this identity may patch'],
    ['not readable', { policy: { failure: 'forbidden' }, binding: { failure: 'forbidden' } }, me, [], false, 'cannot check: may not read validatingadmissionpolicies/vault-rollout'],
    ['not bound', { ...installed(), binding: { failure: 'not found' } }, me, [], false, 'the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding vault-rollout with validationActions [Deny]'],
    ['bound to warn only', { ...installed(), binding: { policyName: 'vault-rollout', validationActions: ['Warn'] } }, me, [], false, 'the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding vault-rollout with validationActions [Deny]'],
    ['binds someone else', installed(), { username: 'other', groups: [] }, [], false, 'installed, but it binds vault-rollout, group platform, not other'],
    ['older than the table', installed(), me, ['apps/Deployment', 'example.com/Vault'], false, 'installed, but it does not let this identity restart example.com/Vault (generated for another routing table)'],
    ['unreadable annotations count as covering nothing', installed({ 'vault-rollout.io/restartable-kinds': 'nope', 'vault-rollout.io/users': '["vault-rollout"]' }), me, ['apps/Deployment'], false, 'installed, but it does not let this identity restart apps/Deployment (generated for another routing table)'],
  ])('%s', (_what, found, who, kinds, ok, detail) => {
    const check = admissionPolicyCheck(found, who, kinds);
    expect(check).toMatchObject({ ok, detail });
    expect(check.fix === undefined).toBe(ok);
  });
});
