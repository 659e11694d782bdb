/**
 * `vault-rollout doctor`: per cluster, can we reach it, which server is it, who are we there, and may we do what
 * the routing table asks (get, list, watch and patch each targeted kind in each targeted namespace, create Events)?
 * And is the admission policy that bounds what we may change installed, enforced, and current for this routing table?
 * Every problem comes with what to fix.
 */
import { POLICY_ANNOTATIONS, POLICY_NAME, restartableKinds, type NamespaceScope } from './admission-policy.ts';
import { isConsumersTarget, isResourceTarget, isSyncTarget, type RoutingTable } from '../routing/routing-table.ts';
import { WorkloadKinds, type Target } from '../routing/target-schema.ts';
import { type ClusterConfig } from '../routing/schema.ts';
import { isSyncKind, SYNC_KINDS } from '../workloads/sync-kinds.ts';
import { WORKLOAD_KINDS } from '../workloads/workload-kinds.ts';
import type { ClusterAccess } from '../kube/cluster-access.ts';
import { kubeApiFor } from '../kube/kube-api.ts';
import type { ApiKind, KubeApi } from '../workloads/kube-port.ts';
import { classifyKubeError } from '../workloads/kube-errors.ts';

export interface DoctorCheck {
  cluster: string;
  check: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

export interface DoctorOptions {
  access(name: string, config: ClusterConfig): Promise<ClusterAccess>;
  apiFor?: (access: ClusterAccess) => KubeApi;
}

/** One kind the routing table needs in a namespace ('' = cluster-wide). `consumer`: listed to find consumers, so a cluster that does not serve it (no Argo Rollouts) is fine. */
export type RequiredKind = ApiKind & { namespace: string; consumer?: true };

/** The kinds a target reads and patches: its own, or for sync and consumers targets the operator's kind and every workload kind (consumer discovery). */
function kindsOf(target: Target): RequiredKind[] {
  if (isResourceTarget(target))
    return [
      {
        apiVersion: target.resource.apiVersion,
        kind: target.resource.kind,
        namespace: target.resource.namespace ?? '',
      },
    ];
  if (isSyncTarget(target) || isConsumersTarget(target)) {
    const consumers = WorkloadKinds.map((k): RequiredKind => ({
      apiVersion: WORKLOAD_KINDS[k].apiVersion,
      kind: k,
      namespace: target.namespace,
      consumer: true,
    }));
    if (isSyncTarget(target) && target.restart === 'none')
      return [
        { apiVersion: SYNC_KINDS[target.sync.kind].apiVersion, kind: target.sync.kind, namespace: target.namespace },
      ];
    return isSyncTarget(target)
      ? [
          { apiVersion: SYNC_KINDS[target.sync.kind].apiVersion, kind: target.sync.kind, namespace: target.namespace },
          ...consumers,
        ]
      : consumers;
  }
  return [{ apiVersion: WORKLOAD_KINDS[target.kind].apiVersion, kind: target.kind, namespace: target.namespace }];
}

/** What the routing table asks of each cluster: (apiVersion, kind, namespace) triples. */
export function requiredAccess(table: RoutingTable): Map<string, RequiredKind[]> {
  const byCluster = new Map<string, Map<string, RequiredKind>>();
  for (const route of table.routes) {
    for (const { target, clusters } of route.targets) {
      for (const kind of kindsOf(target)) {
        // A namespace with {captures} is known only per change: check the permission cluster-wide instead.
        const namespace = kind.namespace.includes('{') ? '' : kind.namespace;
        for (const cluster of clusters) {
          const wanted = byCluster.get(cluster) ?? new Map<string, RequiredKind>();
          const key = `${kind.apiVersion}/${kind.kind}/${namespace}`;
          const known = wanted.get(key);
          // Named by a target is stronger than listed for discovery: its absence is then a problem.
          const { consumer: _consumer, ...named } = kind;
          wanted.set(
            key,
            known && (!known.consumer || kind.consumer)
              ? known
              : kind.consumer
                ? { ...kind, namespace }
                : { ...named, namespace },
          );
          byCluster.set(cluster, wanted);
        }
      }
    }
  }
  return new Map([...byCluster].map(([c, m]) => [c, [...m.values()]]));
}

/** What to do when the cluster does not serve a kind. */
function missingKindFix(kind: string): string {
  if (kind === 'Rollout') return 'install Argo Rollouts (its CRD) in this cluster, or drop the Rollout targets';
  if (isSyncKind(kind))
    return `install the ${SYNC_KINDS[kind].operator} (CRD ${SYNC_KINDS[kind].apiVersion} ${kind}) in this cluster, or drop the sync targets of this kind`;
  return 'install the CRD of this kind, or fix apiVersion/kind in the route';
}

const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '');

