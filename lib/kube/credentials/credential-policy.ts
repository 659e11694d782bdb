/**
 * Which kubeconfig credentials that act on this machine's behalf a cluster may use, decided by the operator, never
 * by the kubeconfig or the routing table: whoever writes those chooses the server, so they must not also choose to
 * run a command (exec) or to send a file of this machine (tokenFile) to it.
 *
 * - An exec plugin runs only for the clusters named in VAULT_ROLLOUT_ALLOW_EXEC (a comma-separated list of cluster
 *   names; never in Lambda, never from SSM or Secrets Manager: kubeconfig-source.ts).
 * - A token file is sent only for the clusters named in VAULT_ROLLOUT_ALLOW_TOKEN_FILE, and never from a kubeconfig
 *   read from SSM or Secrets Manager.
 * - The pod's own ServiceAccount token (it can patch every workload of the cluster vault-rollout runs in) goes only
 *   to that cluster's API server, checked by its address and its CA, whatever the opt-ins say: `inCluster: true`
 *   is the way to use it.
 */
import { realpath as fsRealpath } from 'node:fs/promises';
import { isIPv6 } from 'node:net';
import { join, resolve as resolvePath, sep } from 'node:path';
import { SERVICE_ACCOUNT_DIR } from './token-file.ts';

export const ALLOW_EXEC_VARIABLE = 'VAULT_ROLLOUT_ALLOW_EXEC';
export const ALLOW_TOKEN_FILE_VARIABLE = 'VAULT_ROLLOUT_ALLOW_TOKEN_FILE';
export const SERVICE_ACCOUNT_DIR_VARIABLE = 'VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR';

type Env = Readonly<Record<string, string | undefined>>;

/** Whether the operator's variable names this cluster (names separated by commas or spaces; no wildcard). */
export function operatorAllows(env: Env, variable: string, cluster: string): boolean {
  return (env[variable] ?? '').split(/[\s,]+/).some((name) => name !== '' && name === cluster);
}

/** The folder `inCluster: true` reads the pod's token and CA from. */
export function serviceAccountDir(env: Env): string {
  return env[SERVICE_ACCOUNT_DIR_VARIABLE] || SERVICE_ACCOUNT_DIR;
}

/** The in-cluster API server, as client-go's rest.InClusterConfig builds it; undefined outside a pod. */
export function inClusterServer(env: Env): string | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  return `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
}

export interface PodTokenDeps {
  env: Env;
  readFile: (path: string) => Promise<string>;
  /** Resolves symbolic links (the kubelet's token is one); tests pass their own. */
  realpath?: (path: string) => Promise<string>;
}

/** Folders holding the pod's projected ServiceAccount token: /var/run is a link to /run on most images. */
function podTokenDirs(env: Env): string[] {
  const runSpelling = SERVICE_ACCOUNT_DIR.replace(/^\/var\/run\//, '/run/');
  return [...new Set([SERVICE_ACCOUNT_DIR, runSpelling, serviceAccountDir(env)])];
}

const inside = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);

async function realOrSame(path: string, realpath: (path: string) => Promise<string>): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    return path;
  }
}

/** Whether an absolute path is (or links to) a file of the pod's ServiceAccount token folder. */
export async function isPodToken(path: string, deps: PodTokenDeps): Promise<boolean> {
  const realpath = deps.realpath ?? ((p: string) => fsRealpath(p));
  const real = await realOrSame(path, realpath);
  for (const dir of podTokenDirs(deps.env).map((d) => resolvePath(d))) {
    if (inside(path, dir) || inside(real, dir) || inside(real, await realOrSame(dir, realpath))) return true;
  }
  return false;
}

/** The kubeconfig's cluster as far as the in-cluster check needs it. */
export interface ClusterEndpoint {
  server: string;
  caData?: string;
  caFile?: string;
  skipTLSVerify: boolean;
}

/**
 * Whether the cluster is the in-cluster API: its server is https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT
 * and its CA is the pod's ca.crt, verified (a look-alike address with another CA, or no verification, is not).
 */
export async function isInClusterApi(cluster: ClusterEndpoint, deps: PodTokenDeps): Promise<boolean> {
  const expected = inClusterServer(deps.env);
  if (expected === undefined || cluster.skipTLSVerify) return false;
  if (!sameOrigin(cluster.server, expected)) return false;
  let podCa: string;
  let ca: string;
  try {
    podCa = await deps.readFile(join(serviceAccountDir(deps.env), 'ca.crt'));
    if (cluster.caData) ca = Buffer.from(cluster.caData, 'base64').toString('utf8');
    else if (cluster.caFile) ca = await deps.readFile(cluster.caFile);
    else return false;
  } catch {
    return false;
  }
  return podCa.trim() !== '' && podCa.trim() === ca.trim();
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

/** Which token file, for which cluster and user, read from what kind of kubeconfig. */
export interface TokenFileUse {
  cluster: string;
  user: string;
  /** The kubeconfig came from SSM or Secrets Manager, which others may write. */
  fromSharedStore: boolean;
  /** The file's absolute path. */
  absolute: string;
}

/**
 * Why a kubeconfig user's token file must not be sent to its cluster; undefined when it may. Never from SSM or
 * Secrets Manager; the pod's own token only to the in-cluster API, whatever the opt-in says; any other file only
 * for a cluster the operator names in VAULT_ROLLOUT_ALLOW_TOKEN_FILE.
 */
export async function tokenFileProblem(
  use: TokenFileUse,
  credential: { path: string; field: string },
  endpoint: ClusterEndpoint,
  deps: PodTokenDeps,
): Promise<string | undefined> {
  const refused = `user ${use.user}: ${credential.field} ${credential.path} is refused`;
  if (use.fromSharedStore) {
    return (
      `${refused} for a kubeconfig from SSM or Secrets Manager: ` +
      'whoever can write it would choose which file of this machine is sent, and to which server; ' +
      "put the token itself in the user's token field, or use a client certificate"
    );
  }
  if (await isPodToken(use.absolute, deps)) {
    if (await isInClusterApi(endpoint, deps)) return undefined;
    return (
      `${refused}: it is the pod's own ServiceAccount token, which goes only to the in-cluster API server ` +
      "with the pod's CA, and this cluster's server or CA is another; " +
      'use inCluster: true for the cluster vault-rollout runs in, or give this cluster a credential of its own'
    );
  }
  if (operatorAllows(deps.env, ALLOW_TOKEN_FILE_VARIABLE, use.cluster)) return undefined;
  return (
    `${refused}: it would send a file of this machine as the bearer token; ` +
    `set ${ALLOW_TOKEN_FILE_VARIABLE}=${use.cluster} in vault-rollout's environment to allow it ` +
    "(the routing table's allowTokenFile no longer grants it), " +
    "or put the token itself in the user's token field, or use a client certificate"
  );
}
