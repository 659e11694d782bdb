// Test helpers for the real External Secrets Operator (ESO) and Vault Secrets Operator (VSO) controllers that
// clusters.ts runs on OPERATORS_CLUSTER: an OpenBao dev server they can read (a KV v2 mount, a read policy, a token
// for ESO, the kubernetes auth method for VSO, which reviews tokens against that cluster's API server), and the
// per-namespace objects that point them at it (SecretStore; VaultConnection + VaultAuth).
//
// The operators read the OpenBao on 127.0.0.1 over plain HTTP (dev mode, loopback only). Nothing here logs a token;
// the ESO token lives in a Kubernetes Secret the test creates with the admin identity.
import { readFileSync } from 'node:fs';

import { parseAllDocuments, stringify } from 'yaml';

import { startDevServer, type DevServer } from '../vault/server.ts';
import { OPERATORS_CLUSTER, VSO_NAMESPACE } from './clusters.ts';
import { clusterClient, loadClusters, waitFor, type ClusterInfo, type KubeClient } from './kube-http.ts';

export { OPERATORS_CLUSTER, VSO_NAMESPACE };

/** The KV v2 mount the operators read, the policy that allows it, and the kubernetes auth mount. */
export const OPERATORS_KV_MOUNT = 'kv';
const READ_POLICY = 'operators-read';
const KUBERNETES_AUTH_MOUNT = 'kubernetes';
/** The ServiceAccount (in VSO_NAMESPACE, from operators-rbac.yaml) whose token OpenBao reviews with. */
const TOKEN_REVIEWER = 'openbao-token-reviewer';

export const ESO_API = 'external-secrets.io/v1';
export const VSO_API = 'secrets.hashicorp.com/v1beta1';

export function operatorsCluster(): ClusterInfo {
  const c = loadClusters().clusters.find((x) => x.name === OPERATORS_CLUSTER);
  if (c === undefined) throw new Error(`cluster ${OPERATORS_CLUSTER} is not in clusters.json (run clusters:up)`);
  return c;
}

export interface OperatorsVault {
  server: DevServer;
  /** `http://127.0.0.1:<port>`: what SecretStores and VaultConnections point at. */
  addr: string;
  mount: string;
  /** A token with READ_POLICY only, for ESO's tokenSecretRef. Never log it. */
  esoToken: string;
  stop(): Promise<void>;
}

/**
 * Starts an OpenBao dev server for the operators: KV v2 at OPERATORS_KV_MOUNT, policy `operators-read` (read
 * `<mount>/data/*` and `<mount>/metadata/*`), a 24 h token with that policy for ESO, and the kubernetes auth method
 * configured against the operators' cluster (its API server and CA, and a 24 h token of the TOKEN_REVIEWER
 * ServiceAccount, bound to system:auth-delegator, to review with). VSO roles are added per namespace by
 * createVaultAuth().
 */
export async function startOperatorsVault(cluster: ClusterInfo = operatorsCluster()): Promise<OperatorsVault> {
  const server = await startDevServer({ kind: 'openbao' });
  try {
    const { client } = server;
    await client.enableKv(OPERATORS_KV_MOUNT, 2, 'read by ESO and VSO');
    await client.writePolicy(
      READ_POLICY,
      [
        `path "${OPERATORS_KV_MOUNT}/data/*" { capabilities = ["read"] }`,
        `path "${OPERATORS_KV_MOUNT}/metadata/*" { capabilities = ["read"] }`,
      ].join('\n'),
    );
    const { token: esoToken } = await client.createToken({
      policies: [READ_POLICY],
      ttl: '24h',
      displayName: 'external-secrets',
    });

    const admin = clusterClient(cluster, 'admin');
    const reviewerJwt = await serviceAccountToken(admin, VSO_NAMESPACE, TOKEN_REVIEWER, 86_400);
    await client.post(`sys/auth/${KUBERNETES_AUTH_MOUNT}`, { type: 'kubernetes' });
    await client.post(`auth/${KUBERNETES_AUTH_MOUNT}/config`, {
      kubernetes_host: cluster.server,
      kubernetes_ca_cert: readFileSync(cluster.caFile, 'utf8'),
      token_reviewer_jwt: reviewerJwt,
      disable_local_ca_jwt: true,
    });
    return { server, addr: server.addr, mount: OPERATORS_KV_MOUNT, esoToken, stop: () => server.stop() };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** A TokenRequest for a ServiceAccount (admin identity); returns the JWT. */
async function serviceAccountToken(
  admin: KubeClient,
  namespace: string,
  name: string,
  seconds: number,
): Promise<string> {
  const r = await admin.request<{ status?: { token?: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: seconds } } },
  );
  const token = r.body.status?.token;
  if (r.status !== 201 || token === undefined)
    throw new Error(`TokenRequest for ${namespace}/${name}: HTTP ${r.status}`);
  return token;
}

/** POSTs an object, or replaces it (server-side apply) when it exists; throws on any other answer. */
export async function applyObject(
  kube: KubeClient,
  path: string,
  name: string,
  object: Record<string, unknown>,
): Promise<void> {
  const r = await kube.request('PATCH', `${path}/${name}?fieldManager=vault-rollout-tests&force=true`, {
    body: object,
    contentType: 'application/apply-patch+yaml',
  });
  if (r.status !== 200 && r.status !== 201)
    throw new Error(`apply ${path}/${name}: HTTP ${r.status} ${r.text.slice(0, 500)}`);
}

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}
export interface OperatorObject {
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  spec?: Record<string, unknown>;
  status?: {
    conditions?: Condition[];
    refreshTime?: string;
    syncedResourceVersion?: string;
    valid?: boolean;
    error?: string;
    secretMAC?: string;
    lastGeneration?: number;
  };
}

