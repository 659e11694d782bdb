/**
 * An independent SigV4 query-signature check written from the AWS specification with node:crypto only
 * (canonical request -> string to sign -> HMAC key chain), so token tests do not trust the library that signed.
 */
import { createHash, createHmac } from 'node:crypto';

const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const hmac = (key: Buffer | string, text: string): Buffer => createHmac('sha256', key).update(text, 'utf8').digest();

/** The spec's UriEncode: every byte except A-Z a-z 0-9 - _ . ~ as %XY. */
export function uriEncode(value: string): string {
  return [...Buffer.from(value, 'utf8')]
    .map((byte) => {
      const c = String.fromCharCode(byte);
      return /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
}

/** Decodes a `k8s-aws-v1.` token to its presigned URL. */
export function decodeEksToken(token: string): URL {
  return new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString('utf8'));
}

export interface PresignedParts {
  canonicalRequest: string;
  stringToSign: string;
  signature: string;
}

/** Recomputes the X-Amz-Signature a presigned GET URL should carry, given the signed headers' values. */
export function recomputePresignedSignature(
  url: URL,
  headers: Record<string, string>,
  secretAccessKey: string,
): PresignedParts {
  const query = [...url.searchParams.entries()]
    .filter(([name]) => name !== 'X-Amz-Signature')
    .map(([name, value]) => `${uriEncode(name)}=${uriEncode(value)}`)
    .sort();
  const signedHeaders = (url.searchParams.get('X-Amz-SignedHeaders') ?? '').split(';');
  const canonicalHeaders = signedHeaders.map((name) => `${name}:${(headers[name] ?? '').trim()}\n`).join('');
  const canonicalRequest = [
    'GET',
    url.pathname,
    query.join('&'),
    canonicalHeaders,
    signedHeaders.join(';'),
    sha256Hex(''),
  ].join('\n');
  const [, date = '', region = '', service = '', terminator = ''] = (
    url.searchParams.get('X-Amz-Credential') ?? ''
  ).split('/');
  const scope = `${date}/${region}/${service}/${terminator}`;
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    url.searchParams.get('X-Amz-Date') ?? '',
    scope,
    sha256Hex(canonicalRequest),
  ].join('\n');
  const signingKey = [date, region, service, terminator].reduce<Buffer | string>(
    (key, part) => hmac(key, part),
    `AWS4${secretAccessKey}`,
  );
  return {
    canonicalRequest,
    stringToSign,
    signature: createHmac('sha256', signingKey).update(stringToSign, 'utf8').digest('hex'),
  };
}

export interface SignedRequestCheck {
  ok: boolean;
  /** Why not, or the credential scope it was signed for. */
  detail: string;
  accessKeyId?: string;
  region?: string;
  service?: string;
}

/**
 * Verifies a header-signed SigV4 request (Authorization: AWS4-HMAC-SHA256 …), as AWS does for a Function URL with
 * AWS_IAM: recomputes the canonical request from what arrived (method, path, query, the signed headers, the body's
 * SHA-256) and the signature from the secret key of the access key id. `now` bounds X-Amz-Date to ±5 minutes.
 */
export function verifySignedRequest(
  request: { method: string; path: string; headers: Record<string, string | string[] | undefined>; body: Buffer },
  secretFor: (accessKeyId: string) => string | undefined,
  now: number,
): SignedRequestCheck {
  const header = (name: string): string => {
    const value = request.headers[name];
    return Array.isArray(value) ? value.join(',') : (value ?? '');
  };
  const match =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(
      header('authorization'),
    );
  if (!match) return { ok: false, detail: 'no SigV4 Authorization header' };
  const [, accessKeyId = '', date = '', region = '', service = '', signedHeaderList = '', signature = ''] = match;
  const secret = secretFor(accessKeyId);
  if (secret === undefined) return { ok: false, detail: 'unknown access key id' };
  const amzDate = header('x-amz-date');
  const signedAt = Date.parse(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  if (!amzDate.startsWith(date) || !(Math.abs(now - signedAt) <= 5 * 60_000))
    return { ok: false, detail: 'X-Amz-Date missing, not the credential date, or more than 5 minutes off' };
  const payloadHash = createHash('sha256').update(request.body).digest('hex');
  if (header('x-amz-content-sha256') !== '' && header('x-amz-content-sha256') !== payloadHash)
    return { ok: false, detail: 'x-amz-content-sha256 is not the hash of the body' };
  const signedHeaders = signedHeaderList.split(';');
  for (const required of ['host', 'x-amz-date'])
    if (!signedHeaders.includes(required)) return { ok: false, detail: `${required} is not signed` };
  const [rawPath = '', rawQuery = ''] = request.path.split('?');
  const canonicalUri = rawPath
    .split('/')
    .map((segment) => uriEncode(uriEncode(decodeURIComponent(segment))))
    .join('/');
  const canonicalQuery =
    rawQuery === ''
      ? ''
      : [...new URLSearchParams(rawQuery).entries()]
          .map(([k, v]) => `${uriEncode(k)}=${uriEncode(v)}`)
          .sort()
          .join('&');
  const canonicalHeaders = signedHeaders
    .map((name) => `${name}:${header(name).trim().replace(/\s+/g, ' ')}\n`)
    .join('');
  const canonicalRequest = [
    request.method,
    canonicalUri,
    canonicalQuery,
    canonicalHeaders,
    signedHeaderList,
    payloadHash,
  ].join('\n');
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const signingKey = [date, region, service, 'aws4_request'].reduce<Buffer | string>(
    (key, part) => hmac(key, part),
    `AWS4${secret}`,
  );
  const expected = createHmac('sha256', signingKey).update(stringToSign, 'utf8').digest('hex');
  return expected === signature
    ? { ok: true, detail: scope, accessKeyId, region, service }
    : { ok: false, detail: 'the signature does not match' };
}
