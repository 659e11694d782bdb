/**
 * Configuration parsed once at start-up from the environment passed in (never read elsewhere), so Lambda,
 * `serve` and tests build the same pipeline from different environments.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { isCompiledTable, loadCompiledRoutingTable } from '../routing/compiled-table.ts';
import { loadRoutingTable, type RoutingTable } from '../routing/routing-table.ts';
import type { Env } from '../kernel/env.ts';
import { fileErrorText } from '../kernel/file-errors.ts';

export type { Env } from '../kernel/env.ts';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function required(env: Env, name: string, what: string): string {
  const value = env[name];
  if (!value) throw new ConfigError(`${name} is not set: it must name ${what}`);
  return value;
}

/**
 * The routing table the deployment bundles (`VAULT_ROLLOUT_ROUTES`, relative to the package root): the compiled
 * JSON `npm run package` writes (no YAML parsed at a cold start), or a YAML table (serve, tests).
 */
export function loadRoutesFromEnv(
  env: Env,
  baseDir = env.LAMBDA_TASK_ROOT ?? process.cwd(),
): { table: RoutingTable; file: string } {
  const configured = required(env, 'VAULT_ROLLOUT_ROUTES', 'the routing table file');
  const file = isAbsolute(configured) ? configured : resolve(baseDir, configured);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the routing table: ${fileErrorText(file, e)}`);
  }
  return { table: isCompiledTable(text) ? loadCompiledRoutingTable(text, file) : loadRoutingTable(text, file), file };
}

/**
 * The values of `VAULT_ROLLOUT_AUTH` (serverless.yml's `httpAuth`) that mean something; see
 * docs/how-to/deploy-to-lambda.md.
 */
const AUTH_SETTINGS: Readonly<Record<string, ReadonlyArray<'hmac' | 'bearer' | 'iam'>>> = {
  hmac: ['hmac'],
  bearer: ['bearer'],
  'hmac,bearer': ['hmac', 'bearer'],
  'bearer,hmac': ['hmac', 'bearer'],
  iam: ['iam'],
};

/**
 * `VAULT_ROLLOUT_AUTH`: which webhook authentication the HTTP function takes. Fails closed: unset means the default
 * `hmac,bearer`; anything but a documented value (an empty string, `iam` mixed with app-level schemes, a typo) is a
 * ConfigError, so the function refuses every request instead of accepting some without credentials.
 */
export function authModes(env: Env): Set<'hmac' | 'bearer' | 'iam'> {
  const value = env.VAULT_ROLLOUT_AUTH;
  if (value === undefined) return new Set(['hmac', 'bearer']);
  const normalized = value
    .split(',')
    .map((m) => m.trim())
    .join(',');
  const modes = Object.hasOwn(AUTH_SETTINGS, normalized) ? AUTH_SETTINGS[normalized] : undefined;
  if (modes === undefined) {
    const why =
      normalized === ''
        ? 'it is empty'
        : /\biam\b/.test(value)
          ? 'iam (the Function URL authenticates the caller) cannot be combined with hmac or bearer'
          : 'it is not one of the documented values';
    throw new ConfigError(
      `VAULT_ROLLOUT_AUTH is not valid: ${why}; use hmac, bearer, hmac,bearer or iam (every request is refused until it is fixed)`,
    );
  }
  return new Set(modes);
}

/**
 * `VAULT_ROLLOUT_VISIBILITY_SECONDS`: the visibility timeout of the messages `serve` and `worker` receive (default 30,
 * as SQS). The workers extend it while they work (a heartbeat every third of it), so it bounds how soon a message
 * held by a worker that died comes back, never how long a rollout may be followed. 3 to 43,200 (SQS's 12 hours).
 */
export function visibilitySecondsFromEnv(env: Env, defaultSeconds = 30): number {
  const raw = env.VAULT_ROLLOUT_VISIBILITY_SECONDS;
  if (raw === undefined || raw === '') return defaultSeconds;
  const seconds = Number(raw);
  if (!Number.isInteger(seconds) || seconds < 3 || seconds > 43_200)
    throw new ConfigError(
      `VAULT_ROLLOUT_VISIBILITY_SECONDS=${raw.slice(0, 20)} must be a whole number of seconds from 3 to 43200`,
    );
  return seconds;
}
