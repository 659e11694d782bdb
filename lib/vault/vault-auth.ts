/**
 * The Vault token the event subscriber (and reconcile, lib/vault/auth.ts) presents: a given one (`VAULT_TOKEN`, looked
 * up and renewed while it is renewable), or
 * a login — AppRole (`VAULT_ROLE_ID` + `VAULT_SECRET_ID`), AWS IAM — that is renewed (`auth/token/renew-self`) at two
 * thirds of its TTL and
 * replaced by a new login when renewal fails or no longer extends it (max TTL reached). The token never appears
 * in logs.
 */
import { abortableSleep, backoffDelayMs, type Sleep } from '../kernel/backoff.ts';
import type { RelayLog } from '../kernel/log.ts';
import { vaultErrors, vaultRequest, VaultRequestError } from './vault-request.ts';
import type { VaultRedirectPolicy } from './vault-redirect.ts';

export interface VaultTokenSource {
  /** A valid token, logging in first when needed. Rejects only once stopped. */
  token(): Promise<string>;
  /** Vault refused the token (401/403): the next token() logs in again where possible. */
  invalidate(): void;
  stop(): void;
}

/** A given token that Vault refuses or that has expired: only a new token helps, so this is not retried. */
export class VaultTokenUnusableError extends Error {
  override readonly name = 'VaultTokenUnusableError';
}

/** A token used exactly as given, never looked up or renewed (tests, fakes). */
export function staticTokenSource(token: string): VaultTokenSource {
  return { token: () => Promise.resolve(token), invalidate: () => undefined, stop: () => undefined };
}

/** A login request: `auth/<mount>/login` with its body (and headers), built afresh for every login. */
export interface LoginRequest {
  path: string;
  body: object;
  headers?: Record<string, string>;
}

export interface LoginOptions {
  vaultAddr: string;
  /** The auth method's name, for logs (`AppRole`, `AWS IAM`). */
  method: string;
  /** Builds the login request (an AWS IAM login signs a fresh one each time), or yields a given token's auth. */
  login: () => Promise<LoginRequest | VaultAuth>;
  /** `X-Vault-Namespace` for Enterprise namespaces. */
  namespace?: string;
  log: RelayLog;
  fetch?: typeof fetch;
  sleep?: Sleep;
  random?: () => number;
  /** When to renew a token with this TTL (default: after two thirds of it). */
  renewDelayMs?: (ttlSeconds: number) => number;
  /** A renewal that grants less than this is not worth keeping: log in again (default 10 s). */
  minRenewSeconds?: number;
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Where a redirect may lead (same host by default; never https to http). */
  redirects?: VaultRedirectPolicy;
}

export interface VaultAuth {
  client_token: string;
  lease_duration: number;
  renewable: boolean;
}

export interface AppRoleOptions extends Omit<LoginOptions, 'method' | 'login'> {
  roleId: string;
  secretId: string;
  /** The AppRole mount (default `approle`). */
  mount?: string;
}

/**
 * A token from a login (AppRole, AWS IAM...), renewed at two thirds of its TTL and replaced by a new login when
 * renewal fails or no longer extends it.
 */
export class LoginTokenSource implements VaultTokenSource {
  readonly #options: LoginOptions;
  readonly #sleep: Sleep;
  readonly #stopping = new AbortController();
  #token: string | undefined;
  #login: Promise<string> | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  /** Counts logins, so a renewal scheduled for a replaced token does nothing. */
  #generation = 0;

  constructor(options: LoginOptions) {
    this.#options = options;
    this.#sleep = options.sleep ?? abortableSleep;
  }

