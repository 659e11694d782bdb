/**
 * Prometheus for the long-running commands: the registry with its samplers (serve's queue, the relay's spool and
 * counters) and the `--metrics-port` / `--metrics-host` listener of `worker` and `relay`. Samplers read counts and
 * times only: never a path, a body or a name from a message.
 */
import { stat } from 'node:fs/promises';
import { METRICS } from '../kernel/telemetry.ts';
import { startMetricsServer, type MetricsServer } from '../observability/metrics-server.ts';
import type { PrometheusMetrics, Sample, Sampler } from '../observability/prometheus.ts';
import type { SqliteRolloutQueue } from '../queue/sqlite-queue.ts';
import type { RunningRelay } from '../relay/relay.ts';
import type { CliIo } from './io.ts';
import { errnoWords } from '../kernel/file-errors.ts';

/** Why a listener could not listen, in words. */
export function listenErrorText(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return 'the address is already in use';
  if (code === 'EADDRNOTAVAIL') return 'no interface has this address';
  return errnoWords(code) ?? (e as Error).message;
}

const ageMs = (now: number, iso: string | undefined): number => {
  const at = iso === undefined ? NaN : Date.parse(iso);
  return Number.isNaN(at) ? 0 : Math.max(0, now - at);
};

/** serve's queue as gauges: depth by state, the oldest change waiting, continuations, dead letters. */
export function queueSampler(
  queue: Pick<SqliteRolloutQueue, 'counts' | 'backlog'>,
  now: () => number = Date.now,
): Sampler {
  return () => {
    const { available, inFlight, deadLetters } = queue.counts();
    const backlog = queue.backlog();
    const t = now();
    return [
      { name: METRICS.queueDepth, value: available, labels: { state: 'available' } },
      { name: METRICS.queueDepth, value: inFlight, labels: { state: 'in_flight' } },
      { name: METRICS.queueOldestMessageAge, value: ageMs(t, backlog.oldestChangeAcceptedAt) },
      { name: METRICS.continuationsPending, value: backlog.continuations },
      { name: METRICS.continuationOldestAge, value: ageMs(t, backlog.oldestContinuationSince) },
      { name: METRICS.deadLetters, value: deadLetters },
    ];
  };
}

/** The relay's counters, its spool's size, and how long its oldest batch has waited for delivery (the file's age). */
export function relaySampler(relay: Pick<RunningRelay, 'counters' | 'spool'>, now: () => number = Date.now): Sampler {
  return async () => {
    const snapshot = relay.counters.snapshot();
    const samples: Sample[] = [
      { name: METRICS.relayRecords, value: snapshot.received, labels: { stage: 'received' } },
      { name: METRICS.relayRecords, value: snapshot.spooled, labels: { stage: 'spooled' } },
      { name: METRICS.relayRecords, value: snapshot.delivered, labels: { stage: 'delivered' } },
      ...Object.entries(snapshot.dropped).map(([reason, value]) => ({
        name: METRICS.relayRecordsDropped,
        value: value ?? 0,
        labels: { reason },
      })),
      { name: METRICS.relaySpoolBytes, value: relay.spool.usedBytes },
    ];
    const oldest = relay.spool.entries()[0];
    let lag = 0;
    if (oldest !== undefined) {
      // Delivered (and removed) since entries() was read: nothing waits from that batch.
      lag = await stat(oldest.file).then(
        (s) => Math.max(0, now() - s.mtimeMs),
        () => 0,
      );
    }
    samples.push({ name: METRICS.relayDeliveryLag, value: lag });
    return samples;
  };
}

/** Starts the scrape listener when --metrics-port is given; a usage error text when the flags are wrong. */
export async function startMetricsListener(
  io: CliIo,
  command: string,
  metrics: PrometheusMetrics,
  values: { 'metrics-port'?: number | undefined; 'metrics-host': string; quiet?: boolean },
): Promise<MetricsServer | undefined | { error: string }> {
  // A port number from 0 to 65535: bounded by the spec.
  const port = values['metrics-port'];
  if (port === undefined) return undefined;
  try {
    const server = await startMetricsServer(metrics, values['metrics-host'], port);
    if (values.quiet !== true)
      io.stderr(
        `vault-rollout ${command}: metrics on http://${values['metrics-host']}:${server.port}/metrics (no authentication: bind it where only the scraper reaches)\n`,
      );
    return server;
  } catch (e) {
    return { error: `cannot listen for metrics on ${values['metrics-host']}:${port}: ${listenErrorText(e)}` };
  }
}
