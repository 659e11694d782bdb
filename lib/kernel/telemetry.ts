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
  /** Rotations a wave's gate halted: later waves not restarted. Alarmed. */
  haltedRotations: 'HaltedRotations',
  /**
   * Messages the queue took back before the worker handed them back (a refused heartbeat, delete, release or defer:
   * the visibility had run out). They are redelivered; the restart record keeps the re-run from restarting twice.
   */
  visibilityLost: 'VisibilityLost',
  /** From a restart's patch to its rollout's end (complete, failed, timeout), as the step or a continuation sees it. */
  rolloutDuration: 'RolloutDuration',
  /** A wave's gate decided: `released` the next wave (passed, or failed with onFailure: continue) or `halted`. */
  gateDecisions: 'GateDecisions',
  /** Kubernetes API requests (watches excluded: they are long by design), by cluster, method and outcome. */
  kubeRequestDuration: 'KubeRequestDuration',
  kubeRequestErrors: 'KubeRequestErrors',
  /** Vault API requests (metadata reads, logins, event subscriptions' set-up), by outcome. */
  vaultRequestDuration: 'VaultRequestDuration',
  vaultRequestErrors: 'VaultRequestErrors',
  /** serve's queue, sampled when scraped: messages by state, the oldest change waiting, continuations, dead letters. */
  queueDepth: 'QueueDepth',
  queueOldestMessageAge: 'QueueOldestMessageAge',
  continuationsPending: 'ContinuationsPending',
  continuationOldestAge: 'ContinuationOldestAge',
  deadLetters: 'DeadLetters',
  /**
   * The relay, sampled when scraped: records by stage, dropped by reason, the spool's bytes, the oldest batch waiting.
   */
  relayRecords: 'RelayRecords',
  relayRecordsDropped: 'RelayRecordsDropped',
  relaySpoolBytes: 'RelaySpoolBytes',
  relayDeliveryLag: 'RelayDeliveryLag',
  /** Notification deliveries by outcome: sent, retry (failed, tried again later), dropped (out of attempts). */
  notifications: 'Notifications',
} as const;
export type MetricName = (typeof METRICS)[keyof typeof METRICS];

/**
 * How each metric is exposed, beside its name: the one table both CloudWatch EMF (Lambda, `serve`) and Prometheus
 * (`/metrics`) read, so the two never disagree. Prometheus names are derived (`prometheusName`). Labels are the only
 * dimensions kept, and each is a bounded enum or a routing-table cluster: never a Vault path, a workload name, a
 * token, a digest or a value. `emf: false`: sampled or per-request metrics Prometheus alone carries (one EMF document
 * per Kubernetes request would cost more than the request).
 */
export interface MetricSpec {
  type: 'counter' | 'histogram' | 'gauge';
  help: string;
  labels: readonly MetricLabel[];
  emf: boolean;
}
export const METRIC_LABELS = ['cluster', 'outcome', 'reason', 'decision', 'method', 'state', 'stage'] as const;
export type MetricLabel = (typeof METRIC_LABELS)[number];

