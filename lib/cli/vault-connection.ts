/**
 * How every command reaches Vault, read once from the environment: TLS (VAULT_CACERT, VAULT_CAPATH,
 * VAULT_CLIENT_CERT/KEY, VAULT_SKIP_VERIFY; lib/vault/vault-tls.ts) and the one authentication path of
 * lib/vault/auth.ts (token, ~/.vault-token, AppRole, AWS IAM, Kubernetes). `reconcile`, `status` and the relay's
 * event subscription all come through here, so they accept the same variables.
 */
import { readdir, readFile } from 'node:fs/promises';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SSMClient } from '@aws-sdk/client-ssm';
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import type { RelayLog } from '../kernel/log.ts';
import { vaultTokenSourceFromEnv, type VaultAuthMethod } from '../vault/auth.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import type { VaultRedirectPolicy } from '../vault/vault-redirect.ts';
import { tlsFetch, vaultTlsFromEnv, type VaultTls } from '../vault/vault-tls.ts';
import type { CliIo } from './io.ts';

export interface VaultConnection {
  method: VaultAuthMethod;
  auth: VaultTokenSource;
  /** A fetch with the environment's TLS settings; undefined: Node's own. */
  fetch?: typeof fetch;
  tls?: VaultTls;
}

export async function cliVaultConnection(
  io: CliIo,
  options: { vaultAddr: string; log: RelayLog; redirects?: VaultRedirectPolicy; namespace?: string },
): Promise<VaultConnection> {
  const tls = await vaultTlsFromEnv(io.env, {
    readFile: (f) => readFile(f, 'utf8'),
    readDir: (d) => readdir(d),
    log: options.log,
  });
  const fetchImpl = tls === undefined ? undefined : tlsFetch(tls);
  const region = io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  const env = options.namespace === undefined ? io.env : { ...io.env, VAULT_NAMESPACE: options.namespace };
  const { method, source } = await vaultTokenSourceFromEnv(env, {
    vaultAddr: options.vaultAddr,
    log: options.log,
    ...(options.redirects ? { redirects: options.redirects } : {}),
    ...(fetchImpl ? { fetch: fetchImpl } : {}),
    readFile: (f) => readFile(f, 'utf8'),
    ssm: () => new SSMClient(region ? { region } : {}),
    secretsManager: () => new SecretsManagerClient(region ? { region } : {}),
    awsCredentials: () => fromNodeProviderChain(),
  });
  return { method, auth: source, ...(fetchImpl ? { fetch: fetchImpl } : {}), ...(tls ? { tls } : {}) };
}
