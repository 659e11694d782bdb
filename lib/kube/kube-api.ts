/**
 * The few API calls a rollout needs, over @kubernetes/client-node's generic object API: read, list, patch with
 * an explicit patch Content-Type and field manager, and create an Event. Every request carries a timeout.
 */
import { createConfiguration, KubernetesObjectApi, ServerConfiguration, type PatchStrategy, type RequestContext, type ResponseContext } from '@kubernetes/client-node';
import type { ClusterAccess } from './cluster-access.ts';
import type { KubeObject } from './workload-kinds.ts';

export const FIELD_MANAGER = 'vault-rollout';

export interface ApiKind {
  apiVersion: string;
  kind: string;
}

export interface KubeApi {
  read(kind: ApiKind, namespace: string, name: string): Promise<KubeObject>;
  list(kind: ApiKind, namespace: string, labelSelector?: string): Promise<KubeObject[]>;
  patch(kind: ApiKind, namespace: string, name: string, body: Record<string, unknown>, strategy: PatchStrategy, dryRun: boolean): Promise<KubeObject>;
  create(body: KubeObject & Record<string, unknown>): Promise<KubeObject>;
}

/** A client-node Configuration whose every request times out after `timeoutMs`. */
function configurationFor(access: ClusterAccess, timeoutMs: number) {
  return createConfiguration({
    baseServer: new ServerConfiguration(access.server, {}),
    authMethods: { default: access.kubeConfig },
    promiseMiddleware: [
      {
        pre: async (context: RequestContext) => {
          context.setSignal(AbortSignal.timeout(timeoutMs));
          return context;
        },
        post: async (response: ResponseContext) => response,
      },
    ],
  });
}

const apis = new WeakMap<ClusterAccess, KubeApi>();

/** One API object per access, so discovery results and connections are reused across invocations. */
export function kubeApiFor(access: ClusterAccess, timeoutMs = 10_000): KubeApi {
  let api = apis.get(access);
  if (!api) apis.set(access, (api = createKubeApi(new KubernetesObjectApi(configurationFor(access, timeoutMs)))));
  return api;
}

function createKubeApi(objects: KubernetesObjectApi): KubeApi {
  return {
    read: (kind, namespace, name) => objects.read({ apiVersion: kind.apiVersion, kind: kind.kind, metadata: { name, namespace } }) as Promise<KubeObject>,
    list: async (kind, namespace, labelSelector) => {
      const items: KubeObject[] = [];
      let continueToken: string | undefined;
      do {
        const page = await objects.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, labelSelector, 500, continueToken);
        for (const item of page.items) items.push({ ...(item as KubeObject), apiVersion: kind.apiVersion, kind: kind.kind });
        continueToken = page.metadata?._continue;
      } while (continueToken);
      return items;
    },
    patch: (kind, namespace, name, body, strategy, dryRun) =>
      objects.patch({ ...body, apiVersion: kind.apiVersion, kind: kind.kind, metadata: { ...((body.metadata as object) ?? {}), name, namespace } }, undefined, dryRun ? 'All' : undefined, FIELD_MANAGER, undefined, strategy) as Promise<KubeObject>,
    create: (body) => objects.create(body, undefined, undefined, FIELD_MANAGER) as Promise<KubeObject>,
  };
}