export async function runDoctor(table: RoutingTable, options: DoctorOptions): Promise<DoctorCheck[]> {
  const wanted = requiredAccess(table);
  const perCluster = await Promise.all(
    [...table.clusters].map(async ([name, config]) =>
      doctorCluster(name, config, wanted.get(name) ?? [], policyNeeds(table, name), options),
    ),
  );
  return perCluster.flat();
}

/** Where the admission policy must let the identity patch each kind for this cluster's targets. */
function policyNeeds(table: RoutingTable, cluster: string): Array<{ kind: string; namespaces: NamespaceScope }> {
  return restartableKinds({
    routes: table.routes.map((route) => ({
      ...route,
      targets: route.targets.filter((t) => t.clusters.includes(cluster)),
    })),
  });
}

async function doctorCluster(
  cluster: string,
  config: ClusterConfig,
  wanted: RequiredKind[],
  needs: Array<{ kind: string; namespaces: NamespaceScope }>,
  options: DoctorOptions,
): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const add = (check: string, ok: boolean, detail: string, fix?: string) =>
    checks.push({ cluster, check, ok, detail, ...(fix && !ok ? { fix } : {}) });
  let access: ClusterAccess;
  try {
    access = await options.access(cluster, config);
    add(
      'credentials',
      true,
      access.insecureSkipTLSVerify ? `${access.server} (TLS NOT verified: insecureSkipTLSVerify)` : access.server,
    );
  } catch (e) {
    add(
      'credentials',
      false,
      e instanceof Error ? e.message : String(e),
      'fix the cluster entry of the routing table (kubeconfig source, context, or eks name/region/roleArn)',
    );
    return checks;
  }
  const api = (options.apiFor ?? kubeApiFor)(access);
  try {
    const version = (await api.request('GET', '/version')) as { gitVersion?: string };
    add('reachable', true, `Kubernetes ${version.gitVersion ?? 'unknown version'}`);
  } catch (e) {
    const f = classifyKubeError(e);
    const fix =
      f.reason === 'tls'
        ? 'the API server certificate does not verify against the CA of the kubeconfig: use the cluster CA'
        : f.reason === 'unauthorized'
          ? 'the credentials are not accepted: renew the token or certificate'
          : 'check the server address and that the API server is up and reachable from here';
    add('reachable', false, `${f.reason}: ${f.detail}`, fix);
    return checks;
  }
  let user: { username?: string; groups?: string[] } | undefined;
  try {
    const review = (await api.request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    })) as { status?: { userInfo?: { username?: string; groups?: string[] } } };
    user = review.status?.userInfo;
    add('identity', true, `${user?.username ?? '?'} (groups: ${(user?.groups ?? []).join(', ') || 'none'})`);
  } catch (e) {
    add(
      'identity',
      false,
      classifyKubeError(e).detail,
      'SelfSubjectReview needs Kubernetes >= 1.28; the other checks still apply',
    );
  }
  const namespaces = new Set<string>();
  for (const w of wanted) {
    namespaces.add(w.namespace);
    let plural: string;
    try {
      plural = (await api.resource(w)).plural;
    } catch (e) {
      // Consumer discovery lists every workload kind; a cluster without Argo Rollouts simply has no Rollout consumers.
      if (w.consumer) add(`${w.kind} (${w.apiVersion})`, true, 'not served here: no consumers of this kind to find');
      else add(`${w.kind} (${w.apiVersion})`, false, classifyKubeError(e).detail, missingKindFix(w.kind));
      continue;
    }
    if (isSyncKind(w.kind))
      add(
        `${w.kind} CRD`,
        true,
        `installed (${w.apiVersion} ${plural}): the ${SYNC_KINDS[w.kind].operator} can be nudged`,
      );
    for (const verb of ['get', 'list', 'watch', 'patch']) {
      const allowed = await canI(api, { group: groupOf(w.apiVersion), resource: plural, verb, namespace: w.namespace });
      const where = w.namespace === '' ? 'all namespaces' : `namespace ${w.namespace}`;
      // Without watch, restarts still work and rollouts are followed by a LIST every few seconds instead.
      const denied = verb === 'watch' ? 'denied (rollouts are followed by polling LIST instead of a watch)' : 'denied';
      add(
        `${verb} ${plural} in ${where}`,
        allowed,
        allowed ? 'allowed' : denied,
        `grant ${verb} on ${groupOf(w.apiVersion) || 'core'}/${plural} (infra/rbac/clusterrole.yaml, or role-namespaced.yaml in ${where})`,
      );
    }
  }
  for (const namespace of namespaces) {
    const allowed = await canI(api, { group: '', resource: 'events', verb: 'create', namespace });
    add(
      `create events in ${namespace === '' ? 'all namespaces' : `namespace ${namespace}`}`,
      allowed,
      allowed ? 'allowed' : 'denied (restarts still work, without SecretRotated events)',
      'grant create on core/events',
    );
  }
  const kinds = [...new Set(wanted.map((w) => `${groupOf(w.apiVersion)}/${w.kind}`))].sort();
  const policy = admissionPolicyCheck(await readAdmissionObjects(api), user, kinds, needs);
  add('admission policy', policy.ok, policy.detail, policy.fix);
  return checks;
}

