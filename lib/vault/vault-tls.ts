/**
 * TLS to Vault as the vault CLI reads it from the environment: VAULT_CACERT (a PEM file) or VAULT_CAPATH (a folder of
 * PEM files) instead of the system CAs, VAULT_CLIENT_CERT + VAULT_CLIENT_KEY for Vault's cert auth or a mutual-TLS
 * listener, VAULT_SKIP_VERIFY (warned about on every start: anyone on the path can then read the token).
 *
 * Without any of them, Node's defaults stand (system CAs plus NODE_EXTRA_CA_CERTS) and no fetch is built.
 * The key is never logged; errors name the variable and the file.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { RelayLog } from '../kernel/log.ts';

export interface VaultTls {
  /** PEM certificates that replace the system CAs; undefined: Node's defaults. */
  ca?: string[];
  cert?: string;
  key?: string;
  rejectUnauthorized: boolean;
}

export class VaultTlsConfigError extends Error {
  override readonly name = 'VaultTlsConfigError';
}

export interface VaultTlsDeps {
  readFile: (path: string) => Promise<string>;
  readDir: (path: string) => Promise<string[]>;
  log: Pick<RelayLog, 'warn'>;
}

const truthy = (value: string | undefined): boolean => value !== undefined && /^(1|t|true|yes)$/i.test(value.trim());

/** The TLS settings the environment asks for, or undefined when it asks for none. */
export async function vaultTlsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  deps: VaultTlsDeps,
): Promise<VaultTls | undefined> {
  const {
    VAULT_CACERT: caCert,
    VAULT_CAPATH: caPath,
    VAULT_CLIENT_CERT: clientCert,
    VAULT_CLIENT_KEY: clientKey,
  } = env;
  const skipVerify = truthy(env.VAULT_SKIP_VERIFY);
  if (!caCert && !caPath && !clientCert && !clientKey && !skipVerify) return undefined;
  const read = async (variable: string, path: string): Promise<string> => {
    try {
      return await deps.readFile(path);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw new VaultTlsConfigError(
        `${variable}: cannot read ${path} (${typeof code === 'string' ? code : 'unreadable'})`,
      );
    }
  };
  const tls: VaultTls = { rejectUnauthorized: !skipVerify };
  if (caCert) tls.ca = [await read('VAULT_CACERT', caCert)];
  else if (caPath) {
    let names: string[];
    try {
      names = (await deps.readDir(caPath)).filter((n) => /\.(pem|crt)$/i.test(n)).sort();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw new VaultTlsConfigError(
        `VAULT_CAPATH: cannot list ${caPath} (${typeof code === 'string' ? code : 'unreadable'})`,
      );
    }
    if (names.length === 0) throw new VaultTlsConfigError(`VAULT_CAPATH: ${caPath} holds no .pem or .crt file`);
    tls.ca = await Promise.all(names.map((n) => read('VAULT_CAPATH', join(caPath, n))));
  }
  if (Boolean(clientCert) !== Boolean(clientKey))
    throw new VaultTlsConfigError('VAULT_CLIENT_CERT and VAULT_CLIENT_KEY go together: set both, or neither');
  if (clientCert && clientKey) {
    tls.cert = await read('VAULT_CLIENT_CERT', clientCert);
    tls.key = await read('VAULT_CLIENT_KEY', clientKey);
  }
  if (skipVerify)
    deps.log.warn(
      "VAULT_SKIP_VERIFY is set: the Vault server's certificate is NOT verified, so anyone on the network path can pose as Vault and take the Vault token; set VAULT_CACERT instead",
      {},
    );
  return tls;
}

/**
 * A fetch over node:https with these TLS settings, for vaultRequest (which never asks it to follow a redirect: it
 * gets the 3xx answer and decides itself).
 */
export function tlsFetch(tls: VaultTls): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const headers = new Headers(init?.headers);
      const body = init?.body === undefined || init.body === null ? undefined : String(init.body);
      if (body !== undefined) headers.set('content-length', String(Buffer.byteLength(body)));
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = send(
        url,
        {
          method: init?.method ?? 'GET',
          headers: Object.fromEntries(headers.entries()),
          ...(url.protocol === 'https:'
            ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized }
            : {}),
          ...(init?.signal ? { signal: init.signal } : {}),
        },
        (res) => {
          const responseHeaders = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined) continue;
            for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
          }
          const status = res.statusCode ?? 0;
          const noBody = status === 204 || status === 304 || init?.method === 'HEAD';
          resolve(
            new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
              status,
              headers: responseHeaders,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
}

/** The same settings as ws / https.request options (the relay's event subscription). */
export const tlsRequestOptions = (
  tls: VaultTls | undefined,
): { ca?: string[]; cert?: string; key?: string; rejectUnauthorized?: boolean } =>
  tls === undefined
    ? {}
    : {
        ...(tls.ca ? { ca: tls.ca } : {}),
        ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}),
        rejectUnauthorized: tls.rejectUnauthorized,
      };
