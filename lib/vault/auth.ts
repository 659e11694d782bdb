/**
 * How `reconcile` (and `status`) authenticate to Vault, chosen once from the environment:
 *
 * - token:   VAULT_TOKEN, VAULT_TOKEN_FILE (a file holding it) or VAULT_TOKEN_SSM (an SSM SecureString name);
 * - AppRole: VAULT_ROLE_ID (or VAULT_ROLE_ID_SSM) and VAULT_SECRET_ID (or VAULT_SECRET_ID_SSM, or
 *            VAULT_SECRET_ID_SECRETS_MANAGER, a Secrets Manager secret id), mount VAULT_APPROLE_MOUNT (approle);
 * - AWS IAM: VAULT_AWS_ROLE (the Vault role) — the process's own AWS credentials (in Lambda: its role) sign an
 *            sts:GetCallerIdentity request that Vault's `aws` auth method replays to STS; VAULT_AWS_MOUNT (aws),
 *            VAULT_AWS_HEADER_VALUE (the mount's iam_server_id_header_value, signed as X-Vault-AWS-IAM-Server-ID),
 *            VAULT_AWS_STS_ENDPOINT / VAULT_AWS_STS_REGION (default the global https://sts.amazonaws.com, us-east-1).
 *
 * - Kubernetes: VAULT_K8S_ROLE (the Vault role) — a projected ServiceAccount token for Vault's own audience
 *            (VAULT_K8S_TOKEN_FILE, default /var/run/secrets/vault-rollout/vault/token, where the Helm chart projects
 *            it; read afresh at each login as the kubelet rotates it) sent to Vault's `kubernetes` auth method, which
 *            checks it with the cluster's TokenReview API; VAULT_K8S_MOUNT (kubernetes). A token whose `aud` is not
 *            VAULT_K8S_AUDIENCE (vault) is refused before it is sent: the API-audience token of the pod can patch
 *            workloads, and Vault (or whoever answers at VAULT_ADDR) must not be handed it.
 * - and, when none of these is set, the vault CLI's token file ~/.vault-token (what `vault login` leaves), if present.
 *
 * VAULT_AUTH_METHOD (token | approle | aws | kubernetes) picks one when several are configured; otherwise the one
 * configured is
 * used. Every command (reconcile, status, the relay's event subscription, the reconcile function) authenticates here.
 * Logins are renewed at two thirds of their TTL and repeated when renewal stops extending them
 * (LoginTokenSource); a given token is looked up and renewed the same way (GivenTokenSource). Nothing here logs a
 * token, a secret ID or an AWS credential.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SSMClient } from '@aws-sdk/client-ssm';
import { secretStringValue, ssmParameterValue } from '../aws/parameter-store.ts';
import { sigV4 } from '../aws/sigv4.ts';
import { HttpRequest } from '@smithy/protocol-http';
import type { AwsCredentialsProvider } from '../aws/credentials.ts';
import type { RelayLog } from '../kernel/log.ts';
import {
  AppRoleTokenSource,
  GivenTokenSource,
  LoginTokenSource,
  type LoginRequest,
  type VaultTokenSource,
} from './vault-auth.ts';
import type { VaultRedirectPolicy } from './vault-redirect.ts';

export type Env = Readonly<Record<string, string | undefined>>;

export const VaultAuthMethods = ['token', 'approle', 'aws', 'kubernetes'] as const;

/** Where the Helm chart projects the ServiceAccount token whose audience is Vault's (never the API server's). */
export const VAULT_AUDIENCE_TOKEN_FILE = '/var/run/secrets/vault-rollout/vault/token';
/** The audience that token is for, and that the Vault role checks (`audience` on the role). */
export const DEFAULT_VAULT_AUDIENCE = 'vault';
export type VaultAuthMethod = (typeof VaultAuthMethods)[number];

export class VaultAuthConfigError extends Error {
  override readonly name = 'VaultAuthConfigError';
}

export interface VaultAuthDeps {
  vaultAddr: string;
  log: RelayLog;
  readFile: (path: string) => Promise<string>;
  ssm: () => Pick<SSMClient, 'send'>;
  secretsManager: () => Pick<SecretsManagerClient, 'send'>;
  awsCredentials: () => AwsCredentialsProvider;
  fetch?: typeof fetch;
  redirects?: VaultRedirectPolicy;
}

