import { afterEach, describe, expect, it, vi } from 'vitest';
import { powertoolsTelemetry } from '../../../lib/observability/powertools.ts';
import { METRICS, type MetricName } from '../../../lib/kernel/telemetry.ts';

interface EmfDocument {
  _aws: { CloudWatchMetrics: Array<{ Dimensions: string[][]; Metrics: Array<{ Name: string }> }> };
  [key: string]: unknown;
}

/** The EMF documents Powertools writes to stdout while `run` runs. */
function emfWritten(run: () => void): EmfDocument[] {
  const written: string[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  try {
    run();
  } finally {
    write.mockRestore();
  }
  return written
    .flatMap((w) => w.split('\n'))
    .filter((line) => line.includes('"_aws"'))
    .map((line) => JSON.parse(line) as EmfDocument);
}

describe('powertoolsTelemetry metrics', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('publishes each dimensioned data point on its own, with its own dimensions only, from the one shared instance', () => {
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    vi.stubEnv('POWERTOOLS_DEV', 'false');
    const telemetry = powertoolsTelemetry('test-service');
    const docs = emfWritten(() => {
      telemetry.metric(METRICS.recordsIgnored, 3, 'Count', { reason: 'request-entry' });
      telemetry.metric(METRICS.recordsIgnored, 2, 'Count', { reason: 'read' });
      telemetry.metric(METRICS.refusedMessages, 1, 'Count', { why: 'forged' });
    });
    expect(
      docs.map((d) => ({
        dims: d._aws.CloudWatchMetrics[0]?.Dimensions,
        reason: d.reason,
        why: d.why,
        value: d[d._aws.CloudWatchMetrics[0]?.Metrics[0]?.Name ?? ''],
      })),
    ).toEqual([
      { dims: [['service', 'reason']], reason: 'request-entry', why: undefined, value: 3 },
      { dims: [['service', 'reason']], reason: 'read', why: undefined, value: 2 },
      { dims: [['service', 'why']], reason: undefined, why: 'forged', value: 1 },
    ]);
  });

  it('does not carry the dimensions of a refused data point over to the next one', () => {
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    vi.stubEnv('POWERTOOLS_DEV', 'false');
    const telemetry = powertoolsTelemetry('test-service');
    const docs = emfWritten(() => {
      // Powertools refuses a name over 255 characters, after the dimensions were added.
      expect(() => telemetry.metric('x'.repeat(300) as MetricName, 1, 'Count', { stale: 'yes' })).toThrow(RangeError);
      telemetry.metric(METRICS.recordsIgnored, 1, 'Count', { reason: 'read' });
    });
    expect(docs).toHaveLength(1);
    expect(docs[0]?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'reason']]);
    expect(docs[0]?.stale).toBeUndefined();
  });
});
