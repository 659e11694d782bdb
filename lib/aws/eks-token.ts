/**
 * The EKS bearer token, made in process exactly as `aws eks get-token` and aws-iam-authenticator make it:
 * `k8s-aws-v1.` + unpadded base64url of a SigV4-presigned STS GetCallerIdentity URL on the regional endpoint that
 * signs the `x-k8s-aws-id: <cluster name>` header. The API server's authenticator replays the URL against STS to
 * learn who signed it, so no secret ever reaches the cluster and no aws CLI is needed in Lambda.
 */
import { HttpRequest } from '@smithy/protocol-http';
import { RefreshingCache } from '../kernel/refreshing-cache.ts';
import type { Clock } from '../kernel/refreshing-cache.ts';
import type { AwsCredentials, AwsCredentialsProvider } from './credentials.ts';
import { sigV4 } from './sigv4.ts';

export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/**
 * X-Amz-Expires as the references send it. STS ignores it (a presigned GetCallerIdentity URL is accepted for
 * 15 minutes after X-Amz-Date), but authenticators 0.3.0 and older reject values above 60.
 */
export const PRESIGN_EXPIRES_SECONDS = 60;
/** STS accepts the URL this long after X-Amz-Date. */
export const TOKEN_LIFETIME_MS = 15 * 60_000;
/** Use a token at most this long, as `aws eks get-token` and client-go do: a minute of cushion before expiry. */
export const TOKEN_REUSE_MS = 14 * 60_000;

export type { AwsCredentials, AwsCredentialsProvider } from './credentials.ts';

export interface EksToken {
  /** The bearer token; never logged. */
  token: string;
  /** Epoch ms of X-Amz-Date. */
  signedAt: number;
  /** Epoch ms when STS stops accepting the token (X-Amz-Date + 15 minutes). */
  expiresAt: number;
  /** Epoch ms after which a new token should be made: 14 minutes, or earlier if the signing credentials expire. */
  refreshAfter: number;
}

export interface EksTokenRequest {
  clusterName: string;
  region: string;
  credentials: AwsCredentials;
  /** Epoch ms; SigV4 keeps whole seconds. */
  now: number;
}

// The order `aws eks get-token` writes them in, so equal inputs give byte-equal tokens.
const QUERY_ORDER = [
  'Action',
  'Version',
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Security-Token',
  'X-Amz-Signature',
] as const;

/** The regional STS host; China regions live in their own partition's domain. */
export function stsHostname(region: string): string {
  return `sts.${region}.${region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com'}`;
}

export async function createEksToken(request: EksTokenRequest): Promise<EksToken> {
  const signedAt = Math.floor(request.now / 1000) * 1000;
  const url = await presignGetCallerIdentity(request, new Date(signedAt));
  const credentialsExpire = request.credentials.expiration?.getTime() ?? Number.POSITIVE_INFINITY;
  return {
    token: EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url'),
    signedAt,
    expiresAt: signedAt + TOKEN_LIFETIME_MS,
    // A presigned URL stops working when the session that signed it ends, whatever X-Amz-Date says.
    refreshAfter: Math.min(signedAt + TOKEN_REUSE_MS, credentialsExpire),
  };
}

async function presignGetCallerIdentity(request: EksTokenRequest, signingDate: Date): Promise<string> {
  const hostname = stsHostname(request.region);
  const signer = sigV4(request.credentials, request.region, 'sts');
  const unsigned = new HttpRequest({
    method: 'GET',
    protocol: 'https:',
    hostname,
    path: '/',
    query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    headers: { host: hostname, [CLUSTER_ID_HEADER]: request.clusterName },
  });
  const signed = await signer.presign(unsigned, { expiresIn: PRESIGN_EXPIRES_SECONDS, signingDate });
  return `https://${hostname}/?${orderedQuery(signed.query ?? {})}`;
}

function orderedQuery(query: HttpRequest['query']): string {
  return QUERY_ORDER.filter((key) => typeof query[key] === 'string')
    .map((key) => `${key}=${rfc3986(query[key] as string)}`)
    .join('&');
}

/** SigV4's URI encoding: everything but unreserved characters, which encodeURIComponent nearly does. */
function rfc3986(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export interface EksTokenKey {
  clusterName: string;
  region: string;
  /** The role the token is signed as; undefined = the base credentials. */
  roleArn?: string;
}

/** Tokens per (region, cluster, role), reused until their refresh time minus the refresh margin. */
export class EksTokenCache {
  readonly #cache: RefreshingCache<EksToken>;
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#cache = new RefreshingCache<EksToken>({ clock, refreshAfterOf: (token) => token.refreshAfter });
  }

  get(key: EksTokenKey, credentials: AwsCredentialsProvider): Promise<EksToken> {
    const cacheKey = JSON.stringify([key.region, key.clusterName, key.roleArn ?? null]);
    return this.#cache.get(cacheKey, '', async () =>
      createEksToken({
        clusterName: key.clusterName,
        region: key.region,
        credentials: await credentials(),
        now: this.#clock(),
      }),
    );
  }
}
