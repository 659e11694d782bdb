/**
 * `--cluster-kubeconfig NAME=PATH[#CONTEXT]`: a kubeconfig file of this machine in place of one cluster's credentials
 * from the routing table, as kubectl's --kubeconfig and --context replace the default ones. The table written for the
 * Helm chart (`inCluster: true`, kubeconfigs mounted at paths of the pod) then works from a laptop unchanged.
 *
 * What the override replaces is how the cluster is reached: kubeconfig, context, eks, inCluster and
 * insecureSkipTLSVerify (the file's TLS settings are verified, as always). Labels, concurrency and rollout settings
 * stay the table's. The file is the operator's own choice on their own command line, so its user may run an exec
 * plugin or name a token file, as kubectl lets it.
 */
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import type { ClusterConfig } from '../routing/schema.ts';
import type { RoutingTable } from '../routing/table-model.ts';
import { ALLOW_EXEC_VARIABLE, ALLOW_TOKEN_FILE_VARIABLE } from '../kube/credentials/credential-policy.ts';

export interface ClusterKubeconfig {
  cluster: string;
  /** Absolute: relative paths are relative to the working directory, as kubectl's --kubeconfig is. */
  file: string;
  context?: string;
}

export class ClusterKubeconfigError extends Error {
  override readonly name = 'ClusterKubeconfigError';
}

const NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;

/** One flag value, NAME=PATH or NAME=PATH#CONTEXT; `~/` is the home directory (shells do not expand it after `=`). */
export function parseClusterKubeconfig(
  value: string,
  env: Readonly<Record<string, string | undefined>>,
  cwd = process.cwd(),
): ClusterKubeconfig {
  const eq = value.indexOf('=');
  const usage = 'give NAME=PATH or NAME=PATH#CONTEXT (NAME: a cluster of the routing table)';
  if (eq <= 0) throw new ClusterKubeconfigError(`--cluster-kubeconfig ${JSON.stringify(value)}: ${usage}`);
  const cluster = value.slice(0, eq);
  if (!NAME.test(cluster))
    throw new ClusterKubeconfigError(
      `--cluster-kubeconfig ${JSON.stringify(value)}: ${JSON.stringify(cluster)} is not a cluster name; ${usage}`,
    );
  const rest = value.slice(eq + 1);
  const hash = rest.lastIndexOf('#');
  const path = hash < 0 ? rest : rest.slice(0, hash);
  const context = hash < 0 ? undefined : rest.slice(hash + 1);
  if (path === '')
    throw new ClusterKubeconfigError(`--cluster-kubeconfig ${cluster}=: the kubeconfig path is empty; ${usage}`);
  if (context === '')
    throw new ClusterKubeconfigError(
      `--cluster-kubeconfig ${value}: the context after # is empty; give NAME=PATH#CONTEXT or leave out #`,
    );
  const file = expandHome(path, env, cwd);
  return { cluster, file, ...(context === undefined ? {} : { context }) };
}

function expandHome(path: string, env: Readonly<Record<string, string | undefined>>, cwd: string): string {
  if (path === '~' || path.startsWith('~/')) return join(env.HOME ?? homedir(), path.slice(1));
  if (path.startsWith('~'))
    throw new ClusterKubeconfigError(
      `--cluster-kubeconfig: ${path}: only ~/ (your own home) is expanded; write the path in full`,
    );
  return isAbsolute(path) ? path : resolve(cwd, path);
}

/**
 * The table with each named cluster reached through its file; an unknown or repeated name is an error naming the known
 * ones.
 */
export function withClusterKubeconfigs(table: RoutingTable, overrides: readonly ClusterKubeconfig[]): RoutingTable {
  if (overrides.length === 0) return table;
  const clusters = new Map(table.clusters);
  const seen = new Set<string>();
  for (const o of overrides) {
    const config = table.clusters.get(o.cluster);
    if (config === undefined) {
      const known = [...table.clusters.keys()].join(', ') || 'none';
      throw new ClusterKubeconfigError(
        `--cluster-kubeconfig ${o.cluster}: no cluster of that name in ${table.file} (its clusters: ${known})`,
      );
    }
    if (seen.has(o.cluster))
      throw new ClusterKubeconfigError(`--cluster-kubeconfig ${o.cluster} is given twice; give each cluster once`);
    seen.add(o.cluster);
    clusters.set(o.cluster, overridden(config, o));
  }
  return { ...table, clusters };
}

function overridden(config: ClusterConfig, o: ClusterKubeconfig): ClusterConfig {
  const { kubeconfig: _k, context: _c, eks: _e, inCluster: _i, insecureSkipTLSVerify: _s, ...kept } = config;
  return { ...kept, kubeconfig: { file: o.file }, ...(o.context === undefined ? {} : { context: o.context }) };
}

/** The flag's values applied to a loaded table (values as the spec parsed them: repeatable, or comma-separated). */
export function applyClusterKubeconfigs(
  table: RoutingTable,
  values: readonly string[] | undefined,
  env: Readonly<Record<string, string | undefined>>,
): RoutingTable {
  return withClusterKubeconfigs(
    table,
    (values ?? []).map((v) => parseClusterKubeconfig(v, env)),
  );
}

/**
 * The environment with the overridden clusters allowed to run their kubeconfig's exec plugin or read its token file:
 * a kubeconfig named on the operator's own command line is the operator's choice, as kubectl trusts its --kubeconfig,
 * so it counts as if the operator had named the cluster in VAULT_ROLLOUT_ALLOW_EXEC and VAULT_ROLLOUT_ALLOW_TOKEN_FILE.
 */
export function allowOverriddenCredentials(
  env: Readonly<Record<string, string | undefined>>,
  values: readonly string[] | undefined,
): Readonly<Record<string, string | undefined>> {
  const names = (values ?? []).map((v) => parseClusterKubeconfig(v, env).cluster);
  if (names.length === 0) return env;
  const widened = (variable: string) => [env[variable], ...names].filter((v) => v !== undefined && v !== '').join(',');
  return {
    ...env,
    [ALLOW_EXEC_VARIABLE]: widened(ALLOW_EXEC_VARIABLE),
    [ALLOW_TOKEN_FILE_VARIABLE]: widened(ALLOW_TOKEN_FILE_VARIABLE),
  };
}
