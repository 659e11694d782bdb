/** Prometheus metrics: names derived from the one table, labels bounded, and the pipeline's events counted. */
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../../lib/http/app.ts';
import {
  memoryTelemetry,
  METRIC_LABELS,
  METRIC_SPECS,
  METRICS,
  observeMetric,
  prometheusName,
  type MetricName,
} from '../../../lib/kernel/telemetry.ts';
import { MAX_SERIES_PER_METRIC, OTHER_LABEL_VALUE, PrometheusMetrics } from '../../../lib/observability/prometheus.ts';
import { processBatch, type QueueRecord } from '../../../lib/pipeline/worker.ts';
import type { RolloutMessage } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { MemoryRotationStore } from '../../../lib/rotations/rotation-store.ts';
import { fakeClusters, options } from '../kube/fake-kube.ts';

/** The samples of one exposition, without comments: `name{labels} value`. */
const samples = (text: string) => text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
const value = (text: string, series: string): number | undefined => {
  const line = samples(text).find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('the metric table', () => {
  it('names every metric once, with a Prometheus name derived from the EMF name', () => {
    expect(Object.keys(METRIC_SPECS).sort()).toEqual(Object.values(METRICS).sort());
    const names = Object.values(METRICS).map(prometheusName);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n).toMatch(/^vault_rollout_[a-z0-9_]+$/);
    expect(prometheusName('ChangesReceived')).toBe('vault_rollout_changes_received_total');
    expect(prometheusName('Targets')).toBe('vault_rollout_targets_total');
    expect(prometheusName('RolloutDuration')).toBe('vault_rollout_rollout_duration_seconds');
    expect(prometheusName('VaultToPatchLag')).toBe('vault_rollout_vault_to_patch_lag_seconds');
    expect(prometheusName('KubeRequestDuration')).toBe('vault_rollout_kube_request_duration_seconds');
    expect(prometheusName('QueueDepth')).toBe('vault_rollout_queue_depth');
    expect(prometheusName('RelaySpoolBytes')).toBe('vault_rollout_relay_spool_bytes');
    expect(prometheusName('HaltedRotations')).toBe('vault_rollout_halted_rotations_total');
  });

  it('allows only bounded labels: never a path, a workload name, a token or a digest', () => {
    for (const spec of Object.values(METRIC_SPECS)) for (const l of spec.labels) expect(METRIC_LABELS).toContain(l);
    expect(METRIC_LABELS.filter((l) => /path|name|workload|secret|token|hmac|digest|namespace|key/.test(l))).toEqual(
      [],
    );
  });

  it('documents every metric in the metrics reference (docs/reference/metrics.md, generated from this table)', async () => {
    const { readFileSync } = await import('node:fs');
    const page = readFileSync(new URL('../../../docs/reference/metrics.md', import.meta.url), 'utf8');
    for (const name of Object.values(METRICS)) expect(page).toContain(`| \`${prometheusName(name)}\` |`);
  });
});

describe('PrometheusMetrics', () => {
  it('counts what the telemetry records, converts milliseconds to seconds, and keeps the inner telemetry', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    const inner = memoryTelemetry();
    const telemetry = prometheus.telemetry(inner);
    telemetry.metric(METRICS.changesReceived, 3, 'Count');
    telemetry.metric(METRICS.targets, 1, 'Count', { cluster: 'alpha', outcome: 'restarted' });
    telemetry.metric(METRICS.targets, 1, 'Count', { cluster: 'alpha', outcome: 'restarted' });
    telemetry.metric(METRICS.rolloutDuration, 42_000, 'Milliseconds', { cluster: 'alpha', outcome: 'complete' });
    expect(inner.metrics).toHaveLength(4);
    const { body, contentType } = await prometheus.scrape();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(value(body, 'vault_rollout_changes_received_total')).toBe(3);
    expect(value(body, 'vault_rollout_targets_total{cluster="alpha",outcome="restarted"}')).toBe(2);
    expect(value(body, 'vault_rollout_rollout_duration_seconds_sum{cluster="alpha",outcome="complete"}')).toBe(42);
    expect(
      value(body, 'vault_rollout_rollout_duration_seconds_bucket{le="60",cluster="alpha",outcome="complete"}'),
    ).toBe(1);
    expect(
      value(body, 'vault_rollout_rollout_duration_seconds_bucket{le="30",cluster="alpha",outcome="complete"}'),
    ).toBe(0);
  });

  it('drops labels the table does not name, turns free text into `other`, and caps the series per metric', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    prometheus.record(METRICS.recordsIgnored, 1, { reason: 'secret/data/payments/db' } as never);
    prometheus.record(METRICS.changesReceived, 1, { path: 'secret/payments/db' } as never);
    for (let i = 0; i < MAX_SERIES_PER_METRIC + 100; i++)
      prometheus.record(METRICS.targets, 1, { cluster: `c${i}`, outcome: 'restarted' });
    const { body } = await prometheus.scrape();
    expect(body).not.toContain('payments');
    expect(value(body, `vault_rollout_records_ignored_total{reason="${OTHER_LABEL_VALUE}"}`)).toBe(1);
    expect(prometheus.seriesCount(METRICS.targets)).toBe(MAX_SERIES_PER_METRIC);
    expect(value(body, 'vault_rollout_targets_total{cluster="other",outcome="other"}')).toBe(100);
  });

  it('takes the process-wide observations (Kubernetes, Vault requests) only while installed', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    observeMetric(METRICS.vaultRequestErrors, 1, { outcome: 'server_error' });
    const uninstall = prometheus.install();
    observeMetric(METRICS.vaultRequestErrors, 1, { outcome: 'server_error' });
    uninstall();
    observeMetric(METRICS.vaultRequestErrors, 1, { outcome: 'server_error' });
    expect(
      value((await prometheus.scrape()).body, 'vault_rollout_vault_request_errors_total{outcome="server_error"}'),
    ).toBe(1);
  });

  it('sets sampled counters to their totals at each scrape, and a failing sampler changes nothing', async () => {
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    let received = 5;
    prometheus.addSampler(() => [{ name: METRICS.relayRecords, value: received, labels: { stage: 'received' } }]);
    prometheus.addSampler(() => {
      throw new Error('closed');
    });
    expect(value((await prometheus.scrape()).body, 'vault_rollout_relay_records_total{stage="received"}')).toBe(5);
    received = 7;
    expect(value((await prometheus.scrape()).body, 'vault_rollout_relay_records_total{stage="received"}')).toBe(7);
  });
});

