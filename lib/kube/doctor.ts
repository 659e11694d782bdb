/**
 * `vault-rollout doctor`: per cluster, can we reach it, which server is it, who are we there, and may we do what
 * the routing table asks (get, list, watch and patch each targeted kind in each targeted namespace, create Events)?
 * Every problem comes with what to fix.
 */
import { isResourceTarget, type RoutingTable } from '../routing/routing-table.ts';
import type { ClusterConfig } from '../routing/schema.ts';
import { WORKLOAD_KINDS } from './workload-kinds.ts';
import type { ClusterAccess } from './cluster-access.ts';
import { kubeApiFor, type ApiKind, type KubeApi } from './kube-api.ts';
import { classifyKubeError } from './kube-errors.ts';

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

/** What the routing table asks of each cluster: (apiVersion, kind, namespace) triples. */
export function requiredAccess(table: RoutingTable): Map<string, Array<ApiKind & { namespace: string }>> {
  const byCluster = new Map<string, Map<string, ApiKind & { namespace: string }>>();
  for (const route of table.routes) {
    for (const { target, clusters } of route.targets) {
      const kind = isResourceTarget(target) ? { apiVersion: target.resource.apiVersion, kind: target.resource.kind, namespace: target.resource.namespace ?? '' } : { apiVersion: WORKLOAD_KINDS[target.kind].apiVersion, kind: target.kind, namespace: target.namespace };
      // A namespace with {captures} is known only per change: check the permission cluster-wide instead.
      const namespace = kind.namespace.includes('{') ? '' : kind.namespace;
      for (const cluster of clusters) {
        const wanted = byCluster.get(cluster) ?? new Map();
        wanted.set(`${kind.apiVersion}/${kind.kind}/${namespace}`, { ...kind, namespace });
        byCluster.set(cluster, wanted);
      }
    }
  }
  return new Map([...byCluster].map(([c, m]) => [c, [...m.values()]]));
}

const groupOf = (apiVersion: string) => (apiVersion.includes('/') ? apiVersion.split('/')[0] ?? '' : '');

export async function runDoctor(table: RoutingTable, options: DoctorOptions): Promise<DoctorCheck[]> {
  const wanted = requiredAccess(table);
  const perCluster = await Promise.all([...table.clusters].map(async ([name, config]) => doctorCluster(name, config, wanted.get(name) ?? [], options)));
  return perCluster.flat();
}

async function doctorCluster(cluster: string, config: ClusterConfig, wanted: Array<ApiKind & { namespace: string }>, options: DoctorOptions): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const add = (check: string, ok: boolean, detail: string, fix?: string) => checks.push({ cluster, check, ok, detail, ...(fix && !ok ? { fix } : {}) });
  let access: ClusterAccess;
  try {
    access = await options.access(cluster, config);
    add('credentials', true, access.insecureSkipTLSVerify ? `${access.server} (TLS NOT verified: insecureSkipTLSVerify)` : access.server);
  } catch (e) {
    add('credentials', false, e instanceof Error ? e.message : String(e), 'fix the cluster entry of the routing table (kubeconfig source, context, or eks name/region/roleArn)');
    return checks;
  }
  const api = (options.apiFor ?? kubeApiFor)(access);
  try {
    const version = (await api.request('GET', '/version')) as { gitVersion?: string };
    add('reachable', true, `Kubernetes ${version.gitVersion ?? 'unknown version'}`);
  } catch (e) {
    const f = classifyKubeError(e);
    const fix = f.reason === 'tls' ? 'the API server certificate does not verify against the CA of the kubeconfig: use the cluster CA' : f.reason === 'unauthorized' ? 'the credentials are not accepted: renew the token or certificate' : 'check the server address and that the API server is up and reachable from here';
    add('reachable', false, `${f.reason}: ${f.detail}`, fix);
    return checks;
  }
  try {
    const review = (await api.request('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' })) as { status?: { userInfo?: { username?: string; groups?: string[] } } };
    const user = review.status?.userInfo;
    add('identity', true, `${user?.username ?? '?'} (groups: ${(user?.groups ?? []).join(', ') || 'none'})`);
  } catch (e) {
    add('identity', false, classifyKubeError(e).detail, 'SelfSubjectReview needs Kubernetes >= 1.28; the other checks still apply');
  }
  const namespaces = new Set<string>();
  for (const w of wanted) {
    namespaces.add(w.namespace);
    let plural: string;
    try {
      plural = (await api.resource(w)).plural;
    } catch (e) {
      add(`${w.kind} (${w.apiVersion})`, false, classifyKubeError(e).detail, w.kind === 'Rollout' ? 'install Argo Rollouts (its CRD) in this cluster, or drop the Rollout targets' : 'install the CRD of this kind, or fix apiVersion/kind in the route');
      continue;
    }
    for (const verb of ['get', 'list', 'watch', 'patch']) {
      const allowed = await canI(api, { group: groupOf(w.apiVersion), resource: plural, verb, namespace: w.namespace });
      const where = w.namespace === '' ? 'all namespaces' : `namespace ${w.namespace}`;
      // Without watch, restarts still work and rollouts are followed by a LIST every few seconds instead.
      const denied = verb === 'watch' ? 'denied (rollouts are followed by polling LIST instead of a watch)' : 'denied';
      add(`${verb} ${plural} in ${where}`, allowed, allowed ? 'allowed' : denied, `grant ${verb} on ${groupOf(w.apiVersion) || 'core'}/${plural} (infra/rbac/clusterrole.yaml, or role-namespaced.yaml in ${where})`);
    }
  }
  for (const namespace of namespaces) {
    const allowed = await canI(api, { group: '', resource: 'events', verb: 'create', namespace });
    add(`create events in ${namespace === '' ? 'all namespaces' : `namespace ${namespace}`}`, allowed, allowed ? 'allowed' : 'denied (restarts still work, without SecretRotated events)', 'grant create on core/events');
  }
  return checks;
}

async function canI(api: KubeApi, attributes: { group: string; resource: string; verb: string; namespace: string }): Promise<boolean> {
  try {
    const review = (await api.request('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: attributes } })) as { status?: { allowed?: boolean } };
    return review.status?.allowed === true;
  } catch {
    return false;
  }
}
