/**
 * A ValidatingAdmissionPolicy that bounds what the vault-rollout identity may change, on the API server itself,
 * derived from a stage's routing table (like the IAM in iam-from-routes.ts). RBAC `patch` on a workload allows any
 * change to it; this policy allows the identity exactly what a restart writes and denies everything else it tries:
 *
 * - UPDATE (a patch, or a server-side apply) of a kind a route restarts or nudges, on the main resource only, in a
 *   namespace some route targets that kind in, where the new object equals the stored one except at the fields
 *   the kind's restart patch writes. Those fields come from the
 *   product's own descriptors (lib/workloads/workload-kinds.ts): the record annotations of a pod template, a Rollout's
 *   `spec.restartAt` and metadata annotations, and for each custom resource the fields its routes' merge-patch
 *   templates declare plus the record annotations.
 * - CREATE of core Events (the SecretRotated record) and of the self reviews `doctor` asks.
 * - Nothing else: no other kind, no subresource (scale, status), no CREATE or DELETE of workloads, no CONNECT.
 *
 * Comparisons are "everything except these keys is equal", never "these fields are equal", so a field that a later
 * Kubernetes version adds to a pod spec is covered without regenerating the policy. The API server itself changes
 * `metadata.resourceVersion`, `metadata.generation` and `metadata.managedFields` on every write (and a DaemonSet's
 * template-generation annotation on a restart): those are exempt, since admission sees the object after them.
 *
 * The namespaces come from the targets: a literal `namespace`, or the `namespaces` bound (names and `*` globs) of a
 * namespace rendered from the path; a consumers or sync target restarts every workload kind in its namespace. A
 * kind that some target may reach in any namespace (`namespaces: ["*"]`, or a rendered namespace without a bound,
 * which `validate` refuses) keeps no namespace condition, and the generator says so (`warnings`).
 *
 * Everybody else is unaffected: the policy's matchConditions select the identity's requests by user name or group.
 * It matches every resource and operation, and lets the identity's requests through only when a rule allows them.
 *
 * Pure: the routing table and the identity come in, the two manifests go out.
 */
import { stringify } from 'yaml';
import type { CompiledTarget, RoutingTable } from '../routing/routing-table.ts';
import { isConsumersTarget, isResourceTarget, isSyncTarget } from '../routing/routing-table.ts';
import { WorkloadKinds, type Target } from '../routing/target-schema.ts';
import { placeholders } from '../routing/template.ts';
import { ANNOTATIONS, recordOnlyPatch } from '../plan/restart-record.ts';
import { SYNC_KINDS } from '../workloads/sync-kinds.ts';
import {
  resourceDescriptor,
  ROLLOUT_BY_TEMPLATE,
  WORKLOAD_KINDS,
  type WorkloadDescriptor,
} from '../workloads/workload-kinds.ts';
import { celList, celString, fieldPaths, globRegex, sameExcept, type FieldTree } from './admission-cel.ts';

export const POLICY_NAME = 'vault-rollout';

/**
 * Annotations on the policy, for `doctor` (JSON lists): the kinds it lets the identity restart (`group/Kind`), and whom
 * it binds.
 */
export const POLICY_ANNOTATIONS = {
  kinds: 'vault-rollout.io/restartable-kinds',
  users: 'vault-rollout.io/users',
  groups: 'vault-rollout.io/groups',
  /**
   * JSON map `group/Kind` -> the namespaces and globs its UPDATEs are allowed in (`["*"]`: every namespace; `""`:
   * cluster-scoped).
   */
  namespaces: 'vault-rollout.io/restartable-namespaces',
} as const;

export interface AdmissionIdentity {
  /** User names, e.g. `system:serviceaccount:vault-rollout:vault-rollout` or a client certificate's CN. */
  users: readonly string[];
  /** Groups, e.g. the Kubernetes group an EKS access entry maps the IAM role to. */
  groups: readonly string[];
}

/**
 * The identities the shipped manifests give vault-rollout: the ServiceAccount of infra/rbac, the EKS group of
 * infra/eks, and the client-certificate user `vault-rollout` of the test clusters' vault-rollout.kubeconfig.
 */
export const DEFAULT_IDENTITY: AdmissionIdentity = {
  users: ['system:serviceaccount:vault-rollout:vault-rollout', 'vault-rollout'],
  groups: ['vault-rollout'],
};

export class AdmissionPolicyError extends Error {
  override readonly name = 'AdmissionPolicyError';
}

/** The fields the API server writes on every update, whoever sends it. */
const SERVER_MANAGED: FieldTree = { metadata: { resourceVersion: true, generation: true, managedFields: true } };

