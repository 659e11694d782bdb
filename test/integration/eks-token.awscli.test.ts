/**
 * The second reference: the real `aws eks get-token` of Debian's awscli package, run now. It is installed here when
 * missing (apt-get, as root); when that is impossible the test fails and says why, it never skips. Presigning is
 * local, so the CLI runs with no network: in an empty network namespace when we are root, and always with the
 * instance metadata service off and every proxy pointing at a closed port, so any request would fail the run.
 * The install runs inside each test (once), not in a hook, so a missing CLI is a failed test, never a skipped one.
 * In the integration project because it may install a package: the unit project installs nothing (npm run test:unit).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createEksToken } from '../../lib/aws/eks-token.ts';
import { decodeEksToken, recomputePresignedSignature } from '../unit/aws/sigv4-reference.ts';

const AWS = '/usr/bin/aws';
const credentials = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'FwoGZXIvYXdzEXAMPLE/session+token=',
};

function run(command: string, args: string[]): { ok: boolean; output: string } {
  const result = spawnSync(command, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return {
    ok: result.status === 0,
    output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error?.message ?? ''}`,
  };
}

/** Installs Debian's awscli when /usr/bin/aws is missing; throws a message that says what to do otherwise. */
function ensureDebianAwscli(): string {
  if (!existsSync(AWS)) {
    const steps: string[] = [];
    for (const [command, args] of [
      ['apt-get', ['update']],
      ['apt-get', ['install', '-y', 'awscli']],
    ] as const) {
      const { ok, output } = run(command, [...args]);
      steps.push(`$ ${command} ${args.join(' ')}\n${output.slice(-800)}`);
      if (!ok) break;
    }
    if (!existsSync(AWS)) {
      throw new Error(
        `Debian's awscli is required for this reference test and could not be installed; run \`apt-get install -y awscli\` as root.\n${steps.join('\n')}`,
      );
    }
  }
  const version = run('dpkg-query', ['-W', '-f=${Version}', 'awscli']);
  if (!version.ok) throw new Error(`${AWS} exists but is not from Debian's awscli package: ${version.output}`);
  return version.output;
}

function awsEksGetToken(clusterName: string, region: string): string {
  const env = {
    PATH: '/usr/bin:/bin',
    HOME: '/nonexistent',
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    AWS_SESSION_TOKEN: credentials.sessionToken,
    AWS_REGION: region,
    AWS_EC2_METADATA_DISABLED: 'true',
    HTTPS_PROXY: 'http://127.0.0.1:9',
    HTTP_PROXY: 'http://127.0.0.1:9',
  };
  const args = ['eks', 'get-token', '--cluster-name', clusterName, '--output', 'json'];
  const isolated = process.getuid?.() === 0 && existsSync('/usr/bin/unshare');
  const stdout = isolated
    ? execFileSync('/usr/bin/unshare', ['-n', AWS, ...args], { env, encoding: 'utf8' })
    : execFileSync(AWS, args, { env, encoding: 'utf8' });
  const parsed = JSON.parse(stdout) as { kind: string; status: { token: string; expirationTimestamp: string } };
  expect(parsed.kind).toBe('ExecCredential');
  return parsed.status.token;
}

describe('EKS token against `aws eks get-token` (Debian awscli)', () => {
  let version: string | undefined;
  it.each([
    ['prod-eu', 'eu-west-1'],
    ['vault-rollout-test', 'us-east-1'],
  ])(
    "cluster %s in %s: same host, parameters, signed headers, expiry and, at the CLI's own X-Amz-Date, the same token",
    async (clusterName, region) => {
      version ??= ensureDebianAwscli();
      const reference = awsEksGetToken(clusterName, region);
      const referenceUrl = decodeEksToken(reference);
      const signedAt = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(
        referenceUrl.searchParams.get('X-Amz-Date') ?? '',
      );
      expect(signedAt, `awscli ${version} gave no X-Amz-Date`).not.toBeNull();
      const [, y, mo, d, h, mi, s] = signedAt ?? [];
      const ours = await createEksToken({
        clusterName,
        region,
        credentials,
        now: Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)),
      });
      const oursUrl = decodeEksToken(ours.token);

      expect(oursUrl.host).toBe(referenceUrl.host);
      expect(oursUrl.host).toBe(`sts.${region}.amazonaws.com`);
      expect([...oursUrl.searchParams.keys()]).toEqual([...referenceUrl.searchParams.keys()]);
      expect(oursUrl.searchParams.get('X-Amz-SignedHeaders')).toBe(
        referenceUrl.searchParams.get('X-Amz-SignedHeaders'),
      );
      expect(oursUrl.searchParams.get('X-Amz-Expires')).toBe(referenceUrl.searchParams.get('X-Amz-Expires'));
      expect(ours.token).toBe(reference);
      // And the CLI's own signature verifies under the spec, so both agree with SigV4, not only with each other.
      const recomputed = recomputePresignedSignature(
        referenceUrl,
        { host: referenceUrl.host, 'x-k8s-aws-id': clusterName },
        credentials.secretAccessKey,
      );
      expect(referenceUrl.searchParams.get('X-Amz-Signature')).toBe(recomputed.signature);
    },
    600_000,
  );
});
