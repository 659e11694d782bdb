import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  createEksToken,
  EksTokenCache,
  stsHostname,
  TOKEN_LIFETIME_MS,
  TOKEN_REUSE_MS,
} from '../../../lib/aws/eks-token.ts';
import type { AwsCredentials } from '../../../lib/aws/eks-token.ts';
import { decodeEksToken, recomputePresignedSignature } from './sigv4-reference.ts';

// The AWS SigV4 test suite's example key pair and date.
const ACCESS_KEY_ID = 'AKIDEXAMPLE';
const SECRET_ACCESS_KEY = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const CLOCK = Date.parse('2015-08-30T12:36:00Z');
const SESSION_TOKEN =
  'AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==';
const longTerm: AwsCredentials = { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY };

// Parameter names and order of aws-iam-authenticator's whitelist and of `aws eks get-token` output.
const REFERENCE_PARAMETERS = [
  'Action',
  'Version',
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Signature',
];

interface GoldenTokens {
  source: string;
  clock: string;
  clusterName: string;
  accessKeyId: string;
  secretAccessKey: string;
  cases: { name: string; region: string; sessionToken: string | null; token: string }[];
}
const golden = JSON.parse(
  readFileSync(new URL('./fixtures/awscli-golden-tokens.json', import.meta.url), 'utf8'),
) as GoldenTokens;

describe('createEksToken', () => {
  it('is k8s-aws-v1. + unpadded base64url of a presigned regional STS GetCallerIdentity URL', async () => {
    const { token } = await createEksToken({
      clusterName: 'prod-eu',
      region: 'eu-west-1',
      credentials: longTerm,
      now: CLOCK,
    });

    expect(token.startsWith('k8s-aws-v1.')).toBe(true);
    expect(token.slice('k8s-aws-v1.'.length)).toMatch(/^[A-Za-z0-9_-]+$/); // base64url, no "=" padding
    const url = decodeEksToken(token);
    expect(url.origin).toBe('https://sts.eu-west-1.amazonaws.com');
    expect(url.pathname).toBe('/');
    expect([...url.searchParams.keys()]).toEqual(REFERENCE_PARAMETERS);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      Action: 'GetCallerIdentity',
      Version: '2011-06-15',
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': 'AKIDEXAMPLE/20150830/eu-west-1/sts/aws4_request',
      'X-Amz-Date': '20150830T123600Z',
      'X-Amz-Expires': '60',
      'X-Amz-SignedHeaders': 'host;x-k8s-aws-id',
    });
    expect(url.search).toContain('X-Amz-SignedHeaders=host%3Bx-k8s-aws-id');
  });

  it('carries a SigV4 signature that verifies when recomputed from the spec, over host and x-k8s-aws-id', async () => {
    const { token } = await createEksToken({
      clusterName: 'prod-eu',
      region: 'eu-west-1',
      credentials: longTerm,
      now: CLOCK,
    });
    const url = decodeEksToken(token);

    const expected = recomputePresignedSignature(url, { host: url.host, 'x-k8s-aws-id': 'prod-eu' }, SECRET_ACCESS_KEY);
    expect(url.searchParams.get('X-Amz-Signature')).toBe(expected.signature);
    // The same URL presented for another cluster does not verify: the cluster name is signed.
    const forOtherCluster = recomputePresignedSignature(
      url,
      { host: url.host, 'x-k8s-aws-id': 'prod-us' },
      SECRET_ACCESS_KEY,
    );
    expect(url.searchParams.get('X-Amz-Signature')).not.toBe(forOtherCluster.signature);
    expect(expected.canonicalRequest.split('\n').slice(3, 6)).toEqual([
      'host:sts.eu-west-1.amazonaws.com',
      'x-k8s-aws-id:prod-eu',
      '',
    ]);
  });

  it('puts the session token of session credentials in the URL, signed', async () => {
    const credentials = { ...longTerm, sessionToken: SESSION_TOKEN };
    const { token } = await createEksToken({ clusterName: 'prod-eu', region: 'us-east-1', credentials, now: CLOCK });
    const url = decodeEksToken(token);

    expect(url.searchParams.get('X-Amz-Security-Token')).toBe(SESSION_TOKEN);
    expect([...url.searchParams.keys()]).toEqual([
      ...REFERENCE_PARAMETERS.slice(0, -1),
      'X-Amz-Security-Token',
      'X-Amz-Signature',
    ]);
    const expected = recomputePresignedSignature(url, { host: url.host, 'x-k8s-aws-id': 'prod-eu' }, SECRET_ACCESS_KEY);
    expect(url.searchParams.get('X-Amz-Signature')).toBe(expected.signature);
  });

  it.each(golden.cases)(
    'equals, byte for byte, the token of $source: $name',
    async ({ region, sessionToken, token }) => {
      const credentials = {
        accessKeyId: golden.accessKeyId,
        secretAccessKey: golden.secretAccessKey,
        sessionToken: sessionToken ?? undefined,
      };
      const made = await createEksToken({
        clusterName: golden.clusterName,
        region,
        credentials,
        now: Date.parse(golden.clock),
      });
      expect(made.token).toBe(token);
    },
  );

  it('expires 15 minutes after X-Amz-Date and asks to be replaced after 14', async () => {
    const made = await createEksToken({
      clusterName: 'c',
      region: 'us-east-1',
      credentials: longTerm,
      now: CLOCK + 999,
    });
    expect(made.signedAt).toBe(CLOCK); // SigV4 dates have whole seconds
    expect(made.expiresAt).toBe(CLOCK + TOKEN_LIFETIME_MS);
    expect(made.refreshAfter).toBe(CLOCK + TOKEN_REUSE_MS);
  });

  it('asks to be replaced when the signing session ends, if that is sooner', async () => {
    const credentials = { ...longTerm, sessionToken: 's', expiration: new Date(CLOCK + 5 * 60_000) };
    const made = await createEksToken({ clusterName: 'c', region: 'us-east-1', credentials, now: CLOCK });
    expect(made.refreshAfter).toBe(CLOCK + 5 * 60_000);
  });
});