/**
 * What the API server itself writes when a kind's pod template changes: a DaemonSet's template generation, which
 * apps/v1 carries in this annotation (the server sets it from the stored value; a client cannot choose it).
 */
const SERVER_WRITTEN_ON_RESTART: Readonly<Record<string, FieldTree>> = {
  'apps/DaemonSet': { metadata: { annotations: { 'deprecated.daemonset.template.generation': true } } },
};

/** The kinds the identity creates: the SecretRotated Event, and the self reviews `doctor` sends. */
const CREATABLE_KINDS = [
  '/Event',
  'authentication.k8s.io/SelfSubjectReview',
  'authorization.k8s.io/SelfSubjectAccessReview',
  'authorization.k8s.io/SelfSubjectRulesReview',
];

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '');

/** The fields a descriptor's restart patch writes, found by rendering one (values do not matter, keys do). */
export function restartFields(descriptor: WorkloadDescriptor): FieldTree {
  const annotations = { [ANNOTATIONS.restartedAt]: 'x', [ANNOTATIONS.restartToken]: 'x', [ANNOTATIONS.versions]: 'x' };
  return treeOf(descriptor.restartPatch({ annotations, restartAt: 'x' }));
}

function treeOf(patch: Record<string, unknown>): FieldTree {
  const tree: FieldTree = {};
  for (const [key, value] of Object.entries(patch)) {
    // A merge patch replaces anything that is not a non-empty object (scalars, arrays, null) as a whole.
    const isObject =
      typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length > 0;
    tree[key] = isObject ? treeOf(value as Record<string, unknown>) : true;
  }
  return tree;
}

export function mergeTrees(a: FieldTree, b: FieldTree): FieldTree {
  const merged: FieldTree = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const existing = merged[key];
    merged[key] =
      existing === undefined ? value : existing === true || value === true ? true : mergeTrees(existing, value);
  }
  return merged;
}

/**
 * Where the identity may patch a kind: namespace names (`''` for a cluster-scoped object) and `*` globs, or every
 * namespace when `anywhere` gives a reason (one per target that reaches any namespace).
 */
export interface NamespaceScope {
  names: string[];
  globs: string[];
  anywhere: string[];
}

/** One kind the identity may restart, and where. `kind` is `group/Kind` (core: `/Kind`). */
export interface RestartableKind {
  kind: string;
  fields: FieldTree;
  namespaces: NamespaceScope;
}

/**
 * The restart descriptors a target patches: its own kind, or for sync and consumers targets every workload kind (the
 * consumers) too.
 */
function descriptorsOf(target: Target): WorkloadDescriptor[] {
  const consumers = WorkloadKinds.map((k) => WORKLOAD_KINDS[k]);
  if (isResourceTarget(target))
    return [resourceDescriptor(target.resource.apiVersion, target.resource.kind, target.patch)];
  if (isSyncTarget(target)) return [SYNC_KINDS[target.sync.kind], ...(target.restart === 'none' ? [] : consumers)];
  if (isConsumersTarget(target)) return consumers;
  return [target.restartBy === 'template' ? ROLLOUT_BY_TEMPLATE : WORKLOAD_KINDS[target.kind]];
}

/** The namespaces one target reaches, from its namespace template and its `namespaces` bound. */
function targetNamespaces({ target, namespaces: compiledBound }: CompiledTarget, where: string): NamespaceScope {
  const template = isResourceTarget(target) ? target.resource.namespace : target.namespace;
  if (template === undefined) return { names: [''], globs: [], anywhere: [] };
  if (placeholders(template).length === 0) return { names: [template], globs: [], anywhere: [] };
  const bound = compiledBound?.sources ?? target.namespaces;
  if (bound === undefined)
    return {
      names: [],
      globs: [],
      anywhere: [`${where}: the namespace "${template}" is rendered from the path with no namespaces bound`],
    };
  const everywhere = bound.filter((source) => /^\*+$/.test(source));
  if (everywhere.length > 0)
    return {
      names: [],
      globs: [],
      anywhere: [`${where}: namespaces ${JSON.stringify(everywhere)} reaches every namespace`],
    };
  return {
    names: bound.filter((source) => !source.includes('*')),
    globs: bound.filter((source) => source.includes('*')),
    anywhere: [],
  };
}

const mergeScopes = (a: NamespaceScope, b: NamespaceScope): NamespaceScope => ({
  names: [...new Set([...a.names, ...b.names])].sort(),
  globs: [...new Set([...a.globs, ...b.globs])].sort(),
  anywhere: [...a.anywhere, ...b.anywhere],
});

/**
 * Every kind the routing table restarts or nudges, with the union of what its restart patches write and of the
 * namespaces its targets reach. A kind no route targets is not here: the policy denies every change to it.
 */