const table = loadRoutingTable(`clusters:
  a: { kubeconfig: { env: A } }
  b: { kubeconfig: { env: B } }
vault: { mounts: { secret: 2 } }
routes:
  - name: app
    match: { path: "secret/{app}" }
    targets: [{ clusters: [a, b], namespace: ns, names: ["app-*"], kind: Deployment, name: "{app}" }]
`);

describe('cardinality through the pipeline', () => {
  it('1,000 distinct paths (and 1,000 reads) restart 2,000 workloads and make a bounded number of series, none naming a path or workload', async () => {
    const N = 1000;
    const apps = Array.from({ length: N }, (_, i) => `app-${i}`);
    const prometheus = new PrometheusMetrics({ processMetrics: false });
    const telemetry = prometheus.telemetry(memoryTelemetry());
    const uninstall = prometheus.install();
    try {
      const sent: RolloutMessage[] = [];
      const app = buildApp({
        table,
        queue: { send: async (m) => void sent.push(...(m as RolloutMessage[])) },
        telemetry,
        secrets: async () => ({ insecureNoAuth: true }),
        metrics: () => prometheus.scrape(),
      });
      const time = new Date().toISOString();
      const entry = (path: string, i: number, operation: string) =>
        JSON.stringify({
          time,
          type: 'response',
          request: {
            id: `r-${operation}-${i}`,
            operation,
            mount_type: 'kv',
            mount_point: 'secret/',
            path: `secret/data/${path}`,
          },
          response: { data: { version: 1 } },
        });
      // Several requests, as a busy audit device sends them.
      for (let start = 0; start < N; start += 250) {
        const lines = apps
          .slice(start, start + 250)
          .flatMap((a, i) => [entry(a, start + i, 'update'), entry(a, start + i, 'read')]);
        const res = await app.request('/v1/vault/audit', { method: 'POST', body: lines.join('\n') });
        expect(res.status).toBe(202);
      }
      const fake = fakeClusters({ a: apps, b: apps });
      const records: QueueRecord[] = sent.map((m, i) => ({
        messageId: `m${i}`,
        body: JSON.stringify(m),
        groupId: m.cluster,
      }));
      const out = await processBatch(records, {
        table,
        rotations: new MemoryRotationStore(),
        telemetry,
        executor: options(fake.apiFor),
      });
      expect(out.results.filter((r) => r.outcome === 'restarted')).toHaveLength(2 * N);

      const res = await app.request('/metrics');
      expect(res.status).toBe(200);
      const body = await res.text();
      expect(value(body, 'vault_rollout_changes_received_total')).toBe(N);
      expect(value(body, 'vault_rollout_records_ignored_total{reason="read"}')).toBe(N);
      expect(value(body, 'vault_rollout_targets_total{cluster="a",outcome="restarted"}')).toBe(N);
      expect(value(body, 'vault_rollout_targets_total{cluster="b",outcome="restarted"}')).toBe(N);
      expect(value(body, 'vault_rollout_vault_to_patch_lag_seconds_count{cluster="a"}')).toBe(N);
      expect(body).not.toMatch(/app-\d|secret\//);
      // Bounded by the table's clusters and the enums, whatever the number of paths.
      const series = new Set(samples(body).map((l) => l.replace(/ [^ ]+$/, '')));
      expect(series.size).toBeLessThan(150);
      for (const name of Object.values(METRICS) as MetricName[])
        expect(prometheus.seriesCount(name)).toBeLessThanOrEqual(4);
    } finally {
      uninstall();
    }
  });
});
