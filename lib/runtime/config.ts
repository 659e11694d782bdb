/**
 * Configuration parsed once at start-up from the environment passed in (never read elsewhere), so Lambda,
 * `serve` and tests build the same pipeline from different environments.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { loadRoutingTable, type RoutingTable } from '../routing/routing-table.ts';

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function required(env: Env, name: string, what: string): string {
  const value = env[name];
  if (!value) throw new ConfigError(`${name} is not set: it must name ${what}`);
  return value;
}

/** The routing table the deployment bundles (`VAULT_ROLLOUT_ROUTES`, relative to the package root). */
export function loadRoutesFromEnv(env: Env, baseDir = env.LAMBDA_TASK_ROOT ?? process.cwd()): { table: RoutingTable; file: string } {
  const configured = required(env, 'VAULT_ROLLOUT_ROUTES', 'the routing table file');
  const file = isAbsolute(configured) ? configured : resolve(baseDir, configured);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the routing table ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  return { table: loadRoutingTable(text, file), file };
}

/** `VAULT_ROLLOUT_AUTH`: which webhook authentication the HTTP function takes (`hmac`, `bearer`, `iam`). */
export function authModes(env: Env): Set<'hmac' | 'bearer' | 'iam'> {
  const modes = (env.VAULT_ROLLOUT_AUTH ?? 'hmac,bearer').split(',').map((m) => m.trim()).filter(Boolean);
  for (const m of modes) if (m !== 'hmac' && m !== 'bearer' && m !== 'iam') throw new ConfigError(`VAULT_ROLLOUT_AUTH: unknown mode "${m}"; use hmac, bearer or iam, comma-separated`);
  return new Set(modes as Array<'hmac' | 'bearer' | 'iam'>);
}