export function restartableKinds(table: Pick<RoutingTable, 'routes'>): RestartableKind[] {
  const byKind = new Map<string, { fields: FieldTree; namespaces: NamespaceScope }>();
  for (const route of table.routes) {
    route.targets.forEach((compiled, t) => {
      const namespaces = targetNamespaces(compiled, `route ${route.name}, target ${t + 1}`);
      for (const descriptor of descriptorsOf(compiled.target)) {
        const kind = `${groupOf(descriptor.apiVersion)}/${descriptor.kind}`;
        // Besides the restart: reconcile records versions a workload already runs on its metadata (recordOnlyPatch).
        const fields = mergeTrees(restartFields(descriptor), treeOf(recordOnlyPatch({})));
        const known = byKind.get(kind);
        byKind.set(
          kind,
          known
            ? { fields: mergeTrees(known.fields, fields), namespaces: mergeScopes(known.namespaces, namespaces) }
            : { fields, namespaces: mergeScopes({ names: [], globs: [], anywhere: [] }, namespaces) },
        );
      }
    });
  }
  return [...byKind]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([kind, { fields, namespaces }]) => ({ kind, fields, namespaces }));
}

/** CEL that holds when the request's namespace is one of a scope's names or matches one of its globs. */
export function namespaceCondition(
  scope: Pick<NamespaceScope, 'names' | 'globs'>,
  namespace = 'variables.requestNamespace',
): string {
  const terms = [
    ...(scope.names.length > 0 ? [`${namespace} in ${celList(scope.names)}`] : []),
    ...scope.globs.map((g) => `${namespace}.matches(${celString(globRegex(g))})`),
  ];
  return terms.length > 0 ? terms.join(' || ') : 'false';
}

/** A scope for people: `edge, payments, team-*`, `(cluster-scoped)`, or `every namespace`. */
export const describeScope = (scope: NamespaceScope): string =>
  scope.anywhere.length > 0
    ? 'every namespace'
    : [...scope.names.map((n) => (n === '' ? '(cluster-scoped)' : n)), ...scope.globs].join(', ');

// ---------------------------------------------------------------------------------------------------------------
// The manifests
// ---------------------------------------------------------------------------------------------------------------

export interface AdmissionPolicyManifests {
  policy: Record<string, unknown>;
  binding: Record<string, unknown>;
  /** The kinds the policy lets the identity patch in every namespace, and which targets make it so. */
  warnings: string[];
}

function identityCondition({ users, groups }: { users: string[]; groups: string[] }): string {
  if (users.length + groups.length === 0)
    throw new AdmissionPolicyError('name at least one user or group: the policy applies to nobody else');
  for (const name of [...users, ...groups])
    if (name.trim() === '' || name.length > 253)
      throw new AdmissionPolicyError(`"${name}" is not a user or group name`);
  // Written so it cannot fail: an error here would make failurePolicy Fail reject everybody's requests.
  return [
    ...(users.length > 0 ? [`(has(request.userInfo.username) && request.userInfo.username in ${celList(users)})`] : []),
    ...(groups.length > 0
      ? [`(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${celList(groups)}))`]
      : []),
  ].join(' ||\n');
}

const labels = { 'app.kubernetes.io/name': 'vault-rollout' };

/** One validation per kind that some route bounds: UPDATEs of it only in the namespaces its routes target. */
function namespaceRules(kinds: readonly RestartableKind[]): Array<Record<string, string>> {
  return kinds
    .filter((k) => k.namespaces.anywhere.length === 0)
    .map(({ kind, namespaces }) => ({
      expression: `request.operation != "UPDATE" || variables.kind != ${celString(kind)} ||\n${namespaceCondition(namespaces)}`,
      messageExpression: `"vault-rollout may not patch a ${kind.replace(/^\//, '')} in " + (variables.requestNamespace == "" ? "the cluster scope" : "namespace " + variables.requestNamespace) + ": its routes target it only in " + ${celString(describeScope(namespaces))}`,
      reason: 'Forbidden',
    }));
}

/**
 * One validation per kind: an UPDATE changes only what its restart writes. Each kind's sub-maps become variables
 * (evaluated lazily, once per request, only for the kind requested), returned with the validations.
 */
function fieldProfiles(kinds: readonly RestartableKind[]): {
  profiles: Array<Record<string, string>>;
  variables: Array<{ name: string; expression: string }>;
} {
  const variables: Array<{ name: string; expression: string }> = [];
  const profiles = kinds.map(({ kind, fields }, i) => {
    const allowed = fieldPaths(fields);
    const bind = (expression: string): string => {
      const name = `k${i}_${variables.length}`;
      variables.push({ name, expression });
      return `variables.${name}`;
    };
    return {
      expression: `request.operation != "UPDATE" || variables.kind != ${celString(kind)} ||\n${sameExcept('object', 'oldObject', mergeTrees(mergeTrees(SERVER_MANAGED, SERVER_WRITTEN_ON_RESTART[kind] ?? {}), fields), bind)}`,
      message: `vault-rollout may change only ${allowed.join(', ')} of a ${kind.replace(/^\//, '')}: a restart writes nothing else`,
      reason: 'Forbidden',
    };
  });
  return { profiles, variables };
}

