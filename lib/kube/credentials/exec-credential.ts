/**
 * kubectl's exec credential plugins (`users[].user.exec`: `aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`,
 * ...), for `serve`, `worker` and the CLI when the operator opts in for the cluster (VAULT_ROLLOUT_ALLOW_EXEC).
 *
 * The plugin runs with the ExecCredential protocol (client.authentication.k8s.io/v1 and v1beta1): no shell, the
 * command resolved on PATH (or relative to the kubeconfig when it names a path), an environment of PATH, HOME, the
 * kubeconfig's exec.env and KUBERNETES_EXEC_INFO only, no stdin (never interactive), a bounded time and output.
 * Its token is kept until its expirationTimestamp, so the plugin runs once per token lifetime, not per request; a
 * token without expiry is kept until the API server refuses it (ClusterClients.invalidate builds the access, and so
 * this source, again). A plugin may hand out a client certificate and key instead (status.clientCertificateData and
 * clientKeyData, as `tsh kube credentials` does): as in kubectl, they are used for the TLS handshake, and the access
 * is built again before their expirationTimestamp.
 *
 * Neither the plugin's output nor its stderr is ever logged or put in an error: either may hold the token.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access as fsAccess } from 'node:fs/promises';
import { delimiter, isAbsolute, join, resolve as resolvePath } from 'node:path';

export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;

/** The `exec` block of a kubeconfig user, as kubectl reads it. */
export interface ExecConfig {
  command: string;
  args?: string[];
  env?: Array<{ name: string; value: string }>;
  apiVersion: string;
  interactiveMode?: string;
  provideClusterInfo?: boolean;
}

/** The cluster as the plugin may ask for it (`provideClusterInfo: true`). */
export interface ExecClusterInfo {
  server: string;
  'certificate-authority-data'?: string;
  'insecure-skip-tls-verify'?: boolean;
}

/** What the plugin needs from this process; tests pass their own. */
export interface ExecDeps {
  env: Readonly<Record<string, string | undefined>>;
  clock: () => number;
  /** Runs a file with arguments (no shell); resolves with its stdout, rejects with the exit code or the limit hit. */
  run?: (file: string, args: readonly string[], options: RunOptions) => Promise<string>;
  /** Whether a path is an executable file. */
  isExecutable?: (path: string) => Promise<boolean>;
  /** The plugin's bounds (defaults EXEC_TIMEOUT_MS, EXEC_MAX_OUTPUT_BYTES). */
  limits?: Partial<Pick<RunOptions, 'timeoutMs' | 'maxOutputBytes'>>;
}

export interface RunOptions {
  env: Record<string, string>;
  timeoutMs: number;
  maxOutputBytes: number;
}

/** The plugin must answer within this time... */
export const EXEC_TIMEOUT_MS = 30_000;
/** ...and print at most this much: an ExecCredential is a few kilobytes. */
export const EXEC_MAX_OUTPUT_BYTES = 256 * 1024;
/** A token is replaced this long before its expirationTimestamp, so no request carries one about to expire. */
export const EXPIRY_MARGIN_MS = 10_000;

/** Why the plugin cannot be used: said by the caller with the cluster, the source and the user in front. */
export class ExecCredentialError extends Error {
  override readonly name = 'ExecCredentialError';
}

interface CachedToken {
  token: string;
  /** Epoch ms after which the plugin runs again; undefined = until invalidated. */
  renewAt?: number;
}

/**
 * A client certificate and its key from the plugin (PEM), as `tsh kube credentials` hands them out: kubectl uses
 * them for the TLS handshake instead of a bearer token. The access is built again before renewAt.
 */
export interface ExecClientCertificate {
  certificate: string;
  key: string;
  renewAt?: number;
}

/** What one run of the plugin gave: a token, or a client certificate. */
export type ExecCredentialResult =
  ({ kind: 'token' } & CachedToken) | ({ kind: 'certificate' } & ExecClientCertificate);

/**
 * A bearer-token source backed by the plugin. Concurrent callers share one run; a failed run is not kept, so the
 * next request runs the plugin again.
 */
export function execTokenSource(
  exec: ExecConfig,
  cluster: ExecClusterInfo,
  baseDir: string | undefined,
  deps: ExecDeps,
  first?: CachedToken,
): () => Promise<string> {
  checkExecConfig(exec);
  let cached: CachedToken | undefined = first;
  let running: Promise<string> | undefined;
  return () => {
    if (cached !== undefined && (cached.renewAt === undefined || deps.clock() < cached.renewAt))
      return Promise.resolve(cached.token);
    running ??= runPlugin(exec, cluster, baseDir, deps)
      .then((credential) => {
        // A plugin that turned from tokens to certificates between runs: the access must be built again.
        if (credential.kind !== 'token')
          throw new ExecCredentialError(
            "the exec plugin now hands out a client certificate instead of a token; the cluster's access is built again on the next request",
          );
        cached = credential;
        return credential.token;
      })
      .finally(() => (running = undefined));
    return running;
  };
}

