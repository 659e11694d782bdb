/**
 * `vault-rollout doctor`: per cluster, can we reach it, which server is it, who are we there, and may we do what
 * the routing table asks (get, list, watch and patch each targeted kind in each targeted namespace, create Events)?
 * And is the admission policy that bounds what we may change installed, enforced, and current for this routing table?
 * Every problem comes with what to fix.
 */
import { restartableKinds, type NamespaceScope } from './admission-policy.ts';
import { admissionPolicyCheck, readAdmissionObjects } from './doctor-admission.ts';
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

/**
 * One kind the routing table needs in a namespace ('' = cluster-wide). `consumer`: listed to find consumers, so a
 * cluster that does not serve it (no Argo Rollouts) is fine.
 */
export type RequiredKind = ApiKind & { namespace: string; consumer?: true };

/**
 * The kinds a target reads and patches: its own, or for sync and consumers targets the operator's kind and every
 * workload kind (consumer discovery).
 */
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

/** Adds one check's outcome; the fix only when it failed. */
type AddCheck = (check: string, ok: boolean, detail: string, fix?: string) => void;

/** Credentials for the cluster, or undefined when its entry gives none (reported). */
async function checkCredentials(
  cluster: string,
  config: ClusterConfig,
  options: DoctorOptions,
  add: AddCheck,
): Promise<ClusterAccess | undefined> {
  try {
    const access = await options.access(cluster, config);
    add(
      'credentials',
      true,
      access.insecureSkipTLSVerify ? `${access.server} (TLS NOT verified: insecureSkipTLSVerify)` : access.server,
    );
    return access;
  } catch (e) {
    add(
      'credentials',
      false,
      e instanceof Error ? e.message : String(e),
      'fix the cluster entry of the routing table (kubeconfig source, context, or eks name/region/roleArn)',
    );
    return undefined;
  }
}

/** Whether the API server answers with these credentials, and which Kubernetes it is. */
async function checkReachable(api: KubeApi, add: AddCheck): Promise<boolean> {
  try {
    const version = (await api.request('GET', '/version')) as { gitVersion?: string };
    add('reachable', true, `Kubernetes ${version.gitVersion ?? 'unknown version'}`);
    return true;
  } catch (e) {
    const f = classifyKubeError(e);
    const fix =
      f.reason === 'tls'
        ? 'the API server certificate does not verify against the CA of the kubeconfig: use the cluster CA'
        : f.reason === 'unauthorized'
          ? 'the credentials are not accepted: renew the token or certificate'
          : 'check the server address and that the API server is up and reachable from here';
    add('reachable', false, `${f.reason}: ${f.detail}`, fix);
    return false;
  }
}

/** Who we are in the cluster (SelfSubjectReview), when it says. */
async function checkIdentity(
  api: KubeApi,
  add: AddCheck,
): Promise<{ username?: string; groups?: string[] } | undefined> {
  try {
    const review = (await api.request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    })) as { status?: { userInfo?: { username?: string; groups?: string[] } } };
    const user = review.status?.userInfo;
    add('identity', true, `${user?.username ?? '?'} (groups: ${(user?.groups ?? []).join(', ') || 'none'})`);
    return user;
  } catch (e) {
    add(
      'identity',
      false,
      classifyKubeError(e).detail,
      'SelfSubjectReview needs Kubernetes >= 1.28; the other checks still apply',
    );
    return undefined;
  }
}

/** Whether the cluster serves a kind the table needs, and whether we may get, list, watch and patch it there. */
async function checkKindAccess(api: KubeApi, w: RequiredKind, add: AddCheck): Promise<void> {
  let plural: string;
  try {
    plural = (await api.resource(w)).plural;
  } catch (e) {
    // Consumer discovery lists every workload kind; a cluster without Argo Rollouts simply has no Rollout consumers.
    if (w.consumer) add(`${w.kind} (${w.apiVersion})`, true, 'not served here: no consumers of this kind to find');
    else add(`${w.kind} (${w.apiVersion})`, false, classifyKubeError(e).detail, missingKindFix(w.kind));
    return;
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

async function doctorCluster(
  cluster: string,
  config: ClusterConfig,
  wanted: RequiredKind[],
  needs: Array<{ kind: string; namespaces: NamespaceScope }>,
  options: DoctorOptions,
): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const add: AddCheck = (check, ok, detail, fix) =>
    checks.push({ cluster, check, ok, detail, ...(fix && !ok ? { fix } : {}) });
  const access = await checkCredentials(cluster, config, options, add);
  if (access === undefined) return checks;
  const api = (options.apiFor ?? kubeApiFor)(access);
  if (!(await checkReachable(api, add))) return checks;
  const user = await checkIdentity(api, add);
  const namespaces = new Set<string>();
  for (const w of wanted) {
    namespaces.add(w.namespace);
    await checkKindAccess(api, w, add);
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
  await checkPodCounting(api, wanted, add);
  const kinds = [...new Set(wanted.map((w) => `${groupOf(w.apiVersion)}/${w.kind}`))].sort();
  const policy = admissionPolicyCheck(await readAdmissionObjects(api), user, kinds, needs);
  add('admission policy', policy.ok, policy.detail, policy.fix);
  return checks;
}

/**
 * `status` counts the pods still running an older revision (lib/status/running-pods.ts): it lists pods, ReplicaSets
 * and ControllerRevisions where workloads with pods of their own are targeted. Without them it never says safe.
 */
async function checkPodCounting(api: KubeApi, wanted: readonly RequiredKind[], add: AddCheck): Promise<void> {
  const withPods = ['Deployment', 'StatefulSet', 'DaemonSet', 'Rollout'];
  const namespaces = new Set(wanted.filter((w) => withPods.includes(w.kind)).map((w) => w.namespace));
  for (const namespace of namespaces) {
    const denied: string[] = [];
    for (const [group, resource] of [
      ['', 'pods'],
      ['apps', 'replicasets'],
      ['apps', 'controllerrevisions'],
    ] as const)
      if (!(await canI(api, { group, resource, verb: 'list', namespace }))) denied.push(resource);
    add(
      `list pods, replicasets, controllerrevisions in ${namespace === '' ? 'all namespaces' : `namespace ${namespace}`}`,
      denied.length === 0,
      denied.length === 0
        ? 'allowed'
        : `denied: ${denied.join(', ')} (restarts still work; status cannot count pods, so never says safe to revoke)`,
      'grant list on core/pods, apps/replicasets and apps/controllerrevisions (infra/rbac/clusterrole.yaml)',
    );
  }
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
