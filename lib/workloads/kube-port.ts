/**
 * The port through which the engine, status and the importer reach Kubernetes: the few calls they make and the
 * shapes of what comes back. lib/kube/kube-api.ts implements it over HTTPS; the tests' fake implements it in memory.
 */
import type { KubeConfig, PatchStrategy } from '@kubernetes/client-node';

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    uid?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export const FIELD_MANAGER = 'vault-rollout';

export interface ApiKind {
  apiVersion: string;
  kind: string;
}

/** One RFC 6902 operation: vault-rollout sends only `test` (the guard) and `add`. */
export interface JsonPatchOperation {
  op: 'test' | 'add';
  path: string;
  value: unknown;
}

/**
 * The port. Its one error type: a call the API server answered with an error rejects with client-node's
 * ApiException (status code, Status body, headers), whoever implements it (kube-api.ts, the tests' fake); a call
 * that got no answer rejects with Node's error and its code. classifyKubeError (kube-errors.ts) reads both.
 */
export interface KubeApi {
  read(kind: ApiKind, namespace: string, name: string): Promise<KubeObject>;
  list(kind: ApiKind, namespace: string, labelSelector?: string): Promise<KubeObject[]>;
  /** A merge or strategic-merge patch (an object), or a JSON Patch (RFC 6902: a list of operations). */
  patch(
    kind: ApiKind,
    namespace: string,
    name: string,
    body: Record<string, unknown> | JsonPatchOperation[],
    strategy: PatchStrategy,
    dryRun: boolean,
  ): Promise<KubeObject>;
  create(body: KubeObject & Record<string, unknown>): Promise<KubeObject>;
  /** The resource (plural, scope) serving a kind, from a built-in table or discovery. */
  resource(kind: ApiKind): Promise<{ plural: string; namespaced: boolean }>;
  /** Any other call (doctor's /version, SelfSubjectReview, SelfSubjectAccessReview). */
  request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown>;
  /** A consistent LIST and the resourceVersion to watch from (the follower's start and its relist after 410 Gone). */
  listForWatch(
    kind: ApiKind,
    namespace: string,
    options?: {
      fieldSelector?: string;
      /**
       * Any state at least this recent (resourceVersionMatch=NotOlderThan), answered from the API server's watch
       * cache as soon as it holds this version; without it the read is consistent, which a cache that also follows
       * other resources' writes answers only after asking etcd for its progress (tens of milliseconds).
       */
      notOlderThan?: string;
    },
  ): Promise<{ items: KubeObject[]; resourceVersion: string }>;
  /**
   * Streams changes after `resourceVersion` (with bookmarks) until the server ends the watch after `timeoutSeconds`,
   * the signal aborts, or an error: an ERROR event (410 Gone among them) rejects with an ApiException of its code.
   */
  watch(kind: ApiKind, namespace: string, options: WatchOptions): Promise<void>;
  /** Requests sent so far (every HTTP request, a watch counts once however many events it streams). */
  readonly stats: KubeApiStats;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';
  object: KubeObject;
}

export interface WatchOptions {
  resourceVersion: string;
  timeoutSeconds: number;
  fieldSelector?: string;
  signal?: AbortSignal;
  onEvent(event: WatchEvent): void;
}

export interface KubeApiStats {
  requests: number;
  watches: number;
  watchEvents: number;
}

/**
 * How one cluster is reached (resolved by lib/kube/cluster-access.ts and credentials/): opaque to the engine, which
 * hands it to apiFor.
 */
export interface ClusterAccess {
  /** A KubeConfig whose current context is the cluster to use; never logged or serialized. */
  kubeConfig: KubeConfig;
  /** API server URL (safe to log). */
  server: string;
  /** Epoch ms after which the credentials must be resolved again; undefined = they do not expire. */
  refreshAfter?: number;
  /** True when the cluster said insecureSkipTLSVerify: true. */
  insecureSkipTLSVerify: boolean;
  /** The routing table's name for the cluster, when known: the `cluster` label of the request metrics. */
  cluster?: string;
  /**
   * The bearer token for each request, when it changes while the access lives (a rotating ServiceAccount token
   * file, an exec plugin's token with its own expiry); it replaces any token of kubeConfig. Never logged.
   */
  bearerToken?: () => Promise<string>;
}