/**
 * Runs the plugin once (at start-up: a plugin that cannot work is an error naming the cluster) and says what it gave.
 */
export function runExecCredential(
  exec: ExecConfig,
  cluster: ExecClusterInfo,
  baseDir: string | undefined,
  deps: ExecDeps,
): Promise<ExecCredentialResult> {
  checkExecConfig(exec);
  return runPlugin(exec, cluster, baseDir, deps);
}

function checkExecConfig(exec: ExecConfig): void {
  if (typeof exec.command !== 'string' || exec.command === '')
    throw new ExecCredentialError('exec.command is missing; name the plugin to run');
  if (!(EXEC_API_VERSIONS as readonly string[]).includes(exec.apiVersion)) {
    throw new ExecCredentialError(
      `exec.apiVersion ${String(exec.apiVersion)} is not supported; use ${EXEC_API_VERSIONS.join(' or ')}`,
    );
  }
  if (exec.interactiveMode === 'Always') {
    throw new ExecCredentialError(
      'exec.interactiveMode is Always, but vault-rollout never has a terminal; use a plugin mode that needs no input (IfAvailable or Never)',
    );
  }
}

async function runPlugin(
  exec: ExecConfig,
  cluster: ExecClusterInfo,
  baseDir: string | undefined,
  deps: ExecDeps,
): Promise<ExecCredentialResult> {
  const file = await resolveCommand(exec.command, baseDir, deps);
  const info = {
    apiVersion: exec.apiVersion,
    kind: 'ExecCredential',
    spec: { interactive: false, ...(exec.provideClusterInfo === true ? { cluster } : {}) },
  };
  const env = pluginEnvironment(exec, deps.env);
  env.KUBERNETES_EXEC_INFO = JSON.stringify(info);
  const stdout = await (deps.run ?? runFile)(file, exec.args ?? [], {
    env,
    timeoutMs: deps.limits?.timeoutMs ?? EXEC_TIMEOUT_MS,
    maxOutputBytes: deps.limits?.maxOutputBytes ?? EXEC_MAX_OUTPUT_BYTES,
  });
  return parseExecCredential(stdout, exec.apiVersion, deps.clock());
}

/** What the plugin inherits from this process: PATH and HOME, nothing else (never its Vault or AWS secrets). */
export const INHERITED_VARIABLES = ['PATH', 'HOME'] as const;

/**
 * The plugin's environment: the variables its kubeconfig names (exec.env) plus PATH and HOME. kubectl passes its
 * whole environment; vault-rollout's holds webhook secrets, Vault tokens and AWS keys the plugin has no need of.
 */
export function pluginEnvironment(exec: Pick<ExecConfig, 'env'>, processEnv: ExecDeps['env']): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_VARIABLES) {
    const value = processEnv[name];
    if (value !== undefined) env[name] = value;
  }
  for (const entry of exec.env ?? []) env[entry.name] = entry.value;
  return env;
}

/**
 * kubectl's rule: a command with a path separator is relative to the kubeconfig's directory; a bare name is looked up
 * on PATH.
 */
async function resolveCommand(command: string, baseDir: string | undefined, deps: ExecDeps): Promise<string> {
  const isExecutable = deps.isExecutable ?? executableFile;
  if (command.includes('/')) {
    const path = isAbsolute(command) ? command : resolvePath(baseDir ?? '.', command);
    if (await isExecutable(path)) return path;
    throw new ExecCredentialError(
      `exec.command ${command} is not an executable file${isAbsolute(command) ? '' : ` (relative to the kubeconfig: ${path})`}; install the plugin or fix the path`,
    );
  }
  const dirs = (deps.env.PATH ?? '').split(delimiter).filter((d) => d !== '');
  for (const dir of dirs) {
    const path = join(dir, command);
    if (await isExecutable(path)) return path;
  }
  throw new ExecCredentialError(
    `exec.command ${command} is not on PATH; install the plugin or put its directory on vault-rollout's PATH`,
  );
}

