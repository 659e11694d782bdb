/**
 * Prometheus metrics (`GET /metrics` on `serve`, `worker --metrics-port`, `relay --metrics-port`), from the same
 * table as the EMF metrics (`METRIC_SPECS` in kernel/telemetry.ts). Fed three ways: every `Telemetry.metric` call
 * (the wrapper below), the process-wide observer the Kubernetes and Vault request functions report to, and samplers
 * read at scrape time (serve's queue, the relay's spool). Cardinality is bounded twice: only the labels the table
 * names are kept, and each metric keeps at most MAX_SERIES_PER_METRIC label sets (the rest count under `other`).
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import {
  METRIC_SPECS,
  prometheusName,
  setMetricObserver,
  type MetricLabel,
  type MetricName,
  type Telemetry,
} from '../kernel/telemetry.ts';

export type MetricLabels = Partial<Record<MetricLabel, string>>;
export interface Sample {
  name: MetricName;
  value: number;
  labels?: MetricLabels;
}
/** Read when scraped: the current value of gauges (and of counters kept elsewhere, such as the relay's). */
export type Sampler = () => Promise<readonly Sample[]> | readonly Sample[];

/** Label sets one metric may hold; far above what a routing table's clusters times the outcome enums give. */
export const MAX_SERIES_PER_METRIC = 500;
/** The value a label takes when it is not a short enum-like word, or past the series bound. */
export const OTHER_LABEL_VALUE = 'other';
const LABEL_VALUE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$/;

const SECONDS_BUCKETS: Partial<Record<MetricName, number[]>> = {
  KubeRequestDuration: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  VaultRequestDuration: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  RolloutDuration: [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200],
  VaultToPatchLag: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
};

type AnyMetric = Counter<string> | Gauge<string> | Histogram<string>;

export class PrometheusMetrics {
  readonly registry = new Registry();
  readonly #metrics = new Map<MetricName, AnyMetric>();
  readonly #series = new Map<MetricName, Set<string>>();
  readonly #samplers: Sampler[] = [];

  constructor(options: { processMetrics?: boolean } = {}) {
    for (const name of Object.keys(METRIC_SPECS) as MetricName[]) {
      const spec = METRIC_SPECS[name];
      const config = {
        name: prometheusName(name),
        help: spec.help,
        labelNames: [...spec.labels],
        registers: [this.registry],
      };
      const metric =
        spec.type === 'counter'
          ? new Counter(config)
          : spec.type === 'gauge'
            ? new Gauge(config)
            : new Histogram({ ...config, buckets: SECONDS_BUCKETS[name] ?? [0.1, 1, 10, 60, 600] });
      this.#metrics.set(name, metric);
      this.#series.set(name, new Set());
    }
    // The process's own (CPU, memory, event loop lag, open handles): what every Node exporter shows.
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'vault_rollout_' });
  }

  /** One event: a counter grows by `value`, a histogram observes it, a gauge takes it. Milliseconds become seconds. */
  record(name: MetricName, value: number, labels?: MetricLabels): void {
    const metric = this.#metrics.get(name);
    if (metric === undefined || !Number.isFinite(value)) return;
    const l = this.#labels(name, labels);
    const v = prometheusName(name).endsWith('_seconds') ? value / 1000 : value;
    if (metric instanceof Counter) metric.inc(l, Math.max(0, v));
    else if (metric instanceof Histogram) metric.observe(l, Math.max(0, v));
    else metric.set(l, v);
  }

  /** The telemetry given, with every metric it records also counted here (logs and EMF unchanged). */
  telemetry(inner: Telemetry): Telemetry {
    return {
      info: (m, f) => inner.info(m, f),
      warn: (m, f) => inner.warn(m, f),
      error: (m, f) => inner.error(m, f),
      metric: (name, value, unit, dimensions) => {
        inner.metric(name, value, unit, dimensions);
        this.record(name, value, dimensions);
      },
      setCorrelationId: (id) => inner.setCorrelationId(id),
      flush: () => inner.flush(),
    };
  }

  /** Makes this registry the process's observer (Kubernetes and Vault requests); returns the undo. */
  install(): () => void {
    setMetricObserver((name, value, labels) => this.record(name, value, labels));
    return () => setMetricObserver(undefined);
  }

  addSampler(sampler: Sampler): void {
    this.#samplers.push(sampler);
  }

  /** The text exposition format, samplers read first. A sampler that fails leaves its metrics as they were. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    for (const sampler of this.#samplers) {
      let samples: readonly Sample[];
      try {
        samples = await sampler();
      } catch {
        continue;
      }
      // Sampled counters are totals kept elsewhere: each scrape sets them anew.
      const reset = new Set<MetricName>();
      for (const s of samples) {
        const metric = this.#metrics.get(s.name);
        if (metric instanceof Counter && !reset.has(s.name)) {
          metric.reset();
          reset.add(s.name);
        }
        this.record(s.name, s.value, s.labels);
      }
    }
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** Label sets held per metric, for the cardinality test. */
  seriesCount(name: MetricName): number {
    return this.#series.get(name)?.size ?? 0;
  }

  #labels(name: MetricName, given: MetricLabels | Record<string, string> | undefined): Record<string, string> {
    const spec = METRIC_SPECS[name];
    const out: Record<string, string> = {};
    for (const key of spec.labels) {
      const value = (given as Record<string, string> | undefined)?.[key];
      out[key] = value === undefined ? '' : LABEL_VALUE.test(value) ? value : OTHER_LABEL_VALUE;
    }
    const seen = this.#series.get(name) as Set<string>;
    const key = spec.labels.map((k) => out[k]).join('\u0000');
    if (!seen.has(key)) {
      if (seen.size >= MAX_SERIES_PER_METRIC) return Object.fromEntries(spec.labels.map((k) => [k, OTHER_LABEL_VALUE]));
      seen.add(key);
    }
    return out;
  }
}
