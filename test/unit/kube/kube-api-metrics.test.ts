/** Kubernetes and Vault request latency and errors reach the Prometheus registry, by cluster and outcome only. */
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig, PatchStrategy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeApiFor, type KubeApi } from '../../../lib/kube/kube-api.ts';
import { PrometheusMetrics } from '../../../lib/observability/prometheus.ts';
import { vaultRequest } from '../../../lib/vault/vault-request.ts';
import { issueCert, writeCa } from '../../clusters/pki.ts';

let server: Server;
let api: KubeApi;
let status = 200;
const DEPLOYMENT = { apiVersion: 'apps/v1', kind: 'Deployment' };

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vr-kube-metrics-'));
  const ca = writeCa(dir, 'metrics-test-ca');
  const serving = issueCert(dir, ca, {
    name: 'server',
    commonName: 'localhost',
    sans: ['IP:127.0.0.1'],
    usage: 'server',
  });
  server = createServer({ cert: readFileSync(serving.certFile), key: readFileSync(serving.keyFile) }, (_req, res) => {
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(JSON.stringify({ metadata: { name: 'web-7f9c' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: url, caData: readFileSync(ca.certFile).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'test-token-not-secret' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  api = kubeApiFor({ kubeConfig, server: url, insecureSkipTLSVerify: false, cluster: 'alpha' }, 2_000);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const value = (text: string, series: string) =>
  Number(
    text
      .split('\n')
      .find((l) => l.startsWith(`${series} `))
      ?.split(' ')[1],
  );

describe('request metrics', () => {
  it('Kubernetes: latency by cluster, method and outcome, errors counted; no name, path or token', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    const uninstall = prometheus.install();
    try {
      status = 200;
      await api.read(DEPLOYMENT, 'payments', 'web-7f9c');
      await api.read(DEPLOYMENT, 'payments', 'web-7f9c');
      status = 503;
      await expect(api.patch(DEPLOYMENT, 'payments', 'web-7f9c', [], PatchStrategy.JsonPatch, false)).rejects.toThrow();
      status = 403;
      await expect(api.read(DEPLOYMENT, 'payments', 'web-7f9c')).rejects.toThrow();
    } finally {
      uninstall();
    }
    const { body } = await prometheus.scrape();
    expect(
      value(body, 'vault_rollout_kube_request_duration_seconds_count{cluster="alpha",method="GET",outcome="ok"}'),
    ).toBe(2);
    expect(
      value(
        body,
        'vault_rollout_kube_request_duration_seconds_count{cluster="alpha",method="PATCH",outcome="server_error"}',
      ),
    ).toBe(1);
    expect(value(body, 'vault_rollout_kube_request_errors_total{cluster="alpha",outcome="server_error"}')).toBe(1);
    expect(value(body, 'vault_rollout_kube_request_errors_total{cluster="alpha",outcome="client_error"}')).toBe(1);
    expect(body).not.toMatch(/web-7f9c|payments|test-token/);
  });

  it('Vault: latency and errors by outcome; never the path', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    const uninstall = prometheus.install();
    const answers = [200, 200, 503];
    const fetch = (async () => new Response('{}', { status: answers.shift() ?? 500 })) as typeof globalThis.fetch;
    try {
      for (let i = 0; i < 3; i++)
        await vaultRequest({
          vaultAddr: 'http://127.0.0.1:8200',
          method: 'GET',
          path: 'secret/metadata/payments/db',
          token: 'hvs.not-secret',
          fetch,
        });
      await expect(
        vaultRequest({
          vaultAddr: 'http://127.0.0.1:8200',
          method: 'GET',
          path: 'secret/metadata/payments/db',
          fetch: (async () => {
            throw new TypeError('fetch failed');
          }) as typeof globalThis.fetch,
        }),
      ).rejects.toThrow();
    } finally {
      uninstall();
    }
    const { body } = await prometheus.scrape();
    expect(value(body, 'vault_rollout_vault_request_duration_seconds_count{outcome="ok"}')).toBe(2);
    expect(value(body, 'vault_rollout_vault_request_errors_total{outcome="server_error"}')).toBe(1);
    expect(value(body, 'vault_rollout_vault_request_errors_total{outcome="no_answer"}')).toBe(1);
    expect(body).not.toMatch(/payments|hvs\./);
  });
});