async function executableFile(path: string): Promise<boolean> {
  try {
    await fsAccess(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs the plugin: no shell, no stdin, killed when it takes too long or prints too much. */
function runFile(file: string, args: readonly string[], options: RunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      {
        env: options.env,
        timeout: options.timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: options.maxOutputBytes,
        encoding: 'utf8',
        windowsHide: true,
      },
      (error, stdout) => {
        if (error === null) return resolve(stdout);
        // Only what happened, never stderr or stdout: either may hold the token.
        const code = (error as { code?: unknown }).code;
        if (code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER')
          return reject(
            new ExecCredentialError(
              `the exec plugin printed more than ${options.maxOutputBytes} bytes; it was stopped`,
            ),
          );
        if (error.killed === true || error.signal === 'SIGKILL')
          return reject(
            new ExecCredentialError(
              `the exec plugin did not finish within ${options.timeoutMs / 1000} s; it was stopped (run it by hand to see why)`,
            ),
          );
        if (typeof code === 'number')
          return reject(
            new ExecCredentialError(`the exec plugin exited with code ${code}; run it by hand to see its message`),
          );
        return reject(
          new ExecCredentialError(
            `the exec plugin could not be started (${typeof code === 'string' ? code : 'error'})`,
          ),
        );
      },
    );
    child.stdin?.end();
  });
}

type ExecStatus = {
  token?: unknown;
  expirationTimestamp?: unknown;
  clientCertificateData?: unknown;
  clientKeyData?: unknown;
};

function parseExecCredential(stdout: string, apiVersion: string, now: number): ExecCredentialResult {
  let credential: { apiVersion?: unknown; kind?: unknown; status?: ExecStatus };
  try {
    credential = JSON.parse(stdout) as typeof credential;
  } catch {
    throw new ExecCredentialError('the exec plugin printed something that is not an ExecCredential (not JSON)');
  }
  if (credential === null || typeof credential !== 'object' || credential.kind !== 'ExecCredential') {
    throw new ExecCredentialError(
      'the exec plugin printed something that is not an ExecCredential (kind is not ExecCredential)',
    );
  }
  if (credential.apiVersion !== apiVersion) {
    throw new ExecCredentialError(
      `the exec plugin answered with apiVersion ${String(credential.apiVersion).slice(0, 60)}, not the ${apiVersion} the kubeconfig asks for`,
    );
  }
  const status = credential.status ?? {};
  if (typeof status.token === 'string' && status.token !== '')
    return { kind: 'token', token: status.token, ...renewTime(status.expirationTimestamp, now, 'a token') };
  return {
    kind: 'certificate',
    ...clientCertificate(status),
    ...renewTime(status.expirationTimestamp, now, 'a client certificate'),
  };
}

/** kubectl's rule: without a token, status must carry both clientCertificateData and clientKeyData, PEM-encoded. */
function clientCertificate(status: ExecStatus): { certificate: string; key: string } {
  const cert = status.clientCertificateData;
  const key = status.clientKeyData;
  const given = (v: unknown): v is string => typeof v === 'string' && v !== '';
  if (!given(cert) && !given(key))
    throw new ExecCredentialError(
      "the exec plugin's ExecCredential carries neither status.token nor status.clientCertificateData and clientKeyData; use a plugin that prints one of them",
    );
  if (!given(cert) || !given(key))
    throw new ExecCredentialError(
      `the exec plugin's ExecCredential carries ${given(cert) ? 'clientCertificateData without clientKeyData' : 'clientKeyData without clientCertificateData'}; a client certificate needs both`,
    );
  if (!cert.includes('-----BEGIN CERTIFICATE-----'))
    throw new ExecCredentialError("the exec plugin's status.clientCertificateData is not a PEM certificate");
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(key))
    throw new ExecCredentialError("the exec plugin's status.clientKeyData is not a PEM private key");
  return { certificate: cert, key };
}

/** When to run the plugin again: a margin before status.expirationTimestamp; none without one (until invalidated). */
function renewTime(expirationTimestamp: unknown, now: number, what: string): { renewAt?: number } {
  if (expirationTimestamp === undefined || expirationTimestamp === null) return {};
  const expires = typeof expirationTimestamp === 'string' ? Date.parse(expirationTimestamp) : Number.NaN;
  if (Number.isNaN(expires))
    throw new ExecCredentialError("the exec plugin's status.expirationTimestamp is not an RFC 3339 time");
  if (expires <= now)
    throw new ExecCredentialError(`the exec plugin returned ${what} that expired at ${expirationTimestamp as string}`);
  // A credential shorter-lived than the margin is still used once: better than running the plugin for every request.
  return { renewAt: Math.max(expires - EXPIRY_MARGIN_MS, now + Math.min(EXPIRY_MARGIN_MS, expires - now) / 2) };
}
