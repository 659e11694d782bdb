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
export function recomputePresignedSignature(url: URL, headers: Record<string, string>, secretAccessKey: string): PresignedParts {
  const query = [...url.searchParams.entries()]
    .filter(([name]) => name !== 'X-Amz-Signature')
    .map(([name, value]) => `${uriEncode(name)}=${uriEncode(value)}`)
    .sort();
  const signedHeaders = (url.searchParams.get('X-Amz-SignedHeaders') ?? '').split(';');
  const canonicalHeaders = signedHeaders.map((name) => `${name}:${(headers[name] ?? '').trim()}\n`).join('');
  const canonicalRequest = ['GET', url.pathname, query.join('&'), canonicalHeaders, signedHeaders.join(';'), sha256Hex('')].join('\n');
  const [, date = '', region = '', service = '', terminator = ''] = (url.searchParams.get('X-Amz-Credential') ?? '').split('/');
  const scope = `${date}/${region}/${service}/${terminator}`;
  const stringToSign = ['AWS4-HMAC-SHA256', url.searchParams.get('X-Amz-Date') ?? '', scope, sha256Hex(canonicalRequest)].join('\n');
  const signingKey = [date, region, service, terminator].reduce<Buffer | string>((key, part) => hmac(key, part), `AWS4${secretAccessKey}`);
  return { canonicalRequest, stringToSign, signature: createHmac('sha256', signingKey).update(stringToSign, 'utf8').digest('hex') };
}