export const METRIC_SPECS: Readonly<Record<MetricName, MetricSpec>> = {
  ChangesReceived: { type: 'counter', help: 'Vault KV changes accepted by the intake', labels: [], emf: true },
  RecordsIgnored: {
    type: 'counter',
    help: 'Records understood and ignored (reads, non-KV, sys ...), by reason',
    labels: ['reason'],
    emf: true,
  },
  RecordsRejected: {
    type: 'counter',
    help: 'Records the intake could not read (the reason is free text, so it is logged, not a label)',
    labels: [],
    emf: true,
  },
  Targets: {
    type: 'counter',
    help: 'Restart targets worked, by cluster and outcome (restarted, unchanged, failed, deferred ...)',
    labels: ['cluster', 'outcome'],
    emf: true,
  },
  VaultToPatchLag: {
    type: 'histogram',
    help: 'From the Vault change to its accepted patch',
    labels: ['cluster'],
    emf: true,
  },
  RefusedMessages: {
    type: 'counter',
    help: 'Queue messages the worker refused (never executed) and dead-lettered',
    labels: [],
    emf: true,
  },
  HaltedRotations: { type: 'counter', help: 'Rotations a wave gate halted', labels: [], emf: true },
  VisibilityLost: {
    type: 'counter',
    help: 'Messages the queue took back before the worker handed them back',
    labels: [],
    emf: true,
  },
  RolloutDuration: {
    type: 'histogram',
    help: 'From the restart patch to the rollout end, by cluster and outcome (complete, failed, timeout)',
    labels: ['cluster', 'outcome'],
    emf: true,
  },
  GateDecisions: {
    type: 'counter',
    help: 'Wave gate decisions: released (the next wave) or halted',
    labels: ['decision'],
    emf: true,
  },
  KubeRequestDuration: {
    type: 'histogram',
    help: 'Kubernetes API request latency (watches excluded), by cluster, method and outcome',
    labels: ['cluster', 'method', 'outcome'],
    emf: false,
  },
  KubeRequestErrors: {
    type: 'counter',
    help: 'Kubernetes API requests that failed (HTTP 4xx/5xx or no answer), by cluster and outcome',
    labels: ['cluster', 'outcome'],
    emf: false,
  },
  VaultRequestDuration: {
    type: 'histogram',
    help: 'Vault API request latency, by outcome',
    labels: ['outcome'],
    emf: false,
  },
  VaultRequestErrors: {
    type: 'counter',
    help: 'Vault API requests that failed (HTTP 4xx/5xx or no answer), by outcome',
    labels: ['outcome'],
    emf: false,
  },
  QueueDepth: {
    type: 'gauge',
    help: "serve's queue: messages by state (available, in_flight)",
    labels: ['state'],
    emf: false,
  },
  QueueOldestMessageAge: {
    type: 'gauge',
    help: "serve's queue: age of the oldest change waiting to be worked (continuations and gates excluded), 0 when none",
    labels: [],
    emf: false,
  },
  ContinuationsPending: {
    type: 'gauge',
    help: 'Continuations in the queue: restarts whose rollouts are still followed',
    labels: [],
    emf: false,
  },
  ContinuationOldestAge: {
    type: 'gauge',
    help: 'Age of the oldest continuation (since its restart), 0 when none',
    labels: [],
    emf: false,
  },
  DeadLetters: {
    type: 'gauge',
    help: "serve's dead letters (refused or failed 5 times), kept for an operator",
    labels: [],
    emf: false,
  },
  RelayRecords: {
    type: 'counter',
    help: 'Relay records by stage (received, spooled, delivered)',
    labels: ['stage'],
    emf: false,
  },
  RelayRecordsDropped: { type: 'counter', help: 'Relay records dropped, by reason', labels: ['reason'], emf: false },
  RelaySpoolBytes: {
    type: 'gauge',
    help: "Bytes in the relay's spool (on disk and on their way to it)",
    labels: [],
    emf: false,
  },
  RelayDeliveryLag: {
    type: 'gauge',
    help: 'Age of the oldest batch in the relay spool not yet delivered, 0 when none',
    labels: [],
    emf: false,
  },
  Notifications: {
    type: 'counter',
    help: 'Notification deliveries by outcome: sent, retry (failed, tried again later), dropped (out of attempts or no such sink)',
    labels: ['outcome'],
    emf: true,
  },
};

/** `ChangesReceived` -> `vault_rollout_changes_received_total`; milliseconds become seconds, as Prometheus expects. */
export function prometheusName(name: MetricName): string {
  const snake = name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
  const spec = METRIC_SPECS[name];
  if (spec.type === 'counter') return `vault_rollout_${snake}_total`;
  // Durations, lags and ages are measured in milliseconds and exposed in seconds.
  if (/(duration|lag|age)$/.test(snake)) return `vault_rollout_${snake}_seconds`;
  return `vault_rollout_${snake}`;
}

/**
 * A process-wide observer for the adapters below the telemetry (the Kubernetes and Vault request functions, which
 * carry no Telemetry): a no-op until a Prometheus registry is installed (`serve`, `worker`, `relay` with metrics).
 */
export type MetricObserver = (name: MetricName, value: number, labels?: Partial<Record<MetricLabel, string>>) => void;
let observer: MetricObserver | undefined;
export function setMetricObserver(next: MetricObserver | undefined): void {
  observer = next;
}
/** The outcome label of one API request: an HTTP status class, or `no_answer` (timeout, reset, refused). */
export type RequestOutcome = 'ok' | 'client_error' | 'server_error' | 'no_answer';
export function requestOutcome(status: number | undefined): RequestOutcome {
  if (status === undefined || status === 0) return 'no_answer';
  if (status < 400) return 'ok';
  return status < 500 ? 'client_error' : 'server_error';
}

export function observeMetric(name: MetricName, value: number, labels?: Partial<Record<MetricLabel, string>>): void {
  observer?.(name, value, labels);
}

/** For tests: everything recorded in memory. */
export function memoryTelemetry(): Telemetry & {
  lines: Array<{ level: string; message: string; fields?: Fields }>;
  metrics: Array<{ name: string; value: number; dimensions?: Record<string, string> }>;
} {
  const lines: Array<{ level: string; message: string; fields?: Fields }> = [];
  const metrics: Array<{ name: string; value: number; dimensions?: Record<string, string> }> = [];
  const log = (level: string) => (message: string, fields?: Fields) =>
    void lines.push({ level, message, ...(fields ? { fields } : {}) });
  return {
    lines,
    metrics,
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    metric: (name, value, _unit, dimensions) =>
      void metrics.push({ name, value, ...(dimensions ? { dimensions } : {}) }),
    setCorrelationId: () => {},
    flush: () => {},
  };
}
