/**
 * Exec credential plugins, with a real plugin: a small shell script that prints an ExecCredential and counts its runs.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { resolveKubeconfigAccess } from '../../../../lib/kube/credentials/kubeconfig-source.ts';
import type { KubeconfigSourceDeps } from '../../../../lib/kube/credentials/kubeconfig-source.ts';
import { SSMClient } from '@aws-sdk/client-ssm';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import type { ClusterConfig } from '../../../../lib/routing/schema.ts';
import { CA_DATA, recordingLogger, rejectionOf } from './fixtures.ts';

const EXEC_TOKEN = 'exec-plugin-token-4c1d';
/** PEM-shaped, as JSON string content (the plugin prints them escaped); the handshake itself is tested on the real clusters. */
const CERT_PEM = '-----BEGIN CERTIFICATE-----\\nQ0VSVA==\\n-----END CERTIFICATE-----\\n';
const KEY_PEM = '-----BEGIN EC PRIVATE KEY-----\\nS0VZ\\n-----END EC PRIVATE KEY-----\\n';
let dir: string;
let now: number;

/** A plugin on PATH as `vr-test-plugin`: counts its runs, keeps its KUBERNETES_EXEC_INFO and arguments, prints what $MODE says. */
function writePlugin(): void {
  const script = `#!/bin/sh
echo run >> "${dir}/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" > "${dir}/exec-info"
env | cut -d= -f1 | sort > "${dir}/env-names"
echo "$@ EXTRA=$EXTRA" > "${dir}/args"
case "$MODE" in
  fail) echo "secret-looking stderr ${EXEC_TOKEN}" >&2; exit 3 ;;
  slow) sleep 5 ;;
  big) head -c 300000 /dev/zero | tr '\\0' 'x' ;;
  notjson) echo "${EXEC_TOKEN} is not JSON" ;;
  notpem) echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"x","clientKeyData":"y"}}' ;;
  certonly) printf '%s\\n' '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"${CERT_PEM}"}}' ;;
  cert) printf '%s\\n' "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"clientCertificateData\\":\\"${CERT_PEM}\\",\\"clientKeyData\\":\\"${KEY_PEM}\\"$EXPIRY}}" ;;
  *) echo "{\\"apiVersion\\":\\"$API\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"${EXEC_TOKEN}-$(wc -l < "${dir}/runs" | tr -d ' ')\\"$EXPIRY}}" ;;
esac
`;
  writeFileSync(join(dir, 'vr-test-plugin'), script);
  chmodSync(join(dir, 'vr-test-plugin'), 0o755);
}

const runs = (): number => {
  try {
    return readFileSync(join(dir, 'runs'), 'utf8').split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
};

function kubeconfig(exec: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'main', cluster: { server: 'https://api.main.example:6443', 'certificate-authority-data': CA_DATA } },
    ],
    contexts: [{ name: 'main', context: { cluster: 'main', user: 'plugin' } }],
    users: [{ name: 'plugin', user: { exec } }],
    'current-context': 'main',
  });
}

const exec = (env: Record<string, string> = {}, apiVersion = 'client.authentication.k8s.io/v1') => ({
  apiVersion,
  command: 'vr-test-plugin',
  args: ['get-token', '--cluster', 'main'],
  env: [
    { name: 'EXTRA', value: 'from-kubeconfig' },
    { name: 'API', value: apiVersion },
    ...Object.entries(env).map(([name, value]) => ({ name, value })),
  ],
  interactiveMode: 'Never',
  provideClusterInfo: true,
});

function deps(extra: Partial<KubeconfigSourceDeps> = {}): KubeconfigSourceDeps {
  return {
    routingTableDir: dir,
    env: {
      PATH: `/usr/bin:/bin:${dir}`,
      HOME: dir,
      VAULT_ROLLOUT_ALLOW_EXEC: 'other,lab',
      VAULT_TOKEN: 'planted-vault-token',
      AWS_SECRET_ACCESS_KEY: 'planted',
    },
    readFile: async () => '',
    ssm: new SSMClient({ region: 'eu-west-1' }),
    secretsManager: new SecretsManagerClient({ region: 'eu-west-1' }),
    logger: recordingLogger(),
    clock: () => now,
    ...extra,
  };
}

