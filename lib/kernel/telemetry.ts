/**
 * Logs and metrics as the pipeline needs them, behind one small interface: Powertools for AWS Lambda (structured
 * JSON logs, metrics in EMF) in Lambda and `serve`, an in-memory recorder in tests. Fields never carry values of
 * secrets, tokens or kubeconfigs: callers pass paths, versions, counts and reasons only.
 */
export type Fields = Record<string, unknown>;

export interface Telemetry {
  info(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  error(message: string, fields?: Fields): void;
  /** A metric with optional dimensions (one EMF document per dimension set). */
  metric(name: MetricName, value: number, unit: 'Count' | 'Milliseconds', dimensions?: Record<string, string>): void;
  /** Correlation id of the log lines that follow (the Vault request or event id). */
  setCorrelationId(id: string | undefined): void;
  flush(): void;
}

export const METRICS = {
  changesReceived: 'ChangesReceived',
  recordsIgnored: 'RecordsIgnored',
  recordsRejected: 'RecordsRejected',
  targets: 'Targets',
  lag: 'VaultToPatchLag',
  /** Queue messages refused by the worker (forged, foreign or unreadable): never executed. Alarmed. */
  refusedMessages: 'RefusedMessages',
  /** Rotations a wave's gate halted (issue #12): later waves not restarted. Alarmed. */
  haltedRotations: 'HaltedRotations',
  /**
   * Messages the queue took back before the worker handed them back (a refused heartbeat, delete, release or defer:
   * the visibility had run out). They are redelivered; the restart record keeps the re-run from restarting twice.
   */
  visibilityLost: 'VisibilityLost',
} as const;
export type MetricName = (typeof METRICS)[keyof typeof METRICS];

/** For tests: everything recorded in memory. */
export function memoryTelemetry(): Telemetry & { lines: Array<{ level: string; message: string; fields?: Fields }>; metrics: Array<{ name: string; value: number; dimensions?: Record<string, string> }> } {
  const lines: Array<{ level: string; message: string; fields?: Fields }> = [];
  const metrics: Array<{ name: string; value: number; dimensions?: Record<string, string> }> = [];
  const log = (level: string) => (message: string, fields?: Fields) => void lines.push({ level, message, ...(fields ? { fields } : {}) });
  return {
    lines,
    metrics,
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    metric: (name, value, _unit, dimensions) => void metrics.push({ name, value, ...(dimensions ? { dimensions } : {}) }),
    setCorrelationId: () => {},
    flush: () => {},
  };
}
