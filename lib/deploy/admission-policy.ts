/**
 * A ValidatingAdmissionPolicy that bounds what the vault-rollout identity may change, on the API server itself,
 * derived from a stage's routing table (like the IAM in iam-from-routes.ts). RBAC `patch` on a workload allows any
 * change to it; this policy allows the identity exactly what a restart writes and denies everything else it tries:
 *
 * - UPDATE (a patch, or a server-side apply) of a kind it restarts, on the main resource only, where the new object
 *   equals the stored one except at the fields the kind's restart patch writes. Those fields come from the
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
 * Everybody else is unaffected: the policy's matchConditions select the identity's requests by user name or group.
 * It matches every resource and operation, and lets the identity's requests through only when a rule allows them.
 *
 * Pure: the routing table and the identity come in, the two manifests go out.
 */
import { stringify } from 'yaml';
import type { RoutingTable } from '../routing/routing-table.ts';
import { isResourceTarget } from '../routing/routing-table.ts';
import { SyncKinds, WorkloadKinds } from '../routing/schema.ts';
import { ANNOTATIONS, recordOnlyPatch } from '../plan/restart-record.ts';
import { SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { resourceDescriptor, WORKLOAD_KINDS, type WorkloadDescriptor } from '../workloads/workload-kinds.ts';

export const POLICY_NAME = 'vault-rollout';

/** Annotations on the policy, for `doctor` (JSON lists): the kinds it lets the identity restart (`group/Kind`), and whom it binds. */
export const POLICY_ANNOTATIONS = {
  kinds: 'vault-rollout.io/restartable-kinds',
  users: 'vault-rollout.io/users',
  groups: 'vault-rollout.io/groups',
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

/** Where a restart may write: a key maps to `true` (anything at or under it) or to the keys below it that may change. */
export interface FieldTree {
  [key: string]: FieldTree | true;
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
const CREATABLE_KINDS = ['/Event', 'authentication.k8s.io/SelfSubjectReview', 'authorization.k8s.io/SelfSubjectAccessReview', 'authorization.k8s.io/SelfSubjectRulesReview'];

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
    const isObject = typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length > 0;
    tree[key] = isObject ? treeOf(value as Record<string, unknown>) : true;
  }
  return tree;
}

export function mergeTrees(a: FieldTree, b: FieldTree): FieldTree {
  const merged: FieldTree = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const existing = merged[key];
    merged[key] = existing === undefined ? value : existing === true || value === true ? true : mergeTrees(existing, value);
  }
  return merged;
}

/** One kind the identity may restart, and where. `kind` is `group/Kind` (core: `/Kind`). */
export interface RestartableKind {
  kind: string;
  fields: FieldTree;
}

/** Every kind the routing table restarts, with the union of what its restart patches write. */
export function restartableKinds(table: Pick<RoutingTable, 'routes'>): RestartableKind[] {
  const byKind = new Map<string, FieldTree>();
  const add = (descriptor: WorkloadDescriptor) => {
    const kind = `${groupOf(descriptor.apiVersion)}/${descriptor.kind}`;
    // Besides the restart: reconcile records versions a workload already runs on its metadata (recordOnlyPatch).
    byKind.set(kind, mergeTrees(byKind.get(kind) ?? {}, mergeTrees(restartFields(descriptor), treeOf(recordOnlyPatch({})))));
  };
  // The built-in kinds always: a route added later must not need a new policy to restart a Deployment. The same for
  // the operators' resources a sync target nudges, where only the nudge's annotations may change (RBAC decides
  // whether the identity may patch them at all: infra/rbac/sync-operators.yaml, only where routes sync).
  for (const kind of WorkloadKinds) add(WORKLOAD_KINDS[kind]);
  for (const kind of SyncKinds) add(SYNC_KINDS[kind]);
  for (const route of table.routes) {
    for (const { target } of route.targets) {
      if (isResourceTarget(target)) add(resourceDescriptor(target.resource.apiVersion, target.resource.kind, target.patch));
    }
  }
  return [...byKind].sort(([a], [b]) => a.localeCompare(b)).map(([kind, fields]) => ({ kind, fields }));
}

// ---------------------------------------------------------------------------------------------------------------
// CEL
// ---------------------------------------------------------------------------------------------------------------

/** A CEL string literal (CEL's escapes are a superset of JSON's). */
export const celString = (s: string): string => JSON.stringify(s);
const celList = (items: readonly string[]): string => `[${items.map(celString).join(', ')}]`;

const PLACEHOLDER = /\{[A-Za-z_][A-Za-z0-9_]*\}/;
const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A patch-template key with `{captures}` is a pattern: its rendered value may be any text. */
const keyPattern = (key: string): string => `^${key.split(new RegExp(PLACEHOLDER.source, 'g')).map(escapeRegex).join('.*')}$`;

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** CEL for the map under `key` of map `m`, or an empty map when there is none (optional field selection). */
const below = (m: string, key: string): string => {
  const base = m.endsWith('.orValue({})') ? m.slice(0, -'.orValue({})'.length) : m;
  return `${base}${IDENTIFIER.test(key) ? `.?${key}` : `[?${celString(key)}]`}.orValue({})`;
};

/**
 * CEL that holds when maps `a` and `b` are equal except at the keys of `tree` (recursively). `bind` may turn the
 * map below a key into a policy variable, so that it is computed once instead of once per key compared. Keys that are absent
 * on one side compare as absent; a missing map below a tree key compares as an empty map.
 */