export const conditionOf = (o: OperatorObject, type: string): Condition | undefined =>
  (o.status?.conditions ?? []).find((c) => c.type === type);

export async function getObject(kube: KubeClient, path: string): Promise<OperatorObject> {
  const r = await kube.request<OperatorObject>('GET', path);
  if (r.status !== 200) throw new Error(`GET ${path}: HTTP ${r.status}`);
  return r.body;
}

export const secretStorePath = (ns: string): string => `/apis/${ESO_API}/namespaces/${ns}/secretstores`;
export const externalSecretPath = (ns: string): string => `/apis/${ESO_API}/namespaces/${ns}/externalsecrets`;
export const vaultConnectionPath = (ns: string): string => `/apis/${VSO_API}/namespaces/${ns}/vaultconnections`;
export const vaultAuthPath = (ns: string): string => `/apis/${VSO_API}/namespaces/${ns}/vaultauths`;
export const vaultStaticSecretPath = (ns: string): string => `/apis/${VSO_API}/namespaces/${ns}/vaultstaticsecrets`;

/**
 * In `namespace` (which must exist): the Secret `<name>-token` holding vault.esoToken and a SecretStore `<name>`
 * (provider vault, KV v2 at vault.mount, tokenSecretRef); waits until ESO reports it Ready.
 */
export async function createSecretStore(
  kube: KubeClient,
  namespace: string,
  vault: OperatorsVault,
  name = 'openbao',
): Promise<void> {
  await applyObject(kube, `/api/v1/namespaces/${namespace}/secrets`, `${name}-token`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${name}-token`, namespace },
    type: 'Opaque',
    stringData: { token: vault.esoToken },
  });
  await applyObject(kube, secretStorePath(namespace), name, {
    apiVersion: ESO_API,
    kind: 'SecretStore',
    metadata: { name, namespace },
    spec: {
      provider: {
        vault: {
          server: vault.addr,
          path: vault.mount,
          version: 'v2',
          auth: { tokenSecretRef: { name: `${name}-token`, key: 'token' } },
        },
      },
    },
  });
  await waitFor(
    async () => {
      const store = await getObject(kube, `${secretStorePath(namespace)}/${name}`);
      const ready = conditionOf(store, 'Ready');
      return ready?.status === 'True' ? store : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: `SecretStore ${namespace}/${name} Ready` },
  );
}

/**
 * In `namespace` (which must exist): the ServiceAccount `<name>-auth`, an OpenBao kubernetes-auth role
 * `vso-<namespace>` bound to exactly that ServiceAccount with the read policy, a VaultConnection `<name>` (vault.addr)
 * and a VaultAuth `<name>` (method kubernetes); waits until VSO reports the VaultAuth valid.
 */
export async function createVaultAuth(
  kube: KubeClient,
  namespace: string,
  vault: OperatorsVault,
  name = 'openbao',
): Promise<void> {
  const serviceAccount = `${name}-auth`;
  const role = `vso-${namespace}`;
  await applyObject(kube, `/api/v1/namespaces/${namespace}/serviceaccounts`, serviceAccount, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: serviceAccount, namespace },
  });
  await vault.server.client.post(`auth/${KUBERNETES_AUTH_MOUNT}/role/${role}`, {
    bound_service_account_names: [serviceAccount],
    bound_service_account_namespaces: [namespace],
    token_policies: [READ_POLICY],
    token_ttl: '1h',
  });
  await applyObject(kube, vaultConnectionPath(namespace), name, {
    apiVersion: VSO_API,
    kind: 'VaultConnection',
    metadata: { name, namespace },
    spec: { address: vault.addr },
  });
  await applyObject(kube, vaultAuthPath(namespace), name, {
    apiVersion: VSO_API,
    kind: 'VaultAuth',
    metadata: { name, namespace },
    spec: {
      vaultConnectionRef: name,
      method: 'kubernetes',
      mount: KUBERNETES_AUTH_MOUNT,
      kubernetes: { role, serviceAccount },
    },
  });
  await waitFor(
    async () => {
      const auth = await getObject(kube, `${vaultAuthPath(namespace)}/${name}`);
      if (auth.status?.valid === false && auth.status.error) throw new Error(`VaultAuth invalid: ${auth.status.error}`);
      return auth.status?.valid === true ? auth : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: `VaultAuth ${namespace}/${name} valid` },
  );
}

/**
 * What an install does where routes sync: infra/rbac/sync-operators.yaml (server-side apply, idempotent), its
 * ClusterRoleBinding bound here to the test user `vault-rollout` too.
 */
export async function bindSyncOperatorsRbac(kube: KubeClient): Promise<void> {
  const rbac = parseAllDocuments(
    readFileSync(new URL('../../infra/rbac/sync-operators.yaml', import.meta.url), 'utf8'),
  ).map((d) => d.toJS() as { kind: string; metadata: { name: string }; subjects?: unknown[] });
  for (const doc of rbac) {
    if (doc.kind === 'ClusterRoleBinding')
      doc.subjects = [
        ...(doc.subjects ?? []),
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'vault-rollout' },
      ];
    const plural = doc.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
    const r = await kube.request(
      'PATCH',
      `/apis/rbac.authorization.k8s.io/v1/${plural}/${doc.metadata.name}?fieldManager=vault-rollout-tests&force=true`,
      { body: stringify(doc), contentType: 'application/apply-patch+yaml' },
    );
    if (r.status >= 300)
      throw new Error(`apply ${doc.kind} ${doc.metadata.name}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  }
}