/** Which method the environment configures (VAULT_AUTH_METHOD, else the one whose variables are set). */
export function vaultAuthMethod(env: Env): VaultAuthMethod {
  const chosen = env.VAULT_AUTH_METHOD;
  if (chosen !== undefined && chosen !== '') {
    if (!(VaultAuthMethods as readonly string[]).includes(chosen))
      throw new VaultAuthConfigError(`VAULT_AUTH_METHOD=${chosen.slice(0, 20)}: use token, approle, aws or kubernetes`);
    return chosen as VaultAuthMethod;
  }
  const configured: VaultAuthMethod[] = [];
  if (env.VAULT_TOKEN || env.VAULT_TOKEN_FILE || env.VAULT_TOKEN_SSM) configured.push('token');
  if (env.VAULT_ROLE_ID || env.VAULT_ROLE_ID_SSM) configured.push('approle');
  if (env.VAULT_AWS_ROLE) configured.push('aws');
  if (env.VAULT_K8S_ROLE) configured.push('kubernetes');
  if (configured.length === 1) return configured[0] as VaultAuthMethod;
  if (configured.length === 0) throw new VaultAuthConfigError(NOTHING_CONFIGURED);
  throw new VaultAuthConfigError(
    `several Vault authentication methods are configured (${configured.join(', ')}): choose one with VAULT_AUTH_METHOD`,
  );
}

const NOTHING_CONFIGURED =
  'no Vault authentication configured: set VAULT_TOKEN (or VAULT_TOKEN_FILE, VAULT_TOKEN_SSM, or log in with the vault CLI, which leaves ~/.vault-token), VAULT_ROLE_ID + VAULT_SECRET_ID (AppRole, each also as *_SSM), VAULT_AWS_ROLE (AWS IAM) or VAULT_K8S_ROLE (Kubernetes)';

/** The vault CLI's token file (~/.vault-token), when no method is configured and it exists. */
async function homeToken(env: Env, deps: VaultAuthDeps): Promise<string | undefined> {
  if (!env.HOME || (env.VAULT_AUTH_METHOD ?? '') !== '') return undefined;
  if (
    env.VAULT_TOKEN ||
    env.VAULT_TOKEN_FILE ||
    env.VAULT_TOKEN_SSM ||
    env.VAULT_ROLE_ID ||
    env.VAULT_ROLE_ID_SSM ||
    env.VAULT_AWS_ROLE ||
    env.VAULT_K8S_ROLE
  )
    return undefined;
  try {
    const token = (await deps.readFile(`${env.HOME.replace(/\/+$/, '')}/.vault-token`)).trim();
    return token === '' ? undefined : token;
  } catch {
    return undefined;
  }
}

async function ssmValue(deps: VaultAuthDeps, name: string): Promise<string> {
  const value = (await ssmParameterValue(deps.ssm(), name))?.trim();
  if (!value) throw new VaultAuthConfigError(`SSM parameter ${name} has no value`);
  return value;
}

async function secretsManagerValue(deps: VaultAuthDeps, id: string): Promise<string> {
  const value = (await secretStringValue(deps.secretsManager(), id))?.trim();
  if (!value) throw new VaultAuthConfigError(`Secrets Manager secret ${id} has no SecretString`);
  return value;
}

/** One credential from the first variable set: the value itself, an SSM parameter, a Secrets Manager secret, a file. */
async function credential(
  env: Env,
  deps: VaultAuthDeps,
  what: string,
  names: { value: string; ssm?: string; secretsManager?: string; file?: string },
): Promise<string> {
  const value = env[names.value];
  if (value) return value.trim();
  const ssm = names.ssm ? env[names.ssm] : undefined;
  if (ssm) return ssmValue(deps, ssm);
  const secret = names.secretsManager ? env[names.secretsManager] : undefined;
  if (secret) return secretsManagerValue(deps, secret);
  const file = names.file ? env[names.file] : undefined;
  if (file) {
    const text = (await deps.readFile(file)).trim();
    if (!text) throw new VaultAuthConfigError(`${names.file}: ${file} is empty`);
    return text;
  }
  throw new VaultAuthConfigError(
    `${what}: set ${[names.value, names.ssm, names.secretsManager, names.file].filter(Boolean).join(' or ')}`,
  );
}

/** What every token source takes from the environment and the dependencies: Vault's address, namespace and fetch. */
function commonOptions(env: Env, deps: VaultAuthDeps) {
  return {
    vaultAddr: deps.vaultAddr,
    log: deps.log,
    ...(env.VAULT_NAMESPACE ? { namespace: env.VAULT_NAMESPACE } : {}),
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
    ...(deps.redirects ? { redirects: deps.redirects } : {}),
  };
}

type CommonOptions = ReturnType<typeof commonOptions>;

