/**
 * A cluster's access from a kubeconfig, read from a file, an environment variable, the routing table itself, SSM
 * Parameter Store or Secrets Manager. The kubeconfig is reduced to the one context used, and that context's user must
 * give a credential vault-rollout can use: a token, a client certificate and key, a username and password, a token
 * file, or an exec plugin printing a token or a client certificate. Token files and exec plugins act with this
 * machine's files and commands, so the operator opts in per cluster and the kubeconfig's writer cannot
 * (credential-policy.ts); the pod's own ServiceAccount token goes only to the in-cluster API. Anything else is an
 * error, never an anonymous connection: kubectl's `tokenFile` spelling, which client-node does not read, used to
 * leave the user with no credential at all.
 *
 * Token files are taken out of every user before client-node sees the kubeconfig: client-node reads every user's
 * `token-file` while loading, which would send any file of this machine as a bearer token to whatever server the
 * kubeconfig names. The selected user's file, when allowed, is read here (token-file.ts).
 *
 * Errors name the cluster, the source, the field and what to do, never the kubeconfig's content.
 */
import { dirname, resolve as resolvePath } from 'node:path';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { secretStringValue, ssmParameterValue } from '../../aws/parameter-store.ts';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { User } from '@kubernetes/client-node';
import type { ClusterConfig, KubeconfigSource } from '../../routing/schema.ts';
import { ClusterAccessError } from '../cluster-access.ts';
import type { ClusterAccess } from '../cluster-access.ts';
import { awsErrorName } from '../../aws/aws-error-name.ts';
import { skipTLSVerifyFor } from './tls-policy.ts';
import type { WarningLogger } from './tls-policy.ts';
import { ExecCredentialError, execTokenSource, runExecCredential } from './exec-credential.ts';
import type { ExecClientCertificate, ExecConfig, ExecDeps } from './exec-credential.ts';
import { TokenFileError, tokenFileSource } from './token-file.ts';
import type { TokenFileDeps } from './token-file.ts';
import { ALLOW_EXEC_VARIABLE, operatorAllows, tokenFileProblem } from './credential-policy.ts';
import {
  checkServer,
  KubeconfigSourceError,
  parseKubeconfig,
  reducedKubeConfig,
  selectContext,
  selectUser,
  TOKEN_FILE_FIELDS,
  type RawUser,
} from './kubeconfig-document.ts';

export interface KubeconfigSourceDeps {
  /** Directory of the routing table: relative `file` paths are resolved against it. */
  routingTableDir: string;
  env: Readonly<Record<string, string | undefined>>;
  readFile: (path: string) => Promise<string>;
  ssm: Pick<SSMClient, 'send'>;
  secretsManager: Pick<SecretsManagerClient, 'send'>;
  logger: WarningLogger;
  /** Where this process runs: no credential plugin runs in Lambda (default `local`). */
  runtime?: 'lambda' | 'local';
  clock?: () => number;
  /** How exec plugins are found and run (tests pass their own). */
  exec?: Pick<ExecDeps, 'run' | 'isExecutable' | 'limits'>;
  /** How token files are read (tests pass their own). */
  tokenFile?: Pick<TokenFileDeps, 'stat' | 'readFile'>;
  /** Resolves symbolic links, to recognise the pod's token behind one (tests pass their own). */
  realpath?: (path: string) => Promise<string>;
}

/** The kubeconfig text and, for files, the directory its relative certificate paths are relative to. */
interface KubeconfigText {
  text: string;
  baseDir?: string;
}

type SourceKind = 'file' | 'env' | 'inline' | 'ssm' | 'secretsManager';

interface DescribedSource {
  kind: SourceKind;
  /** The file path, variable name, parameter name or secret id; for inline, the kubeconfig itself. */
  ref: string;
  /** How errors name the source; never includes inline content. */
  label: string;
}

