import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClusterAccessError } from '../../../../lib/kube/cluster-access.ts';
import { resolveInClusterAccess } from '../../../../lib/kube/credentials/in-cluster.ts';
import { RoutingTableSchema } from '../../../../lib/routing/schema.ts';
import { recordingLogger, rejectionOf } from './fixtures.ts';

const CA = '-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n';
let dir: string;
let now: number;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'vr-sa-'));
  writeFileSync(join(dir, 'token'), 'sa-token-one\n');
  writeFileSync(join(dir, 'ca.crt'), CA);
  now = 0;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const env = (extra: Record<string, string> = {}) => ({
  KUBERNETES_SERVICE_HOST: '10.96.0.1',
  KUBERNETES_SERVICE_PORT: '443',
  VAULT_ROLLOUT_SERVICE_ACCOUNT_DIR: dir,
  ...extra,
});
const deps = (e = env()) => ({
  env: e,
  readFile: (p: string) => readFile(p, 'utf8'),
  logger: recordingLogger(),
  clock: () => now,
});
const config = { inCluster: true as const, labels: {} };

describe('inCluster: true', () => {
  it("reaches the API server of the pod's cluster with its CA and its ServiceAccount token", async () => {
    const access = await resolveInClusterAccess('home', config, deps());
    expect(access.server).toBe('https://10.96.0.1:443');
    expect(Buffer.from(access.kubeConfig.getCurrentCluster()?.caData ?? '', 'base64').toString()).toBe(CA);
    expect(await access.bearerToken?.()).toBe('sa-token-one');
    expect(access.refreshAfter).toBeUndefined();
  });

  it('brackets an IPv6 service host', async () => {
    expect(
      (await resolveInClusterAccess('home', config, deps(env({ KUBERNETES_SERVICE_HOST: 'fd00::1' })))).server,
    ).toBe('https://[fd00::1]:443');
  });

  it('follows the token as the kubelet replaces it (an atomic rename), and re-reads it within a minute whatever stat says', async () => {
    const access = await resolveInClusterAccess('home', config, deps());
    writeFileSync(join(dir, 'token.new'), 'sa-token-two\n');
    renameSync(join(dir, 'token.new'), join(dir, 'token'));
    expect(await access.bearerToken?.()).toBe('sa-token-two');
    now += 61_000;
    expect(await access.bearerToken?.()).toBe('sa-token-two');
  });

  const refusals: [string, Record<string, string>, () => void, RegExp][] = [
    [
      'outside a pod',
      { KUBERNETES_SERVICE_HOST: '' },
      () => {},
      /^cluster home: inCluster: true, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set/,
    ],
    [
      'without the CA',
      {},
      () => rmSync(join(dir, 'ca.crt')),
      /^cluster home: inCluster: true, but the cluster CA .*ca\.crt cannot be read \(ENOENT\); mount the pod's ServiceAccount token/,
    ],
    [
      'without the token',
      {},
      () => rmSync(join(dir, 'token')),
      /^cluster home: inCluster: true, but cannot read the token file .*token \(ENOENT\); mount the pod's ServiceAccount token/,
    ],
    [
      'with an empty token',
      {},
      () => writeFileSync(join(dir, 'token'), '\n'),
      /^cluster home: inCluster: true, but the token file .*token is empty/,
    ],
  ];
  it.each(refusals)('is refused %s, saying what to do', async (_label, extra, arrange, message) => {
    arrange();
    const error = await rejectionOf(resolveInClusterAccess('home', config, deps(env(extra))));
    expect(error).toBeInstanceOf(ClusterAccessError);
    expect(error.message).toMatch(message);
  });

  it('is one of kubeconfig, eks or inCluster in the routing table', () => {
    expect(RoutingTableSchema.safeParse({ clusters: { home: { inCluster: true } } }).success).toBe(true);
    expect(
      RoutingTableSchema.safeParse({ clusters: { home: { inCluster: true, kubeconfig: { env: 'KC' } } } }).success,
    ).toBe(false);
    expect(RoutingTableSchema.safeParse({ clusters: { home: { inCluster: true, context: 'x' } } }).success).toBe(false);
  });
});