/** The token source the environment configures; stop() it when done (it may hold a renewal timer). */
export async function vaultTokenSourceFromEnv(
  env: Env,
  deps: VaultAuthDeps,
): Promise<{ method: VaultAuthMethod; source: VaultTokenSource }> {
  const fromHome = await homeToken(env, deps);
  const method = fromHome === undefined ? vaultAuthMethod(env) : 'token';
  const common = commonOptions(env, deps);
  if (method === 'token')
    return {
      method,
      source: new GivenTokenSource({
        ...common,
        token:
          fromHome ??
          (await credential(env, deps, 'the Vault token', {
            value: 'VAULT_TOKEN',
            ssm: 'VAULT_TOKEN_SSM',
            file: 'VAULT_TOKEN_FILE',
          })),
      }),
    };
  if (method === 'kubernetes') return { method, source: await kubernetesTokenSource(env, deps, common) };
  if (method === 'approle') return { method, source: await appRoleTokenSource(env, deps, common) };
  return { method, source: awsTokenSource(env, deps, common) };
}

/** Logs in with the pod's projected ServiceAccount token, read again for every login. */
async function kubernetesTokenSource(env: Env, deps: VaultAuthDeps, common: CommonOptions): Promise<VaultTokenSource> {
  const role = env.VAULT_K8S_ROLE;
  if (!role)
    throw new VaultAuthConfigError(
      "VAULT_AUTH_METHOD=kubernetes needs VAULT_K8S_ROLE, the role of Vault's kubernetes auth method",
    );
  const tokenFile = env.VAULT_K8S_TOKEN_FILE || VAULT_AUDIENCE_TOKEN_FILE;
  const audience = env.VAULT_K8S_AUDIENCE || DEFAULT_VAULT_AUDIENCE;
  // Read once now, so a pod without its token fails at start-up with the reason.
  await kubernetesJwt(tokenFile, audience, deps);
  const login = async () => {
    const jwt = await kubernetesJwt(tokenFile, audience, deps);
    return kubernetesLoginRequest(role, jwt, env.VAULT_K8S_MOUNT);
  };
  return new LoginTokenSource({ ...common, method: 'Kubernetes', login });
}

async function appRoleTokenSource(env: Env, deps: VaultAuthDeps, common: CommonOptions): Promise<VaultTokenSource> {
  const roleId = await credential(env, deps, 'the AppRole role ID', {
    value: 'VAULT_ROLE_ID',
    ssm: 'VAULT_ROLE_ID_SSM',
  });
  const secretId = await credential(env, deps, 'the AppRole secret ID', {
    value: 'VAULT_SECRET_ID',
    ssm: 'VAULT_SECRET_ID_SSM',
    secretsManager: 'VAULT_SECRET_ID_SECRETS_MANAGER',
  });
  return new AppRoleTokenSource({
    ...common,
    roleId,
    secretId,
    ...(env.VAULT_APPROLE_MOUNT ? { mount: env.VAULT_APPROLE_MOUNT } : {}),
  });
}

/** Logs in with a signed sts:GetCallerIdentity of the process's AWS credentials. */
function awsTokenSource(env: Env, deps: VaultAuthDeps, common: CommonOptions): VaultTokenSource {
  const role = env.VAULT_AWS_ROLE;
  if (!role)
    throw new VaultAuthConfigError("VAULT_AUTH_METHOD=aws needs VAULT_AWS_ROLE, the role of Vault's aws auth method");
  const credentials = deps.awsCredentials();
  const options: AwsIamLoginOptions = {
    role,
    credentials,
    ...(env.VAULT_AWS_MOUNT ? { mount: env.VAULT_AWS_MOUNT } : {}),
    ...(env.VAULT_AWS_HEADER_VALUE ? { serverIdHeaderValue: env.VAULT_AWS_HEADER_VALUE } : {}),
    ...(env.VAULT_AWS_STS_ENDPOINT ? { stsEndpoint: env.VAULT_AWS_STS_ENDPOINT } : {}),
    ...(env.VAULT_AWS_STS_REGION ? { stsRegion: env.VAULT_AWS_STS_REGION } : {}),
  };
  return new LoginTokenSource({ ...common, method: 'AWS IAM', login: () => awsIamLoginRequest(options) });
}

export interface AwsIamLoginOptions {
  /** The role of Vault's aws auth method to log in as. */
  role: string;
  credentials: AwsCredentialsProvider;
  /** The aws auth mount (default `aws`). */
  mount?: string;
  /**
   * The mount's `iam_server_id_header_value`: signed into the request, so it cannot be replayed against another Vault.
   */
  serverIdHeaderValue?: string;
  /** Where the signed request is addressed (default the global endpoint); Vault's `sts_endpoint` must agree. */
  stsEndpoint?: string;
  stsRegion?: string;
  now?: () => number;
}