const inline = (text: string, options: { allowExec?: boolean } = { allowExec: true }): ClusterConfig => ({
  kubeconfig: { inline: text, ...options },
  labels: {},
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'vr-exec-'));
  now = Date.parse('2026-01-01T00:00:00Z');
  writePlugin();
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('exec credential plugins', () => {
  it('run with the ExecCredential protocol: the command on PATH, its args and env, KUBERNETES_EXEC_INFO with the cluster', async () => {
    for (const apiVersion of ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']) {
      rmSync(join(dir, 'runs'), { force: true });
      const access = await resolveKubeconfigAccess('lab', inline(kubeconfig(exec({}, apiVersion))), deps());
      expect(await access.bearerToken?.()).toBe(`${EXEC_TOKEN}-1`);
      expect(readFileSync(join(dir, 'args'), 'utf8').trim()).toBe('get-token --cluster main EXTRA=from-kubeconfig');
      const info = JSON.parse(readFileSync(join(dir, 'exec-info'), 'utf8')) as Record<string, unknown>;
      expect(info).toEqual({
        apiVersion,
        kind: 'ExecCredential',
        spec: {
          interactive: false,
          cluster: { server: 'https://api.main.example:6443', 'certificate-authority-data': CA_DATA },
        },
      });
      // The plugin sees PATH, HOME, its kubeconfig's exec.env and KUBERNETES_EXEC_INFO: none of this process's secrets.
      const names = readFileSync(join(dir, 'env-names'), 'utf8')
        .split('\n')
        .filter((n) => n !== '' && !['PWD', 'SHLVL', '_'].includes(n));
      expect(names).toEqual(['API', 'EXTRA', 'HOME', 'KUBERNETES_EXEC_INFO', 'PATH']);
      // The plugin's token is never left in the KubeConfig client-node holds.
      expect(access.kubeConfig.getCurrentUser()?.exec).toBeUndefined();
    }
  });

  it('runs once per token lifetime, not per request', async () => {
    const expiry = new Date(now + 15 * 60_000).toISOString();
    const access = await resolveKubeconfigAccess(
      'lab',
      inline(kubeconfig(exec({ EXPIRY: `,"expirationTimestamp":"${expiry}"` }))),
      deps(),
    );
    const tokens = await Promise.all(Array.from({ length: 20 }, () => access.bearerToken?.()));
    expect(new Set(tokens)).toEqual(new Set([`${EXEC_TOKEN}-1`]));
    expect(runs()).toBe(1);
    now += 14 * 60_000;
    expect(await access.bearerToken?.()).toBe(`${EXEC_TOKEN}-1`);
    now += 60_000 - 5_000; // inside the margin before expiry
    expect(await access.bearerToken?.()).toBe(`${EXEC_TOKEN}-2`);
    expect(runs()).toBe(2);
  });

  it('keeps a token without expiry until the access is resolved again', async () => {
    const access = await resolveKubeconfigAccess('lab', inline(kubeconfig(exec())), deps());
    now += 24 * 3_600_000;
    await access.bearerToken?.();
    expect(runs()).toBe(1);
  });

  const refusals: [string, () => Promise<unknown>, RegExp][] = [
    [
      "without the operator's VAULT_ROLLOUT_ALLOW_EXEC, whatever the routing table says",
      () =>
        resolveKubeconfigAccess(
          'lab',
          inline(kubeconfig(exec()), { allowExec: true }),
          deps({ env: { PATH: `/usr/bin:/bin:${dir}`, VAULT_ROLLOUT_ALLOW_EXEC: 'labs' } }),
        ),
      /^cluster lab: inline kubeconfig: user plugin: exec \(the credential plugin vr-test-plugin\) runs only when the operator allows it for this cluster: set VAULT_ROLLOUT_ALLOW_EXEC=lab in vault-rollout's environment \(the routing table's allowExec no longer grants it\)/,
    ],
    [
      'in the Lambda runtime, even with allowExec',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec())), deps({ runtime: 'lambda' })),
      /^cluster lab: inline kubeconfig: user plugin: exec \(the credential plugin vr-test-plugin\) cannot run in the Lambda runtime, which has no plugins; give the user a token or client certificate/,
    ],
    [
      'from SSM, even when the operator allows exec for the cluster',
      async () => {
        mockClient(SSMClient)
          .on(GetParameterCommand)
          .resolves({ Parameter: { Value: kubeconfig(exec()) } });
        return resolveKubeconfigAccess('lab', { kubeconfig: { ssm: '/kc' }, labels: {} }, deps());
      },
      /^cluster lab: kubeconfig from SSM parameter \/kc: user plugin: exec \(the credential plugin vr-test-plugin\) is refused for a kubeconfig from SSM or Secrets Manager/,
    ],
    [
      'not on PATH',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig({ ...exec(), command: 'no-such-plugin' })), deps()),
      /^cluster lab: inline kubeconfig: exec.command no-such-plugin is not on PATH; install the plugin or put its directory on vault-rollout's PATH$/,
    ],
    [
      'an old protocol',
      () =>
        resolveKubeconfigAccess(
          'lab',
          inline(kubeconfig({ ...exec(), apiVersion: 'client.authentication.k8s.io/v1alpha1' })),
          deps(),
        ),
      /exec.apiVersion client.authentication.k8s.io\/v1alpha1 is not supported; use client.authentication.k8s.io\/v1 or client.authentication.k8s.io\/v1beta1/,
    ],
    [
      'an interactive plugin',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig({ ...exec(), interactiveMode: 'Always' })), deps()),
      /exec.interactiveMode is Always, but vault-rollout never has a terminal/,
    ],
    [
      'a failing plugin (its stderr is not shown)',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec({ MODE: 'fail' }))), deps()),
      /^cluster lab: inline kubeconfig: the exec plugin exited with code 3; run it by hand to see its message$/,
    ],
    [
      'a plugin that takes too long',
      () =>
        resolveKubeconfigAccess(
          'lab',
          inline(kubeconfig(exec({ MODE: 'slow' }))),
          deps({ exec: { limits: { timeoutMs: 300 } } }),
        ),
      /the exec plugin did not finish within 0.3 s; it was stopped/,
    ],
    [
      'a plugin that prints too much',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec({ MODE: 'big' }))), deps()),
      /the exec plugin printed more than 262144 bytes; it was stopped/,
    ],
    [
      'output that is not JSON (not quoted)',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec({ MODE: 'notjson' }))), deps()),
      /the exec plugin printed something that is not an ExecCredential \(not JSON\)$/,
    ],
    [
      'a client certificate without its key',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec({ MODE: 'certonly' }))), deps()),
      /carries clientCertificateData without clientKeyData; a client certificate needs both/,
    ],
    [
      'a client certificate that is not PEM',
      () => resolveKubeconfigAccess('lab', inline(kubeconfig(exec({ MODE: 'notpem' }))), deps()),
      /status.clientCertificateData is not a PEM certificate/,
    ],
    [
      'an expired client certificate',
      () =>
        resolveKubeconfigAccess(
          'lab',
          inline(kubeconfig(exec({ MODE: 'cert', EXPIRY: ',"expirationTimestamp":"2020-01-01T00:00:00Z"' }))),
          deps(),
        ),
      /returned a client certificate that expired at 2020-01-01T00:00:00Z/,
    ],
    [
      'an expired token',
      () =>
        resolveKubeconfigAccess(
          'lab',
          inline(kubeconfig(exec({ EXPIRY: ',"expirationTimestamp":"2020-01-01T00:00:00Z"' }))),
          deps(),
        ),
      /returned a token that expired at 2020-01-01T00:00:00Z/,
    ],
  ];

  it.each(refusals)('is refused %s, naming the cluster and never the token', async (_label, attempt, message) => {
    const error = await rejectionOf(attempt());
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain(EXEC_TOKEN);
  });

  it('resolves a command with a path relative to the kubeconfig file', async () => {
    const access = await resolveKubeconfigAccess(
      'lab',
      { kubeconfig: { file: 'kc.json', allowExec: true }, labels: {} },
      deps({
        readFile: async () => kubeconfig({ ...exec(), command: './vr-test-plugin' }),
        env: { PATH: '/usr/bin:/bin', VAULT_ROLLOUT_ALLOW_EXEC: 'lab' },
      }),
    );
    expect(await access.bearerToken?.()).toBe(`${EXEC_TOKEN}-1`);
  });

  it('takes a client certificate and key from the plugin, as kubectl does (tsh kube credentials): into the TLS options, no bearer token, built again before it expires', async () => {
    const expires = new Date(now + 3_600_000).toISOString();
    const access = await resolveKubeconfigAccess(
      'lab',
      inline(kubeconfig(exec({ MODE: 'cert', EXPIRY: `,"expirationTimestamp":"${expires}"` }))),
      deps(),
    );
    expect(access.bearerToken).toBeUndefined();
    const user = access.kubeConfig.getCurrentUser();
    expect(Buffer.from(user?.certData ?? '', 'base64').toString()).toBe(CERT_PEM.replaceAll('\\n', '\n'));
    expect(Buffer.from(user?.keyData ?? '', 'base64').toString()).toBe(KEY_PEM.replaceAll('\\n', '\n'));
    expect(access.refreshAfter).toBe(Date.parse(expires) - 10_000);
    expect(runs()).toBe(1);
  });
});