function describeSource(source: KubeconfigSource): DescribedSource {
  if ('file' in source) return { kind: 'file', ref: source.file, label: `kubeconfig file ${source.file}` };
  if ('env' in source)
    return { kind: 'env', ref: source.env, label: `kubeconfig from environment variable ${source.env}` };
  if ('inline' in source) return { kind: 'inline', ref: source.inline, label: 'inline kubeconfig' };
  if ('ssm' in source) return { kind: 'ssm', ref: source.ssm, label: `kubeconfig from SSM parameter ${source.ssm}` };
  return {
    kind: 'secretsManager',
    ref: source.secretsManager,
    label: `kubeconfig from Secrets Manager secret ${source.secretsManager}`,
  };
}

/** Resolves a cluster whose routing-table entry has `kubeconfig`. */
export async function resolveKubeconfigAccess(
  name: string,
  config: ClusterConfig,
  deps: KubeconfigSourceDeps,
): Promise<ClusterAccess> {
  if (config.kubeconfig === undefined) throw new ClusterAccessError(name, 'has no kubeconfig source');
  const source = describeSource(config.kubeconfig);
  try {
    const loaded = await readKubeconfigText(source, deps);
    return await accessFromKubeconfig(name, config, loaded, deps);
  } catch (error) {
    if (!(
      error instanceof KubeconfigSourceError ||
      error instanceof ExecCredentialError ||
      error instanceof TokenFileError
    ))
      throw error;
    throw new ClusterAccessError(
      name,
      `${source.label}: ${error.message}`,
      error.cause === undefined ? undefined : { cause: error.cause },
    );
  }
}

async function readKubeconfigText(source: DescribedSource, deps: KubeconfigSourceDeps): Promise<KubeconfigText> {
  switch (source.kind) {
    case 'file':
      return readKubeconfigFile(resolvePath(deps.routingTableDir, source.ref), deps);
    case 'env':
      return { text: readEnvironmentVariable(source.ref, deps.env) };
    case 'inline':
      return { text: source.ref };
    case 'ssm':
    case 'secretsManager':
      return { text: await readRemoteSecret(remoteStores[source.kind], source.ref, deps) };
  }
}

async function readKubeconfigFile(path: string, deps: KubeconfigSourceDeps): Promise<KubeconfigText> {
  try {
    return { text: await deps.readFile(path), baseDir: dirname(path) };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const why = typeof code === 'string' ? code : 'unreadable';
    throw new KubeconfigSourceError(
      `cannot read ${path} (${why}); paths are relative to the routing table's directory`,
      { cause: error },
    );
  }
}

function readEnvironmentVariable(variable: string, env: KubeconfigSourceDeps['env']): string {
  const value = env[variable];
  if (value === undefined || value.trim() === '') {
    throw new KubeconfigSourceError(`the variable is not set or empty; set ${variable} to the kubeconfig YAML`);
  }
  return value;
}

/** The one thing that differs between SSM and Secrets Manager: how to ask, and what permission to grant. */
interface RemoteStore {
  fetch: (deps: KubeconfigSourceDeps, id: string) => Promise<string | undefined>;
  permission: string;
  valueHint: string;
}

const remoteStores: Record<'ssm' | 'secretsManager', RemoteStore> = {
  ssm: {
    fetch: (deps, id) => ssmParameterValue(deps.ssm, id),
    permission: 'ssm:GetParameter (and kms:Decrypt on its key)',
    valueHint: 'store the kubeconfig YAML as a SecureString parameter',
  },
  secretsManager: {
    fetch: (deps, id) => secretStringValue(deps.secretsManager, id),
    permission: 'secretsmanager:GetSecretValue (and kms:Decrypt on its key)',
    valueHint: 'store the kubeconfig YAML as the secret string (binary secrets are not read)',
  },
};

async function readRemoteSecret(store: RemoteStore, id: string, deps: KubeconfigSourceDeps): Promise<string> {
  let value: string | undefined;
  try {
    value = await store.fetch(deps, id);
  } catch (error) {
    // AWS errors name the resource and the principal, never the value, so they are safe as the cause.
    throw new KubeconfigSourceError(
      `cannot be read (${awsErrorName(error)}); check that it exists and grant ${store.permission}`,
      {
        cause: error,
      },
    );
  }
  if (value === undefined || value.trim() === '') throw new KubeconfigSourceError(`has no value; ${store.valueHint}`);
  return value;
}