async function canI(
  api: KubeApi,
  attributes: { group: string; resource: string; verb: string; namespace: string },
): Promise<boolean> {
  try {
    const review = (await api.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: attributes },
    })) as { status?: { allowed?: boolean } };
    return review.status?.allowed === true;
  } catch {
    return false;
  }
}

const ADMISSION_PATH = '/apis/admissionregistration.k8s.io/v1';

export interface AdmissionObjects {
  /** The policy and binding as read, or why not: `not found`, `forbidden`, or another failure. */
  policy: { annotations?: Record<string, string> } | { failure: string };
  binding: { policyName?: string; validationActions?: string[] } | { failure: string };
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
): Omit<DoctorCheck, 'cluster' | 'check'> {
  const fix = 'vault-rollout admission-policy --routes FILE | kubectl apply --server-side -f -   (Kubernetes >= 1.30)';
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
      fix,
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
      fix,
    };
  }
  const list = (key: string): string[] => {
    try {
      const parsed: unknown = JSON.parse(
        (found.policy as { annotations?: Record<string, string> }).annotations?.[key] ?? '[]',
      );
      return Array.isArray(parsed) ? parsed.filter((x): x is string => typeof x === 'string') : [];
    } catch {
      return [];
    }
  };
  const users = list(POLICY_ANNOTATIONS.users);
  const groups = list(POLICY_ANNOTATIONS.groups);
  if (
    me?.username !== undefined &&
    !users.includes(me.username) &&
    !(me.groups ?? []).some((g) => groups.includes(g))
  ) {
    return {
      ok: false,
      detail: `installed, but it binds ${[...users, ...groups.map((g) => `group ${g}`)].join(', ') || 'nobody'}, not ${me.username}`,
      fix: fix.replace('FILE', `FILE --user ${me.username}`),
    };
  }
  const covered = new Set(list(POLICY_ANNOTATIONS.kinds));
  const missing = kinds.filter((k) => !covered.has(k));
  if (missing.length > 0) {
    return {
      ok: false,
      detail: `installed, but it does not let this identity restart ${missing.join(', ')} (generated for another routing table)`,
      fix,
    };
  }
  // Where each kind may be patched; a policy without the annotation predates namespace bounds and allows every namespace.
  const allowedIn = namespacesAnnotation(
    (found.policy as { annotations?: Record<string, string> }).annotations?.[POLICY_ANNOTATIONS.namespaces],
  );
  const outside = needs.flatMap(({ kind, namespaces }) => {
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
  if (outside.length > 0) {
    return {
      ok: false,
      detail: `installed, but it does not let this identity patch ${outside.join('; ')} (generated for another routing table)`,
      fix,
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

async function readAdmissionObjects(api: KubeApi): Promise<AdmissionObjects> {
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
