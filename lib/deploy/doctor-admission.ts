/**
 * `vault-rollout doctor`'s look at the admission policy (lib/deploy/admission-policy.ts) of one cluster: read the
 * policy and its binding, then tell whether they are installed, enforced, bind this identity, and let it restart
 * every kind the routing table targets there, in every namespace it targets the kind in.
 */
import { POLICY_ANNOTATIONS, POLICY_NAME, type NamespaceScope } from './admission-policy.ts';
import type { KubeApi } from '../workloads/kube-port.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';

/** A doctor check's outcome, without the cluster and the check's name. */
export interface AdmissionCheckResult {
  ok: boolean;
  detail: string;
  fix?: string;
}

const FIX = 'vault-rollout admission-policy --routes FILE | kubectl apply --server-side -f -   (Kubernetes >= 1.30)';

const ADMISSION_PATH = '/apis/admissionregistration.k8s.io/v1';

export interface AdmissionObjects {
  /** The policy and binding as read, or why not: `not found`, `forbidden`, or another failure. */
  policy: { annotations?: Record<string, string> } | { failure: string };
  binding: { policyName?: string; validationActions?: string[] } | { failure: string };
}

/** Why the policy cannot be relied on at all: not readable, not installed, or not enforced by a Deny binding. */
function notInForce(found: AdmissionObjects): AdmissionCheckResult | undefined {
  const failure =
    'failure' in found.policy ? found.policy.failure : 'failure' in found.binding ? found.binding.failure : undefined;
  if (failure === 'forbidden') {
    return {
      ok: false,
      detail: `cannot check: may not read validatingadmissionpolicies/${POLICY_NAME}`,
      fix: `grant get on admissionregistration.k8s.io validatingadmissionpolicies and validatingadmissionpolicybindings, resourceNames [${POLICY_NAME}] (infra/rbac/clusterrole.yaml)`,
    };
  }
  if ('failure' in found.policy) {
    return {
      ok: false,
      detail:
        found.policy.failure === 'not found'
          ? 'not installed: only RBAC bounds what this identity may patch'
          : `cannot check: ${found.policy.failure}`,
      fix: FIX,
    };
  }
  if (
    'failure' in found.binding ||
    found.binding.policyName !== POLICY_NAME ||
    !(found.binding.validationActions ?? []).includes('Deny')
  ) {
    return {
      ok: false,
      detail: `the policy is installed but not enforced: no ValidatingAdmissionPolicyBinding ${POLICY_NAME} with validationActions [Deny]`,
      fix: FIX,
    };
  }
  return undefined;
}

/** A JSON list annotation of the policy; empty when absent or not a list. */
function listAnnotation(annotations: Record<string, string> | undefined, key: string): string[] {
  try {
    const parsed: unknown = JSON.parse(annotations?.[key] ?? '[]');
    return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

/** The kinds and namespaces this cluster's targets need that the policy does not allow, as `kind in a, b`. */
function namespacesOutside(
  allowedIn: Record<string, string[]> | undefined,
  needs: ReadonlyArray<{ kind: string; namespaces: NamespaceScope }>,
): string[] {
  return needs.flatMap(({ kind, namespaces }) => {
    const allowed = allowedIn === undefined ? ['*'] : (allowedIn[kind] ?? []);
    if (allowed.includes('*')) return [];
    const wantedHere =
      namespaces.anywhere.length > 0
        ? ['every namespace']
        : [...namespaces.names, ...namespaces.globs]
            .filter((n) => !allowed.includes(n))
            .map((n) => (n === '' ? '(cluster-scoped)' : n));
    return wantedHere.length > 0 ? [`${kind} in ${wantedHere.join(', ')}`] : [];
  });
}

/**
 * Whether the admission policy that bounds this identity (infra/rbac/admission-policy.yaml) is installed, enforced,
 * binds who we are, and lets us restart every kind the routing table targets here, in every namespace (name or glob)
 * it targets the kind in. Pure, for tables of cases.
 */
export function admissionPolicyCheck(
  found: AdmissionObjects,
  me: { username?: string; groups?: string[] } | undefined,
  kinds: readonly string[],
  needs: ReadonlyArray<{ kind: string; namespaces: NamespaceScope }> = [],
): AdmissionCheckResult {
  const problem = notInForce(found);
  if (problem !== undefined) return problem;
  const annotations = (found.policy as { annotations?: Record<string, string> }).annotations;
  const users = listAnnotation(annotations, POLICY_ANNOTATIONS.users);
  const groups = listAnnotation(annotations, POLICY_ANNOTATIONS.groups);
  if (
    me?.username !== undefined &&
    !users.includes(me.username) &&
    !(me.groups ?? []).some((g) => groups.includes(g))
  ) {
    return {
      ok: false,
      detail: `installed, but it binds ${[...users, ...groups.map((g) => `group ${g}`)].join(', ') || 'nobody'}, not ${me.username}`,
      fix: FIX.replace('FILE', `FILE --user ${me.username}`),
    };
  }
  const covered = new Set(listAnnotation(annotations, POLICY_ANNOTATIONS.kinds));
  const missing = kinds.filter((k) => !covered.has(k));
  if (missing.length > 0) {
    return {
      ok: false,
      detail: `installed, but it does not let this identity restart ${missing.join(', ')} (generated for another routing table)`,
      fix: FIX,
    };
  }
  // Where each kind may be patched; a policy without the annotation predates namespace bounds and allows every
  // namespace.
  const outside = namespacesOutside(namespacesAnnotation(annotations?.[POLICY_ANNOTATIONS.namespaces]), needs);
  if (outside.length > 0) {
    return {
      ok: false,
      detail: `installed, but it does not let this identity patch ${outside.join('; ')} (generated for another routing table)`,
      fix: FIX,
    };
  }
  return {
    ok: true,
    detail: `installed and enforced: this identity may change only what a restart writes (${covered.size} kinds)`,
  };
}

/** The policy's namespaces annotation, or undefined when it has none (or none that reads as a map of lists). */
function namespacesAnnotation(text: string | undefined): Record<string, string[]> | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed).map(([k, v]) => [
        k,
        Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [],
      ]),
    );
  } catch {
    return {};
  }
}

export async function readAdmissionObjects(api: KubeApi): Promise<AdmissionObjects> {
  const read = async <T>(plural: string, pick: (o: Record<string, unknown>) => T): Promise<T | { failure: string }> => {
    try {
      return pick((await api.request('GET', `${ADMISSION_PATH}/${plural}/${POLICY_NAME}`)) as Record<string, unknown>);
    } catch (e) {
      const f = classifyKubeError(e);
      return { failure: f.reason === 'forbidden' || f.reason === 'not found' ? f.reason : `${f.reason}: ${f.detail}` };
    }
  };
  const [policy, binding] = await Promise.all([
    read('validatingadmissionpolicies', (o) => ({
      annotations: (o.metadata as { annotations?: Record<string, string> } | undefined)?.annotations ?? {},
    })),
    read(
      'validatingadmissionpolicybindings',
      (o) => (o.spec ?? {}) as { policyName?: string; validationActions?: string[] },
    ),
  ]);
  return { policy, binding };
}