export function sameExcept(a: string, b: string, tree: FieldTree, bind: (expression: string) => string = (e) => e): string {
  const literal = Object.keys(tree).filter((k) => !PLACEHOLDER.test(k)).sort();
  const patterns = Object.keys(tree).filter((k) => PLACEHOLDER.test(k)).sort();
  const exempt = [...(literal.length > 0 ? [`k in ${celList(literal)}`] : []), ...patterns.map((p) => `k.matches(${celString(keyPattern(p))})`)];
  const skip = exempt.length > 0 ? `${exempt.join(' || ')} || ` : '';
  const clauses = [`${a}.all(k, ${skip}(k in ${b} && ${a}[k] == ${b}[k]))`, `${b}.all(k, ${skip}k in ${a})`];
  for (const key of literal) {
    const sub = tree[key];
    if (sub === true || sub === undefined) continue;
    clauses.push(sameExcept(bind(below(a, key)), bind(below(b, key)), sub, bind));
  }
  return clauses.join(' &&\n');
}

/** Human-readable paths of a tree's leaves, e.g. `spec.template.metadata.annotations["vault-rollout.io/versions"]`. */
export function fieldPaths(tree: FieldTree, prefix = ''): string[] {
  return Object.entries(tree)
    .sort(([x], [y]) => x.localeCompare(y))
    .flatMap(([key, sub]) => {
      const path = IDENTIFIER.test(key) ? `${prefix}${prefix ? '.' : ''}${key}` : `${prefix}[${celString(key)}]`;
      return sub === true ? [path] : fieldPaths(sub, path);
    });
}

// ---------------------------------------------------------------------------------------------------------------
// The manifests
// ---------------------------------------------------------------------------------------------------------------

export interface AdmissionPolicyManifests {
  policy: Record<string, unknown>;
  binding: Record<string, unknown>;
}

function identityCondition({ users, groups }: { users: string[]; groups: string[] }): string {
  if (users.length + groups.length === 0) throw new AdmissionPolicyError('name at least one user or group: the policy applies to nobody else');
  for (const name of [...users, ...groups]) if (name.trim() === '' || name.length > 253) throw new AdmissionPolicyError(`"${name}" is not a user or group name`);
  // Written so it cannot fail: an error here would make failurePolicy Fail reject everybody's requests.
  return [
    ...(users.length > 0 ? [`(has(request.userInfo.username) && request.userInfo.username in ${celList(users)})`] : []),
    ...(groups.length > 0 ? [`(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${celList(groups)}))`] : []),
  ].join(' ||\n');
}

const labels = { 'app.kubernetes.io/name': 'vault-rollout' };

/** The policy and its binding for a routing table and the identity vault-rollout runs as. */
export function admissionPolicy(table: Pick<RoutingTable, 'routes'>, identity: AdmissionIdentity = DEFAULT_IDENTITY): AdmissionPolicyManifests {
  const users = [...new Set(identity.users)].sort();
  const groups = [...new Set(identity.groups)].sort();
  const kinds = restartableKinds(table);
  const restartable = kinds.map((k) => k.kind);
  // Each kind's sub-maps become variables (evaluated lazily, once per request, only for the kind requested).
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
  const policy = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: POLICY_NAME, labels, annotations: { [POLICY_ANNOTATIONS.kinds]: JSON.stringify(restartable), [POLICY_ANNOTATIONS.users]: JSON.stringify(users), [POLICY_ANNOTATIONS.groups]: JSON.stringify(groups) } },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [{ apiGroups: ['*'], apiVersions: ['*'], resources: ['*/*'], operations: ['*'], scope: '*' }],
      },
      matchConditions: [{ name: 'is-vault-rollout', expression: identityCondition({ users, groups }) }],
      variables: [
        { name: 'kind', expression: 'request.kind.group + "/" + request.kind.kind' },
        { name: 'subResource', expression: 'has(request.subResource) ? request.subResource : ""' },
        ...variables,
      ],
      validations: [
        {
          expression: `(request.operation == "CREATE" && variables.kind in ${celList(CREATABLE_KINDS)}) ||\n(request.operation == "UPDATE" && variables.subResource == "" && variables.kind in ${celList(restartable)})`,
          messageExpression: `"vault-rollout may not " + request.operation + " " + request.resource.resource + (variables.subResource == "" ? "" : "/" + variables.subResource) + ": it only patches restarts into " + ${celString(restartable.map((k) => k.replace(/^\//, '')).join(', '))} + " and creates Events"`,
          reason: 'Forbidden',
        },
        ...profiles,
      ],
    },
  };
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: POLICY_NAME, labels },
    spec: { policyName: POLICY_NAME, validationActions: ['Deny'] },
  };
  return { policy, binding };
}

/** Both manifests as one YAML stream, with a header saying where it came from. */
export function admissionPolicyYaml(manifests: AdmissionPolicyManifests, source: string): string {
  const header = [
    `# Generated by \`vault-rollout admission-policy --routes ${source}\`: do not edit, regenerate.`,
    '# Bounds what the vault-rollout identity may change to what a restart writes (README: "Admission policy").',
    '# Requires Kubernetes >= 1.30 (admissionregistration.k8s.io/v1).',
  ].join('\n');
  const doc = (o: unknown) => stringify(o, { lineWidth: 0, blockQuote: 'literal' });
  return `${header}\n${doc(manifests.policy)}---\n${doc(manifests.binding)}`;
}
