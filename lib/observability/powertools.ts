/** Telemetry over Powertools for AWS Lambda: Logger (JSON lines) and Metrics (CloudWatch EMF). */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Telemetry } from '../kernel/telemetry.ts';

export function powertoolsTelemetry(serviceName = 'vault-rollout'): Telemetry {
  const logger = new Logger({ serviceName });
  const metrics = new Metrics({ serviceName, namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'VaultRollout' });
  // One single-metric instance for every dimensioned data point, made once: `singleMetric()` builds a new Metrics
  // each call (a Console, the environment read again), which was half of serve's time on an audit-device POST.
  // Sharing it is safe: addMetric publishes at once, synchronously, and publishing clears the dimensions.
  const single = metrics.singleMetric();
  // Metrics added since the last flush (single metrics publish at once); an empty flush only makes Powertools warn.
  let pending = false;
  // The correlation id the logger carries now: a run of reads (no change, no id) does not set the same key again.
  let correlationId: string | undefined;
  return {
    info: (m, f) => logger.info(m, f ?? {}),
    warn: (m, f) => logger.warn(m, f ?? {}),
    error: (m, f) => logger.error(m, f ?? {}),
    metric: (name, value, unit, dimensions) => {
      const unitValue = unit === 'Count' ? MetricUnit.Count : MetricUnit.Milliseconds;
      if (!dimensions) {
        metrics.addMetric(name, unitValue, value);
        pending = true;
        return;
      }
      try {
        for (const [k, v] of Object.entries(dimensions)) single.addDimension(k, v);
        single.addMetric(name, unitValue, value);
      } finally {
        // A refused metric (addMetric throws before publishing) must not leave its dimensions on the next one.
        single.clearDimensions();
      }
    },
    setCorrelationId: (id) => {
      if (id === correlationId) return;
      correlationId = id;
      logger.appendKeys({ correlation_id: id });
    },
    flush: () => {
      if (pending) metrics.publishStoredMetrics();
      pending = false;
    },
  };
}