async function accessFromKubeconfig(
  name: string,
  config: ClusterConfig,
  loaded: KubeconfigText,
  deps: KubeconfigSourceDeps,
): Promise<ClusterAccess> {
  const { kubeConfig: full, users: rawUsers } = parseKubeconfig(loaded.text);
  if (loaded.baseDir !== undefined) full.makePathsAbsolute(loaded.baseDir);
  const context = selectContext(full, config.context);
  const cluster = full.getCluster(context.cluster);
  if (cluster === null)
    throw new KubeconfigSourceError(
      `context ${context.name} names cluster ${context.cluster}, which the kubeconfig does not define`,
    );
  const user = selectUser(full, context);
  const server = checkServer(cluster.server, config.insecureSkipTLSVerify === true);
  const credential = userCredential(name, user, rawUsers.get(user.name) ?? {}, config, deps);
  if (credential.kind === 'tokenFile') {
    const skip = config.insecureSkipTLSVerify === true || cluster.skipTLSVerify === true;
    const endpoint = { server, caData: cluster.caData, caFile: cluster.caFile, skipTLSVerify: skip };
    const absolute = resolvePath(loaded.baseDir ?? deps.routingTableDir, credential.path);
    const where = { cluster: name, user: user.name, fromSharedStore: !isLocalSource(config), absolute };
    const problem = await tokenFileProblem(where, credential, endpoint, deps);
    if (problem !== undefined) throw new KubeconfigSourceError(problem);
  }
  const target = { server, caData: cluster.caData, skipTLSVerify: config.insecureSkipTLSVerify === true };
  const { bearerToken, clientCertificate } = await credentialSource(credential, target, loaded.baseDir, deps);
  // Warn only once everything else is valid: a refused kubeconfig has nothing to warn about.
  const skipTLSVerify = skipTLSVerifyFor(name, config, deps.logger);
  const { exec: _exec, authProvider: _authProvider, ...plainUser } = user;
  return {
    kubeConfig: reducedKubeConfig(
      context,
      { ...cluster, skipTLSVerify },
      withClientCertificate(plainUser as User, clientCertificate),
    ),
    server,
    insecureSkipTLSVerify: skipTLSVerify,
    ...(bearerToken === undefined ? {} : { bearerToken }),
    ...(clientCertificate?.renewAt === undefined ? {} : { refreshAfter: clientCertificate.renewAt }),
  };
}

/** The user with the plugin's client certificate in place of any other (client-node wants base64 of the PEM). */
function withClientCertificate(user: User, certificate: ExecClientCertificate | undefined): User {
  if (certificate === undefined) return user;
  const { certFile: _certFile, keyFile: _keyFile, ...rest } = user;
  return {
    ...rest,
    certData: Buffer.from(certificate.certificate).toString('base64'),
    keyData: Buffer.from(certificate.key).toString('base64'),
  };
}

/** How the selected user authenticates: client-node does it (token, certificate, basic), or vault-rollout does. */
type UserCredential =
  { kind: 'kubeconfig' } | { kind: 'exec'; exec: ExecConfig } | { kind: 'tokenFile'; path: string; field: string };