  token(): Promise<string> {
    if (this.#stopping.signal.aborted) return Promise.reject(new Error('the Vault token source is stopped'));
    if (this.#token !== undefined) return Promise.resolve(this.#token);
    this.#login ??= this.#loginUntilDone().finally(() => (this.#login = undefined));
    return this.#login;
  }

  invalidate(): void {
    this.#token = undefined;
    clearTimeout(this.#renewTimer);
  }

  stop(): void {
    this.#stopping.abort();
    this.invalidate();
  }

  async #loginUntilDone(): Promise<string> {
    const { log, method } = this.#options;
    for (let attempt = 1; ; attempt++) {
      try {
        const request = await this.#options.login();
        const given = 'client_token' in request;
        const auth = given ? request : await this.#call(request.path, request.body, undefined, request.headers);
        this.#accept(auth);
        if (!given)
          log.info(`logged in to Vault with ${method}`, { ttlSeconds: auth.lease_duration, renewable: auth.renewable });
        return auth.client_token;
      } catch (error) {
        if (this.#stopping.signal.aborted) throw new Error('the Vault token source is stopped', { cause: error });
        if (error instanceof VaultTokenUnusableError) throw error;
        const delay = backoffDelayMs(
          attempt,
          this.#options.retryBaseMs ?? 1000,
          this.#options.retryCapMs ?? 60_000,
          this.#options.random,
        );
        log.error(`${method} login failed: retrying`, { error: (error as Error).message, attempt, retryInMs: delay });
        await this.#sleep(delay, this.#stopping.signal);
      }
    }
  }

  #accept(auth: VaultAuth): void {
    this.#token = auth.client_token;
    const generation = ++this.#generation;
    clearTimeout(this.#renewTimer);
    if (!auth.renewable || auth.lease_duration <= 0) return;
    const delay = (this.#options.renewDelayMs ?? ((ttl) => (ttl * 1000 * 2) / 3))(auth.lease_duration);
    this.#renewTimer = setTimeout(() => void this.#renew(generation), delay);
    this.#renewTimer.unref();
  }

  async #renew(generation: number): Promise<void> {
    const token = this.#token;
    if (generation !== this.#generation || token === undefined || this.#stopping.signal.aborted) return;
    const { log } = this.#options;
    try {
      const auth = await this.#call('auth/token/renew-self', {}, token);
      if (generation !== this.#generation) return;
      if (auth.lease_duration < (this.#options.minRenewSeconds ?? 10))
        throw new VaultRequestError(`renewal granted only ${auth.lease_duration} s (max TTL reached)`);
      this.#accept({ ...auth, client_token: auth.client_token || token });
      log.info('renewed the Vault token', { ttlSeconds: auth.lease_duration });
    } catch (error) {
      if (generation !== this.#generation || this.#stopping.signal.aborted) return;
      log.warn(
        `cannot renew the Vault token: ${this.#options.method === GIVEN ? 'looking it up again' : 'logging in again'}`,
        { error: (error as Error).message },
      );
      this.invalidate();
      await this.token().catch(() => undefined);
    }
  }

  async #call(path: string, body: object, token?: string, headers?: Record<string, string>): Promise<VaultAuth> {
    const { status, text } = await vaultRequest({
      vaultAddr: this.#options.vaultAddr,
      method: 'POST',
      path,
      body,
      ...(headers ? { headers } : {}),
      ...(token !== undefined ? { token } : {}),
      ...(this.#options.namespace ? { namespace: this.#options.namespace } : {}),
      ...(this.#options.fetch ? { fetch: this.#options.fetch } : {}),
      ...(this.#options.redirects ? { redirects: this.#options.redirects } : {}),
      signal: this.#stopping.signal,
    });
    // Vault's `errors` name the problem ("invalid role or secret ID"), never a credential.
    if (status < 200 || status >= 300)
      throw new VaultRequestError(`${path}: HTTP ${status}${vaultErrors(text) ? `: ${vaultErrors(text)}` : ''}`, {
        status,
      });
    const auth = (JSON.parse(text) as { auth?: Partial<VaultAuth> }).auth;
    if (!auth || typeof auth.client_token !== 'string' || typeof auth.lease_duration !== 'number')
      throw new VaultRequestError(`${path}: the answer carries no auth block`);
    return { client_token: auth.client_token, lease_duration: auth.lease_duration, renewable: auth.renewable === true };
  }
}

/** AppRole: `auth/<mount>/login` with the role ID and secret ID. */
export class AppRoleTokenSource extends LoginTokenSource {
  constructor({ roleId, secretId, mount = 'approle', ...options }: AppRoleOptions) {
    super({
      ...options,
      method: 'AppRole',
      login: () => Promise.resolve({ path: `auth/${mount}/login`, body: { role_id: roleId, secret_id: secretId } }),
    });
  }
}

const GIVEN = 'a given token';

export interface GivenTokenOptions extends Omit<LoginOptions, 'method' | 'login'> {
  /** VAULT_TOKEN, a token file's or an SSM SecureString's content. */
  token: string;
  now?: () => number;
}

/**
 * A given token (VAULT_TOKEN, a token file, SSM), looked up (`auth/token/lookup-self`: ttl, renewable, expire_time)
 * on first use and then renewed like a login's token; a root or non-renewable token is used as is. Its "login" is
 * the lookup, so a failed renewal looks it up again, and a token Vault refuses or past its expiry rejects with
 * VaultTokenUnusableError instead of being retried.
 */
export class GivenTokenSource extends LoginTokenSource {
  constructor({ token, now = Date.now, ...options }: GivenTokenOptions) {
    let toldNotRenewable = false;
    super({
      // No new login can follow a short renewal, so keep whatever Vault grants until the token expires.
      minRenewSeconds: 0,
      ...options,
      method: GIVEN,
      login: async () => {
        const { status, text } = await vaultRequest({
          vaultAddr: options.vaultAddr,
          method: 'GET',
          path: 'auth/token/lookup-self',
          token,
          ...(options.namespace ? { namespace: options.namespace } : {}),
          ...(options.fetch ? { fetch: options.fetch } : {}),
          ...(options.redirects ? { redirects: options.redirects } : {}),
        });
        if (status === 401 || status === 403)
          throw new VaultTokenUnusableError(
            `Vault refuses the token (auth/token/lookup-self: HTTP ${status}): the token has expired or was revoked (or lacks the default policy's lookup-self); supply a new token`,
          );
        if (status < 200 || status >= 300)
          throw new VaultRequestError(
            `auth/token/lookup-self: HTTP ${status}${vaultErrors(text) ? `: ${vaultErrors(text)}` : ''}`,
            { status },
          );
        const data =
          (JSON.parse(text) as { data?: { ttl?: unknown; renewable?: unknown; expire_time?: unknown } }).data ?? {};
        const ttl = typeof data.ttl === 'number' ? data.ttl : 0;
        const expires = typeof data.expire_time === 'string' ? Date.parse(data.expire_time) : Number.NaN;
        if (ttl > 0 && expires <= now())
          throw new VaultTokenUnusableError(
            `the Vault token expired at ${data.expire_time as string}; supply a new token`,
          );
        const renewable = data.renewable === true && ttl > 0;
        if (!renewable && !toldNotRenewable) {
          toldNotRenewable = true;
          options.log.info('the Vault token is not renewable (or has no TTL): using it without renewal', {
            ttlSeconds: ttl,
            renewable: data.renewable === true,
          });
        }
        return { client_token: token, lease_duration: ttl, renewable };
      },
    });
  }
}
