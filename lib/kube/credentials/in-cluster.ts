/**
 * The cluster vault-rollout runs in (`inCluster: true`): the pod's projected ServiceAccount token, followed as the
 * kubelet rotates it (token-file.ts), the cluster CA from the same folder, and the API server from
 * KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, as client-go's rest.InClusterConfig reads them.
 * VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR moves the folder (tests, or a token projected elsewhere).
 */
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterConfig } from '../../routing/schema.ts';
import { ClusterAccessError } from '../cluster-access.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { skipTLSVerifyFor } from './tls-policy.ts';
import type { WarningLogger } from './tls-policy.ts';
import { TokenFileError, tokenFileSource } from './token-file.ts';
import { inClusterServer, serviceAccountDir } from './credential-policy.ts';
import type { TokenFileDeps } from './token-file.ts';

export interface InClusterDeps {
  env: Readonly<Record<string, string | undefined>>;
  readFile: (path: string) => Promise<string>;
  logger: WarningLogger;
  clock?: () => number;
  tokenFile?: Pick<TokenFileDeps, 'stat' | 'readFile'>;
}

export { SERVICE_ACCOUNT_DIR_VARIABLE } from './credential-policy.ts';

export async function resolveInClusterAccess(
  name: string,
  config: ClusterConfig,
  deps: InClusterDeps,
): Promise<ClusterAccess> {
  const server = inClusterServer(deps.env);
  if (server === undefined) {
    throw new ClusterAccessError(
      name,
      'inCluster: true, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: vault-rollout is not running in a pod; give the cluster a kubeconfig instead',
    );
  }
  const dir = serviceAccountDir(deps.env);
  const caPath = join(dir, 'ca.crt');
  let ca: string;
  try {
    ca = await deps.readFile(caPath);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new ClusterAccessError(
      name,
      `inCluster: true, but the cluster CA ${caPath} cannot be read (${typeof code === 'string' ? code : 'unreadable'}); mount the pod's ServiceAccount token (automountServiceAccountToken or a projected volume)`,
    );
  }
  let bearerToken: () => Promise<string>;
  try {
    bearerToken = await tokenFileSource(join(dir, 'token'), { clock: deps.clock ?? Date.now, ...deps.tokenFile });
  } catch (error) {
    if (!(error instanceof TokenFileError)) throw error;
    throw new ClusterAccessError(
      name,
      `inCluster: true, but ${error.message}; mount the pod's ServiceAccount token (automountServiceAccountToken or a projected volume)`,
    );
  }
  const skipTLSVerify = skipTLSVerifyFor(name, config, deps.logger);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name, server, caData: Buffer.from(ca).toString('base64'), skipTLSVerify }],
    users: [{ name: 'in-cluster' }],
    contexts: [{ name, cluster: name, user: 'in-cluster' }],
    currentContext: name,
  });
  return { kubeConfig, server, insecureSkipTLSVerify: skipTLSVerify, bearerToken };
}