function userCredential(
  name: string,
  user: User,
  raw: RawUser,
  config: ClusterConfig,
  deps: KubeconfigSourceDeps,
): UserCredential {
  const local = isLocalSource(config);
  if (user.exec) {
    const command = typeof user.exec.command === 'string' ? user.exec.command : '?';
    if (deps.runtime === 'lambda') {
      throw new KubeconfigSourceError(
        `user ${user.name}: exec (the credential plugin ${command}) cannot run in the Lambda runtime, which has no plugins; ` +
          'give the user a token or client certificate (keep the kubeconfig in SSM or Secrets Manager), or configure an EKS cluster with eks: { name, region }',
      );
    }
    if (!local) {
      throw new KubeconfigSourceError(
        `user ${user.name}: exec (the credential plugin ${command}) is refused for a kubeconfig from SSM or Secrets Manager: whoever can write it would choose the command vault-rollout runs; ` +
          `keep that kubeconfig in a file and allow it with ${ALLOW_EXEC_VARIABLE}=${name}, ` +
          'or give the user a token or client certificate',
      );
    }
    if (!operatorAllows(deps.env, ALLOW_EXEC_VARIABLE, name)) {
      throw new KubeconfigSourceError(
        `user ${user.name}: exec (the credential plugin ${command}) runs only when the operator allows it ` +
          `for this cluster: set ${ALLOW_EXEC_VARIABLE}=${name} in vault-rollout's environment ` +
          "(the routing table's allowExec no longer grants it); " +
          'or give the user a token or client certificate',
      );
    }
    return { kind: 'exec', exec: user.exec as ExecConfig };
  }
  if (user.authProvider) {
    throw new KubeconfigSourceError(
      `user ${user.name}: auth-provider (${String(user.authProvider.name ?? '?')}) is refused: kubectl removed these plugins; ` +
        "use the provider's exec plugin instead (gke-gcloud-auth-plugin, kubelogin, aws eks get-token), " +
        `allowed with ${ALLOW_EXEC_VARIABLE}`,
    );
  }
  const hasToken = typeof user.token === 'string' && user.token !== '';
  const tokenFileField = TOKEN_FILE_FIELDS.find((field) => typeof raw[field] === 'string' && raw[field] !== '');
  if (!hasToken && tokenFileField !== undefined) {
    const path = raw[tokenFileField] as string;
    return { kind: 'tokenFile', path, field: tokenFileField };
  }
  const hasCert = Boolean(user.certData ?? user.certFile);
  const hasKey = Boolean(user.keyData ?? user.keyFile);
  const hasBasic = typeof user.username === 'string' && user.username !== '' && typeof user.password === 'string';
  if (hasToken || (hasCert && hasKey) || hasBasic) return { kind: 'kubeconfig' };
  if (hasCert !== hasKey) {
    throw new KubeconfigSourceError(
      `user ${user.name}: ${hasCert ? 'client-certificate has no client-key' : 'client-key has no client-certificate'}, so the cluster would be called anonymously; give both, or a token`,
    );
  }
  throw new KubeconfigSourceError(
    `user ${user.name} gives no credential vault-rollout can use (token, client-certificate and client-key, username and password, tokenFile or exec), so the cluster would be called anonymously; ` +
      'give the user one of them',
  );
}

/** A kubeconfig the operator keeps beside vault-rollout (file, environment, the table), not one from a shared store. */
function isLocalSource(config: ClusterConfig): boolean {
  const source = config.kubeconfig;
  return source !== undefined && ('file' in source || 'env' in source || 'inline' in source);
}

/** What vault-rollout adds to the kubeconfig's user: a bearer token source, or an exec plugin's client certificate. */
interface AddedCredential {
  bearerToken?: () => Promise<string>;
  clientCertificate?: ExecClientCertificate;
}

async function credentialSource(
  credential: UserCredential,
  cluster: { server: string; caData?: string; skipTLSVerify: boolean },
  baseDir: string | undefined,
  deps: KubeconfigSourceDeps,
): Promise<AddedCredential> {
  const clock = deps.clock ?? Date.now;
  if (credential.kind === 'tokenFile') {
    return {
      bearerToken: await tokenFileSource(resolvePath(baseDir ?? deps.routingTableDir, credential.path), {
        clock,
        ...deps.tokenFile,
      }),
    };
  }
  if (credential.kind === 'exec') {
    const info = {
      server: cluster.server,
      ...(cluster.caData ? { 'certificate-authority-data': cluster.caData } : {}),
      ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
    };
    const execDeps = { env: deps.env, clock, ...deps.exec };
    // Run once now: a plugin that cannot work is a start-up error naming the cluster; its credential serves the first
    // request.
    const first = await runExecCredential(credential.exec, info, baseDir, execDeps);
    if (first.kind === 'certificate') return { clientCertificate: first };
    return { bearerToken: execTokenSource(credential.exec, info, baseDir, execDeps, first) };
  }
  return {};
}
