import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ClusterAccess, ClusterAccessResolver } from '../../../../lib/kube/cluster-access.ts';
import { accessConfigFingerprint, ClusterClients } from '../../../../lib/kube/cluster-clients.ts';
import type { ClusterConfig } from '../../../../lib/routing/schema.ts';
import { rejectionOf } from './fixtures.ts';

const START = 1_000_000;

/** A resolver that counts calls, answers when told to, and gives each access a serial number as its server. */
function fakeResolver(refreshIn?: number) {
  const calls: string[] = [];
  const pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
  let manual = false;
  let now = START;
  const resolver: ClusterAccessResolver = async (name) => {
    calls.push(name);
    const access: ClusterAccess = {
      kubeConfig: new KubeConfig(),
      server: `https://${name}/${calls.length}`,
      insecureSkipTLSVerify: false,
      refreshAfter: refreshIn === undefined ? undefined : now + refreshIn,
    };
    if (!manual) return access;
    await new Promise<void>((resolve, reject) => pending.push({ resolve, reject }));
    return access;
  };
  return {
    resolver,
    calls,
    pending,
    holdAnswers: () => void (manual = true),
    setNow: (value: number) => void (now = value),
  };
}

const eu: ClusterConfig = { kubeconfig: { ssm: '/k8s/eu' }, labels: { env: 'prod' } };

describe('ClusterClients', () => {
  it('resolves a cluster once and reuses its access', async () => {
    const fake = fakeResolver();
    const clients = new ClusterClients(fake.resolver, () => START);
    const first = await clients.get('eu', eu);
    expect(await clients.get('eu', eu)).toBe(first);
    expect(fake.calls).toEqual(['eu']);
  });

  it('keeps clusters apart', async () => {
    const fake = fakeResolver();
    const clients = new ClusterClients(fake.resolver, () => START);
    const [a, b] = await Promise.all([
      clients.get('eu', eu),
      clients.get('us', { eks: { name: 'us', region: 'us-east-1' }, labels: {} }),
    ]);
    expect(a.server).not.toBe(b.server);
    expect(fake.calls.sort()).toEqual(['eu', 'us']);
  });

  it('shares one in-flight resolution among concurrent callers', async () => {
    const fake = fakeResolver();
    fake.holdAnswers();
    const clients = new ClusterClients(fake.resolver, () => START);
    const waiting = [clients.get('eu', eu), clients.get('eu', eu), clients.get('eu', eu)];
    await Promise.resolve();
    expect(fake.calls).toEqual(['eu']);
    fake.pending.forEach((p) => p.resolve());
    const [a, b, c] = await Promise.all(waiting);
    expect(a).toBe(b);
    expect(b).toBe(c);
  });

  it('resolves again once the clock reaches refreshAfter minus a minute, not before', async () => {
    const fake = fakeResolver(14 * 60_000);
    let now = START;
    const clients = new ClusterClients(fake.resolver, () => now);
    const first = await clients.get('eu', eu);
    now = START + 13 * 60_000 - 1;
    expect(await clients.get('eu', eu)).toBe(first);
    now = START + 13 * 60_000;
    fake.setNow(now);
    const second = await clients.get('eu', eu);
    expect(second).not.toBe(first);
    expect(second.refreshAfter).toBe(now + 14 * 60_000);
    expect(fake.calls).toHaveLength(2);
  });

  it('never keeps a failed resolution', async () => {
    const fake = fakeResolver();
    fake.holdAnswers();
    const clients = new ClusterClients(fake.resolver, () => START);
    const failing = [clients.get('eu', eu), clients.get('eu', eu)];
    await Promise.resolve();
    fake.pending[0]?.reject(new Error('SSM throttled'));
    for (const attempt of failing) expect((await rejectionOf(attempt)).message).toBe('SSM throttled');

    const retry = clients.get('eu', eu);
    await Promise.resolve();
    fake.pending[1]?.resolve();
    expect((await retry).server).toBe('https://eu/2');
  });

  it('keeps a resolver that throws synchronously from breaking the cache', async () => {
    let calls = 0;
    const clients = new ClusterClients(
      ((name: string) => {
        calls += 1;
        if (calls === 1) throw new Error('boom');
        return Promise.resolve({
          kubeConfig: new KubeConfig(),
          server: `https://${name}`,
          insecureSkipTLSVerify: false,
        });
      }) as ClusterAccessResolver,
      () => START,
    );
    expect((await rejectionOf(clients.get('eu', eu))).message).toBe('boom');
    await expect(clients.get('eu', eu)).resolves.toMatchObject({ server: 'https://eu' });
  });

  it("resolves again when the cluster's access settings change, but not for labels or concurrency", async () => {
    const fake = fakeResolver();
    const clients = new ClusterClients(fake.resolver, () => START);
    await clients.get('eu', eu);
    await clients.get('eu', { ...eu, labels: { env: 'staging' }, concurrency: 3 });
    expect(fake.calls).toHaveLength(1);
    await clients.get('eu', { ...eu, context: 'admin' });
    expect(fake.calls).toHaveLength(2);
  });

  it('resolves again after invalidate, e.g. following a 401', async () => {
    const fake = fakeResolver();
    const clients = new ClusterClients(fake.resolver, () => START);
    await clients.get('eu', eu);
    clients.invalidate('eu');
    clients.invalidate('never-seen');
    await clients.get('eu', eu);
    expect(fake.calls).toEqual(['eu', 'eu']);
  });

  it("does not let a stale failure of an old config evict the new config's entry", async () => {
    const fake = fakeResolver();
    fake.holdAnswers();
    const clients = new ClusterClients(fake.resolver, () => START);
    const old = clients.get('eu', eu);
    const changed = { ...eu, context: 'admin' };
    const current = clients.get('eu', changed);
    await Promise.resolve();
    fake.pending[0]?.reject(new Error('old source gone'));
    fake.pending[1]?.resolve();
    await rejectionOf(old);
    const access = await current;
    expect(await clients.get('eu', changed)).toBe(access);
    expect(fake.calls).toHaveLength(2);
  });

  it('uses Date.now when no clock is given', async () => {
    const fake = fakeResolver(Number.POSITIVE_INFINITY);
    const clients = new ClusterClients(fake.resolver);
    await clients.get('eu', eu);
    await clients.get('eu', eu);
    expect(fake.calls).toHaveLength(1);
  });
});