/** What `doctor` reads back from the policy: the kinds and their namespaces, and whom it binds. */
function policyAnnotations(
  kinds: readonly RestartableKind[],
  users: readonly string[],
  groups: readonly string[],
): Record<string, string> {
  return {
    [POLICY_ANNOTATIONS.kinds]: JSON.stringify(kinds.map((k) => k.kind)),
    [POLICY_ANNOTATIONS.namespaces]: JSON.stringify(
      Object.fromEntries(
        kinds.map((k) => [
          k.kind,
          k.namespaces.anywhere.length > 0 ? ['*'] : [...k.namespaces.names, ...k.namespaces.globs],
        ]),
      ),
    ),
    [POLICY_ANNOTATIONS.users]: JSON.stringify(users),
    [POLICY_ANNOTATIONS.groups]: JSON.stringify(groups),
  };
}

/** The first validation: CREATE only of the creatable kinds, UPDATE only of a restartable kind's main resource. */
function kindRule(restartable: readonly string[]): Record<string, string> {
  return {
    expression: `(request.operation == "CREATE" && variables.kind in ${celList(CREATABLE_KINDS)}) ||\n(request.operation == "UPDATE" && variables.subResource == "" && variables.kind in ${celList(restartable)})`,
    messageExpression: `"vault-rollout may not " + request.operation + " " + request.resource.resource + (variables.subResource == "" ? "" : "/" + variables.subResource) + ": it only patches restarts into " + ${celString(restartable.map((k) => k.replace(/^\//, '')).join(', '))} + " and creates Events"`,
    reason: 'Forbidden',
  };
}

/** The policy and its binding for a routing table and the identity vault-rollout runs as. */
export function admissionPolicy(
  table: Pick<RoutingTable, 'routes'>,
  identity: AdmissionIdentity = DEFAULT_IDENTITY,
): AdmissionPolicyManifests {
  const users = [...new Set(identity.users)].sort();
  const groups = [...new Set(identity.groups)].sort();
  const kinds = restartableKinds(table);
  const warnings = kinds
    .filter((k) => k.namespaces.anywhere.length > 0)
    .map((k) => `${k.kind} may be patched in every namespace: ${k.namespaces.anywhere.join('; ')}`);
  const { profiles, variables } = fieldProfiles(kinds);
  const policy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: POLICY_NAME, labels, annotations: policyAnnotations(kinds, users, groups) },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'], scope: '*' }],
      },
      matchConditions: [{ name: 'is-vault-rollout', expression: identityCondition({ users, groups }) }],
      variables: [
        { name: 'kind', expression: 'request.kind.group + "/" + request.kind.kind' },
        { name: 'subResource', expression: 'has(request.subResource) ? request.subResource : ""' },
        // Absent (not "") for a cluster-scoped object: an error here would deny under failurePolicy Fail. (`namespace`
        // is a reserved word in CEL: the API server refuses it as a variable name.)
        { name: 'requestNamespace', expression: 'has(request.namespace) ? request.namespace : ""' },
        ...variables,
      ],
      validations: [kindRule(kinds.map((k) => k.kind)), ...namespaceRules(kinds), ...profiles],
    },
  };
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: POLICY_NAME, labels },
    spec: { policyName: POLICY_NAME, validationActions: ['Deny'] },
  };
  return { policy, binding, warnings };
}

/** Both manifests as one YAML stream, with a header saying where it came from. */
export function admissionPolicyYaml(manifests: AdmissionPolicyManifests, source: string): string {
  const header = [
    `# Generated by \`vault-rollout admission-policy --routes ${source}\`: do not edit, regenerate.`,
    '# Bounds what the vault-rollout identity may change to what a restart writes (docs/how-to/admission-policy.md).',
    '# Requires Kubernetes >= 1.30 (admissionregistration.k8s.io/v1).',
    ...(manifests.warnings.length > 0
      ? [
          '#',
          '# WARNING: no namespace bound for these kinds (a target reaches every namespace):',
          ...manifests.warnings.map((w) => `#   ${w}`),
        ]
      : []),
  ].join('\n');
  const doc = (o: unknown) => stringify(o, { lineWidth: 0, blockQuote: 'literal' });
  return `${header}\n${doc(manifests.policy)}---\n${doc(manifests.binding)}`;
}