export const IAM_SERVER_ID_HEADER = 'X-Vault-AWS-IAM-Server-ID';
const GET_CALLER_IDENTITY = 'Action=GetCallerIdentity&Version=2011-06-15';
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

/**
 * The body of `auth/<mount>/login` for Vault's `aws` auth method, type iam: a SigV4-signed sts:GetCallerIdentity
 * request (method, URL, body, headers, each base64), as `vault login -method=aws` builds it. Vault sends it to STS,
 * which answers with the caller's ARN; the secret key never leaves this process.
 */
export async function awsIamLoginRequest(options: AwsIamLoginOptions): Promise<LoginRequest> {
  const endpoint = new URL(options.stsEndpoint ?? 'https://sts.amazonaws.com/');
  const region = options.stsRegion ?? 'us-east-1';
  const signer = sigV4(options.credentials, region, 'sts');
  const headers: Record<string, string> = {
    host: endpoint.host,
    'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
  };
  if (options.serverIdHeaderValue) headers[IAM_SERVER_ID_HEADER] = options.serverIdHeaderValue;
  const request = new HttpRequest({
    method: 'POST',
    protocol: endpoint.protocol,
    hostname: endpoint.hostname,
    ...(endpoint.port ? { port: Number(endpoint.port) } : {}),
    path: endpoint.pathname || '/',
    headers,
    body: GET_CALLER_IDENTITY,
  });
  const signed = await signer.sign(request, { signingDate: new Date(options.now?.() ?? Date.now()) });
  // Vault wants each header as a list of values.
  const signedHeaders = Object.fromEntries(Object.entries(signed.headers).map(([name, value]) => [name, [value]]));
  return {
    path: `auth/${(options.mount ?? 'aws').replace(/^\/+|\/+$/g, '')}/login`,
    body: {
      role: options.role,
      iam_http_request_method: 'POST',
      iam_request_url: b64(endpoint.toString()),
      iam_request_body: b64(GET_CALLER_IDENTITY),
      iam_request_headers: b64(JSON.stringify(signedHeaders)),
    },
  };
}

/** The pod's ServiceAccount token, read afresh for each login: the kubelet replaces it before it expires. */
async function kubernetesJwt(path: string, audience: string, deps: VaultAuthDeps): Promise<string> {
  let text: string;
  try {
    text = await deps.readFile(path);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const why = typeof code === 'string' ? code : 'unreadable';
    throw new VaultAuthConfigError(
      `Kubernetes auth: cannot read the ServiceAccount token ${path} (${why}); ` +
        `run in a pod with a token projected for audience ${audience} there, or set VAULT_K8S_TOKEN_FILE`,
    );
  }
  const jwt = text.trim();
  if (jwt === '') throw new VaultAuthConfigError(`Kubernetes auth: the ServiceAccount token ${path} is empty`);
  const audiences = jwtAudiences(jwt);
  if (!audiences.includes(audience)) {
    const quoted = audiences.slice(0, 3).map((a) => JSON.stringify(a.slice(0, 100)));
    const shown = quoted.length === 0 ? 'none' : quoted.join(', ');
    throw new VaultAuthConfigError(
      `Kubernetes auth: the token ${path} is for audience ${shown}, not ${audience}: ` +
        'a token the Kubernetes API accepts is not sent to Vault; ' +
        `project a ServiceAccount token with audience ${audience} ` +
        `(the Helm chart mounts one at ${VAULT_AUDIENCE_TOKEN_FILE}) ` +
        `and set audience=${audience} on the Vault role (or VAULT_K8S_AUDIENCE to the role's)`,
    );
  }
  return jwt;
}

/** The `aud` claim of a JWT, read without verifying it (Vault verifies it); empty when there is none or no JWT. */
function jwtAudiences(jwt: string): string[] {
  const payload = jwt.split('.')[1];
  if (payload === undefined) return [];
  try {
    const aud = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { aud?: unknown }).aud;
    if (typeof aud === 'string') return [aud];
    return Array.isArray(aud) ? aud.filter((a): a is string => typeof a === 'string') : [];
  } catch {
    return [];
  }
}

/** The body of `auth/<mount>/login` for Vault's `kubernetes` auth method. */
export function kubernetesLoginRequest(role: string, jwt: string, mount = 'kubernetes'): LoginRequest {
  return { path: `auth/${mount.replace(/^\/+|\/+$/g, '')}/login`, body: { role, jwt } };
}
