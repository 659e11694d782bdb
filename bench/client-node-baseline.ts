/**
 * The same PATCHes as the raw baseline, sent through @kubernetes/client-node's generated AppsV1Api instead: with its
 * default transport, which builds a new connection pool (so a TLS handshake) for every request, and with one pool
 * shared by every request of the cluster. vault-rollout talks to the API servers with its own keep-alive HTTPS
 * client (lib/kube/kube-api.ts) rather than client-node's generated clients; these arms make that choice a figure.
 */
import {
  AppsV1Api,
  createConfiguration,
  KubeConfig,
  PatchStrategy,
  ServerConfiguration,
  setHeaderOptions,
  type RequestContext,
  type SecurityAuthentication,
} from '@kubernetes/client-node';
import type { ClusterInfo } from '../test/clusters/kube-http.ts';

export type ClientNodePool = 'default' | 'shared';

export interface ClientNodePatcher {
  /** A strategic-merge patch of one Deployment; resolves when the API server accepted it. */
  patch(name: string, body: object): Promise<void>;
}

export function clientNodePatcher(c: ClusterInfo, namespace: string, pool: ClientNodePool): ClientNodePatcher {
  const kc = new KubeConfig();
  kc.loadFromFile(c.vaultRolloutKubeconfig);
  const api = pool === 'default' ? kc.makeApiClient(AppsV1Api) : sharedPoolApi(kc);
  const options = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  return {
    patch: async (name, body) => {
      await api.patchNamespacedDeployment({ name, namespace, body, fieldManager: 'client-node-baseline' }, options);
    },
  };
}

/**
 * client-node with one pool: its kubeconfig authentication sets the credentials and a fresh dispatcher on each
 * request, and this keeps the first request's dispatcher for all of them, so connections are kept alive and reused.
 */
function sharedPoolApi(kc: KubeConfig): AppsV1Api {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('client-node baseline: the kubeconfig has no current cluster');
  let shared: ReturnType<RequestContext['getDispatcher']>;
  const auth: SecurityAuthentication = {
    getName: () => 'kubeconfig authentication, one shared pool',
    applySecurityAuthentication: async (context: RequestContext) => {
      await kc.applySecurityAuthentication(context);
      shared ??= context.getDispatcher();
      if (shared !== undefined) context.setDispatcher(shared);
    },
  };
  return new AppsV1Api(
    createConfiguration({ baseServer: new ServerConfiguration(cluster.server, {}), authMethods: { default: auth } }),
  );
}
