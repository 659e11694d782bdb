/** Telemetry over Powertools for AWS Lambda: Logger (JSON lines) and Metrics (CloudWatch EMF). */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Telemetry } from './telemetry.ts';

export function powertoolsTelemetry(serviceName = 'vault-rollout'): Telemetry {
  const logger = new Logger({ serviceName });
  const metrics = new Metrics({ serviceName, namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'VaultRollout' });
  // Metrics added since the last flush (single metrics publish at once); an empty flush only makes Powertools warn.
  let pending = false;
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
      const single = metrics.singleMetric();
      for (const [k, v] of Object.entries(dimensions)) single.addDimension(k, v);
      single.addMetric(name, unitValue, value);
    },
    setCorrelationId: (id) => logger.appendKeys({ correlation_id: id }),
    flush: () => {
      if (pending) metrics.publishStoredMetrics();
      pending = false;
    },
  };
}