describe('stsHostname', () => {
  it.each([
    ['us-east-1', 'sts.us-east-1.amazonaws.com'],
    ['eu-central-2', 'sts.eu-central-2.amazonaws.com'],
    ['cn-north-1', 'sts.cn-north-1.amazonaws.com.cn'],
  ])('%s -> %s', (region, host) => expect(stsHostname(region)).toBe(host));
});

describe('EksTokenCache', () => {
  const key = { clusterName: 'prod-eu', region: 'eu-west-1' };

  it('reuses a token per (cluster, role) until a minute before its 14 minutes are up', async () => {
    let now = CLOCK;
    let loads = 0;
    const cache = new EksTokenCache(() => now);
    const credentials = async () => {
      loads += 1;
      return longTerm;
    };

    const first = await cache.get(key, credentials);
    now += 12 * 60_000;
    expect((await cache.get(key, credentials)).token).toBe(first.token);
    expect(loads).toBe(1);
    now = first.refreshAfter - 60_000;
    const second = await cache.get(key, credentials);
    expect(second.token).not.toBe(first.token);
    expect(second.signedAt).toBe(now);
    expect(loads).toBe(2);
  });

  it('keeps tokens for different roles and clusters apart', async () => {
    const cache = new EksTokenCache(() => CLOCK);
    const credentials = async () => longTerm;
    const plain = await cache.get(key, credentials);
    const withRole = await cache.get({ ...key, roleArn: 'arn:aws:iam::111122223333:role/r' }, async () => ({
      ...longTerm,
      accessKeyId: 'ASIAROLE',
    }));
    const otherCluster = await cache.get({ ...key, clusterName: 'prod-us' }, credentials);
    expect(new Set([plain.token, withRole.token, otherCluster.token]).size).toBe(3);
    expect(decodeEksToken(withRole.token).searchParams.get('X-Amz-Credential')).toMatch(/^ASIAROLE\//);
  });
});