describe('accessConfigFingerprint', () => {
  it('depends on where the credentials come from, not on key order, labels or concurrency', () => {
    const a: ClusterConfig = {
      eks: { name: 'x', region: 'eu-west-1', roleArn: 'arn:aws:iam::111122223333:role/r' },
      labels: {},
    };
    const reordered = {
      labels: { a: 'b' },
      concurrency: 4,
      eks: { roleArn: 'arn:aws:iam::111122223333:role/r', region: 'eu-west-1', name: 'x' },
    } as ClusterConfig;
    expect(accessConfigFingerprint(reordered)).toBe(accessConfigFingerprint(a));
    expect(accessConfigFingerprint({ ...a, insecureSkipTLSVerify: false })).toBe(accessConfigFingerprint(a));
    expect(accessConfigFingerprint({ ...a, insecureSkipTLSVerify: true })).not.toBe(accessConfigFingerprint(a));
    expect(accessConfigFingerprint({ ...a, eks: { name: 'x', region: 'eu-west-1' } })).not.toBe(
      accessConfigFingerprint(a),
    );
    expect(accessConfigFingerprint({ kubeconfig: { ssm: '/a' }, labels: {} })).not.toBe(
      accessConfigFingerprint({ kubeconfig: { secretsManager: '/a' }, labels: {} }),
    );
    expect(accessConfigFingerprint(a)).toMatch(/^[0-9a-f]{64}$/);
  });
});
