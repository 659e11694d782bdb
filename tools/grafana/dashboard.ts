/**
 * The Grafana dashboard of vault-rollout's Prometheus metrics (docs/how-to/metrics-and-dashboards.md), as code. `npm run dashboard`
 * writes it to infra/helm/vault-rollout/dashboards/vault-rollout.json: the file to import into Grafana, and the one
 * the chart ships as a ConfigMap for Grafana's dashboard sidecar (`grafanaDashboard.enabled`).
 *
 * Metric names come from METRIC_SPECS through `prometheusName`, so a renamed metric changes the file (the test says
 * it is stale) instead of leaving a panel empty. Every selector carries `job` and `instance` (the scrape target's
 * labels) and, on metrics with a `cluster` label, `cluster`: the dashboard's variables. Panels are laid out by
 * `layout` in rows of 24 columns, ids and positions computed, so none overlap.
 * test/unit/tools/grafana-dashboard.test.ts holds the file to Grafana's dashboard schema (@grafana/schema) and to
 * METRIC_SPECS (every metric and label a query names exists).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { METRIC_SPECS, METRICS, prometheusName, type MetricName } from '../../lib/kernel/telemetry.ts';

/** Where `npm run dashboard` writes the dashboard: inside the chart, because Helm reads files only from there. */
export const DASHBOARD_FILE = 'infra/helm/vault-rollout/dashboards/vault-rollout.json';
export const DASHBOARD_UID = 'vault-rollout';
/** The dashboard JSON model's version these panels are written for; Grafana migrates a lower one when it loads it. */
export const SCHEMA_VERSION = 41;

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' } as const;

type Json = Record<string, unknown>;
interface Target {
  expr: string;
  legendFormat: string;
  /** Instant queries: a stat of the whole range. */
  instant?: boolean;
  format?: 'time_series' | 'heatmap';
}
interface PanelSpec {
  title: string;
  description: string;
  type: 'timeseries' | 'stat' | 'heatmap';
  targets: Target[];
  unit: string;
  /** Columns of 24; every panel of a row is 8 high. */
  width: number;
  /** Stats: red from this value on. */
  redFrom?: number;
  /** Time series: the metrics are counts of events, drawn as bars. */
  bars?: boolean;
}
interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

/**
 * A selector of `name` filtered by the dashboard's variables: `job` and `instance` always, `cluster` when the metric
 * has that label. `suffix` picks a histogram's `_bucket`, `_sum` or `_count` series.
 */
export function selector(name: MetricName, suffix: '' | '_bucket' | '_sum' | '_count' = ''): string {
  const matchers = [
    'job=~"$job"',
    'instance=~"$instance"',
    ...(METRIC_SPECS[name].labels.includes('cluster') ? ['cluster=~"$cluster"'] : []),
  ];
  return `${prometheusName(name)}${suffix}{${matchers.join(', ')}}`;
}

const rate = (name: MetricName, suffix: '' | '_bucket' | '_count' = '') =>
  `rate(${selector(name, suffix)}[$__rate_interval])`;
const inRange = (name: MetricName, suffix: '' | '_count' = '') => `increase(${selector(name, suffix)}[$__range])`;
const quantile = (q: number, name: MetricName, by: string[] = []) =>
  `histogram_quantile(${q}, sum by (${[...by, 'le'].join(', ')}) (${rate(name, '_bucket')}))`;
const quantiles = (name: MetricName, by: string[]): Target[] =>
  [0.5, 0.9, 0.99].map((q) => ({
    expr: quantile(q, name, by),
    legendFormat: `p${q * 100}${by.map((l) => ` {{${l}}}`).join('')}`,
  }));

const ROWS: RowSpec[] = [
  {
    title: 'Intake',
    panels: [
      {
        title: 'Changes received',
        type: 'timeseries',
        unit: 'ops',
        width: 8,
        description: 'Vault KV changes the intake accepted, per second.',
        targets: [{ expr: `sum by (job) (${rate(METRICS.changesReceived)})`, legendFormat: '{{job}}' }],
      },
      {
        title: 'Records ignored and rejected, by reason',
        type: 'timeseries',
        unit: 'ops',
        width: 8,
        description:
          'Records understood and ignored, by reason (reads, non-KV, sys ...), and records the intake could not read (their reason is free text: it is in the log, not a label).',
        targets: [
          { expr: `sum by (reason) (${rate(METRICS.recordsIgnored)})`, legendFormat: 'ignored: {{reason}}' },
          { expr: `sum(${rate(METRICS.recordsRejected)})`, legendFormat: 'rejected' },
        ],
      },
      {
        title: 'Refused messages and lost visibility',
        type: 'timeseries',
        unit: 'short',
        width: 8,
        bars: true,
        description:
          'Queue messages the worker refused (forged, foreign or unreadable: dead-lettered, never executed), and messages the queue took back before the worker handed them back (redelivered).',
        targets: [
          { expr: `sum(increase(${selector(METRICS.refusedMessages)}[$__rate_interval]))`, legendFormat: 'refused' },
          {
            expr: `sum(increase(${selector(METRICS.visibilityLost)}[$__rate_interval]))`,
            legendFormat: 'visibility lost',
          },
        ],
      },
    ],
  },
  {
    title: 'Restarts and rollouts',
    panels: [
      {
        title: 'Restarts by cluster and outcome',
        type: 'timeseries',
        unit: 'ops',
        width: 12,
        description:
          'Restart targets worked per second, by cluster and outcome (restarted, unchanged, skipped, failed, deferred ...).',
        targets: [
          { expr: `sum by (cluster, outcome) (${rate(METRICS.targets)})`, legendFormat: '{{cluster}} {{outcome}}' },
        ],
      },
      {
        title: 'Rollouts by outcome (in range)',
        type: 'stat',
        unit: 'short',
        width: 12,
        description: 'Rollouts that ended in the selected time range, by outcome: complete, failed, timeout.',
        targets: [
          {
            expr: `sum by (outcome) (${inRange(METRICS.rolloutDuration, '_count')})`,
            legendFormat: '{{outcome}}',
            instant: true,
          },
        ],
      },
      {
        title: 'Rollout duration',
        type: 'heatmap',
        unit: 's',
        width: 12,
        description: 'From the restart patch to the end of the rollout, as the histogram buckets count them.',
        targets: [
          {
            expr: `sum by (le) (increase(${selector(METRICS.rolloutDuration, '_bucket')}[$__rate_interval]))`,
            legendFormat: '{{le}}',
            format: 'heatmap',
          },
        ],
      },
      {
        title: 'Rollout duration quantiles by outcome',
        type: 'timeseries',
        unit: 's',
        width: 12,
        description: 'p50, p90 and p99 of the rollout duration, by outcome (complete, failed, timeout).',
        targets: quantiles(METRICS.rolloutDuration, ['outcome']),
      },
      {
        title: 'Vault change to patch, by cluster',
        type: 'timeseries',
        unit: 's',
        width: 24,
        description:
          'From the time Vault recorded the change to its accepted restart patch: p50, p90 and p99 by cluster.',
        targets: quantiles(METRICS.lag, ['cluster']),
      },
    ],
  },
  {
    title: 'Waves, gates and halts',
    panels: [
      {
        title: 'Gate decisions',
        type: 'timeseries',
        unit: 'short',
        width: 8,
        bars: true,
        description:
          'Wave gate decisions: released (the next wave queued, also after a failure with onFailure: continue) or halted.',
        targets: [
          {
            expr: `sum by (decision) (increase(${selector(METRICS.gateDecisions)}[$__rate_interval]))`,
            legendFormat: '{{decision}}',
          },
        ],
      },
      {
        title: 'Halted rotations (in range)',
        type: 'stat',
        unit: 'short',
        width: 4,
        redFrom: 1,
        description:
          'Rotations a wave gate halted in the selected time range: later waves are not restarted until a fixed version is written (docs/how-to/waves-and-gates.md).',
        targets: [{ expr: `sum(${inRange(METRICS.haltedRotations)})`, legendFormat: 'halted', instant: true }],
      },
      {
        title: 'Continuations pending',
        type: 'timeseries',
        unit: 'short',
        width: 6,
        description: "Continuations in serve's queue: restarts whose rollouts are still followed.",
        targets: [
          { expr: `sum by (instance) (${selector(METRICS.continuationsPending)})`, legendFormat: '{{instance}}' },
        ],
      },
      {
        title: 'Oldest continuation age',
        type: 'timeseries',
        unit: 's',
        width: 6,
        description: 'Age of the oldest continuation since its restart; 0 when none.',
        targets: [
          { expr: `max by (instance) (${selector(METRICS.continuationOldestAge)})`, legendFormat: '{{instance}}' },
        ],
      },
    ],
  },
  {
    title: "serve's queue",
    panels: [
      {
        title: 'Queue depth by state',
        type: 'timeseries',
        unit: 'short',
        width: 10,
        description: "Messages in serve's queue: available (waiting, or held for a delay) and in flight.",
        targets: [
          {
            expr: `sum by (instance, state) (${selector(METRICS.queueDepth)})`,
            legendFormat: '{{instance}} {{state}}',
          },
        ],
      },
      {
        title: 'Oldest message age',
        type: 'timeseries',
        unit: 's',
        width: 10,
        description: 'Age of the oldest change waiting to be worked (continuations and gates left out); 0 when none.',
        targets: [
          { expr: `max by (instance) (${selector(METRICS.queueOldestMessageAge)})`, legendFormat: '{{instance}}' },
        ],
      },
      {
        title: 'Dead letters',
        type: 'stat',
        unit: 'short',
        width: 4,
        redFrom: 1,
        description: "serve's dead letters (refused, or failed 5 times), kept for an operator.",
        targets: [{ expr: `sum(${selector(METRICS.deadLetters)})`, legendFormat: 'dead letters', instant: true }],
      },
    ],
  },
  {
    title: 'Notifications',
    panels: [
      {
        title: 'Notification deliveries by outcome',
        type: 'timeseries',
        unit: 'short',
        width: 24,
        bars: true,
        description:
          'Deliveries to the notification sinks (docs/how-to/notifications.md): sent, retry (failed, tried again later) or dropped (out of attempts, or no such sink).',
        targets: [
          {
            expr: `sum by (outcome) (increase(${selector(METRICS.notifications)}[$__rate_interval]))`,
            legendFormat: '{{outcome}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Kubernetes and Vault requests',
    panels: [
      {
        title: 'Kubernetes request latency by cluster',
        type: 'timeseries',
        unit: 's',
        width: 12,
        description: 'Kubernetes API request latency (watches excluded: long by design), p50 and p99 by cluster.',
        targets: [0.5, 0.99].map((q) => ({
          expr: quantile(q, METRICS.kubeRequestDuration, ['cluster']),
          legendFormat: `p${q * 100} {{cluster}}`,
        })),
      },
      {
        title: 'Kubernetes request errors by cluster',
        type: 'timeseries',
        unit: 'ops',
        width: 12,
        description:
          'Kubernetes API requests that failed, per second, by cluster and outcome (client_error, server_error, no_answer).',
        targets: [
          {
            expr: `sum by (cluster, outcome) (${rate(METRICS.kubeRequestErrors)})`,
            legendFormat: '{{cluster}} {{outcome}}',
          },
        ],
      },
      {
        title: 'Vault request latency',
        type: 'timeseries',
        unit: 's',
        width: 12,
        description: 'Vault API request latency (metadata reads, logins, event subscriptions), p50 and p99 by outcome.',
        targets: [0.5, 0.99].map((q) => ({
          expr: quantile(q, METRICS.vaultRequestDuration, ['outcome']),
          legendFormat: `p${q * 100} {{outcome}}`,
        })),
      },
      {
        title: 'Vault request errors',
        type: 'timeseries',
        unit: 'ops',
        width: 12,
        description: 'Vault API requests that failed, per second, by outcome (client_error, server_error, no_answer).',
        targets: [{ expr: `sum by (outcome) (${rate(METRICS.vaultRequestErrors)})`, legendFormat: '{{outcome}}' }],
      },
    ],
  },
  {
    title: 'Relay',
    panels: [
      {
        title: 'Relay records by stage',
        type: 'timeseries',
        unit: 'ops',
        width: 6,
        description: 'Records the relay received, spooled and delivered, per second.',
        targets: [{ expr: `sum by (stage) (${rate(METRICS.relayRecords)})`, legendFormat: '{{stage}}' }],
      },
      {
        title: 'Relay records dropped by reason',
        type: 'timeseries',
        unit: 'ops',
        width: 6,
        description:
          'Records the relay dropped, per second, by reason (spool-full, overload, rejected, too-large ...).',
        targets: [{ expr: `sum by (reason) (${rate(METRICS.relayRecordsDropped)})`, legendFormat: '{{reason}}' }],
      },
      {
        title: 'Relay spool',
        type: 'timeseries',
        unit: 'bytes',
        width: 6,
        description: "Bytes in the relay's spool, on disk and on their way to it.",
        targets: [{ expr: `sum by (instance) (${selector(METRICS.relaySpoolBytes)})`, legendFormat: '{{instance}}' }],
      },
      {
        title: 'Relay delivery lag',
        type: 'timeseries',
        unit: 's',
        width: 6,
        description: 'Age of the oldest spooled batch not yet delivered; 0 when none.',
        targets: [{ expr: `max by (instance) (${selector(METRICS.relayDeliveryLag)})`, legendFormat: '{{instance}}' }],
      },
    ],
  },
];

const PANEL_HEIGHT = 8;
const GRID_WIDTH = 24;

const thresholds = (redFrom?: number) => ({
  mode: 'absolute',
  steps: [{ color: 'green', value: null }, ...(redFrom === undefined ? [] : [{ color: 'red', value: redFrom }])],
});

function panelJson(spec: PanelSpec, id: number, gridPos: { x: number; y: number; w: number; h: number }): Json {
  const targets = spec.targets.map((t, i) => ({
    datasource: DATASOURCE,
    refId: String.fromCharCode(65 + i),
    expr: t.expr,
    legendFormat: t.legendFormat,
    range: t.instant !== true,
    instant: t.instant === true,
    ...(t.format ? { format: t.format } : {}),
  }));
  const base = {
    id,
    type: spec.type,
    title: spec.title,
    description: spec.description,
    datasource: DATASOURCE,
    gridPos,
    targets,
  };
  if (spec.type === 'stat') {
    return {
      ...base,
      fieldConfig: {
        defaults: {
          unit: spec.unit,
          min: 0,
          decimals: 0,
          color: { mode: 'thresholds' },
          thresholds: thresholds(spec.redFrom),
        },
        overrides: [],
      },
      options: {
        reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
        orientation: 'auto',
        textMode: 'value_and_name',
        wideLayout: true,
        colorMode: 'background',
        graphMode: 'none',
        justifyMode: 'auto',
        showPercentChange: false,
        percentChangeColorMode: 'standard',
      },
    };
  }
  if (spec.type === 'heatmap') {
    return {
      ...base,
      maxDataPoints: 60,
      fieldConfig: {
        defaults: {
          custom: { hideFrom: { legend: false, tooltip: false, viz: false }, scaleDistribution: { type: 'linear' } },
        },
        overrides: [],
      },
      options: {
        calculate: false,
        cellGap: 1,
        color: {
          mode: 'scheme',
          scheme: 'Oranges',
          fill: 'dark-orange',
          scale: 'exponential',
          exponent: 0.5,
          steps: 64,
          reverse: false,
        },
        exemplars: { color: 'rgba(255,0,255,0.7)' },
        filterValues: { le: 1e-9 },
        legend: { show: true },
        rowsFrame: { layout: 'auto' },
        showValue: 'never',
        tooltip: { mode: 'single', yHistogram: false, showColorScale: false },
        yAxis: { axisPlacement: 'left', unit: spec.unit, reverse: false },
      },
    };
  }
  return {
    ...base,
    fieldConfig: {
      defaults: {
        unit: spec.unit,
        min: 0,
        color: { mode: 'palette-classic' },
        custom: spec.bars
          ? {
              drawStyle: 'bars',
              fillOpacity: 80,
              lineWidth: 1,
              showPoints: 'never',
              stacking: { mode: 'normal', group: 'A' },
            }
          : {
              drawStyle: 'line',
              fillOpacity: 10,
              lineWidth: 1,
              showPoints: 'never',
              spanNulls: false,
              stacking: { mode: 'none', group: 'A' },
            },
        thresholds: thresholds(),
      },
      overrides: [],
    },
    options: {
      legend: { showLegend: true, displayMode: 'list', placement: 'bottom', calcs: [] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  };
}

/** Rows one under another, each row's panels left to right, wrapping at 24 columns: ids from 1, no overlap. */
function layout(rows: readonly RowSpec[]): Json[] {
  const panels: Json[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows) {
    panels.push({
      id: id++,
      type: 'row',
      title: row.title,
      collapsed: false,
      gridPos: { x: 0, y, w: GRID_WIDTH, h: 1 },
      panels: [],
    });
    y += 1;
    let x = 0;
    for (const spec of row.panels) {
      if (spec.width > GRID_WIDTH)
        throw new Error(`panel "${spec.title}" is ${spec.width} columns wide; the grid has ${GRID_WIDTH}`);
      if (x + spec.width > GRID_WIDTH) {
        x = 0;
        y += PANEL_HEIGHT;
      }
      panels.push(panelJson(spec, id++, { x, y, w: spec.width, h: PANEL_HEIGHT }));
      x += spec.width;
    }
    y += PANEL_HEIGHT;
  }
  return panels;
}

/** A query variable of the dashboard's data source, every value by default. */
function queryVariable(name: string, label: string, query: string, description: string): Json {
  return {
    name,
    label,
    description,
    type: 'query',
    datasource: DATASOURCE,
    // The plain-text form, which every Grafana version reads (newer ones turn it into their query editor's object).
    query,
    refresh: 2,
    sort: 1,
    includeAll: true,
    allValue: '.*',
    multi: true,
    current: { selected: true, text: ['All'], value: ['$__all'] },
    options: [],
    hide: 0,
  };
}

/**
 * The variables: the Prometheus data source, then `job`, `instance` and `cluster`, each chained to the one before.
 * `vault_rollout_changes_received_total` has no labels of its own, so every serve, worker and relay exposes it from
 * its first scrape (prom-client starts a label-less counter at 0): it finds every scraped vault-rollout process.
 */
function variables(): Json[] {
  const everyProcess = prometheusName(METRICS.changesReceived);
  const targets = prometheusName(METRICS.targets);
  return [
    {
      name: 'datasource',
      label: 'Data source',
      type: 'datasource',
      query: 'prometheus',
      options: [],
      hide: 0,
      regex: '',
      description: 'The Prometheus that scrapes vault-rollout',
    },
    queryVariable('job', 'Job', `label_values(${everyProcess}, job)`, 'The scrape jobs of serve, worker and relay'),
    queryVariable(
      'instance',
      'Instance',
      `label_values(${everyProcess}{job=~"$job"}, instance)`,
      'The scraped processes',
    ),
    queryVariable(
      'cluster',
      'Cluster',
      `label_values(${targets}{job=~"$job", instance=~"$instance"}, cluster)`,
      "The routing table's clusters",
    ),
  ];
}

export function grafanaDashboard(): Json {
  return {
    uid: DASHBOARD_UID,
    title: 'vault-rollout',
    description:
      'Vault KV rotations restarting Kubernetes workloads: intake, restarts and rollouts, gates and halts, the queue, Kubernetes and Vault requests, the relay (docs/how-to/metrics-and-dashboards.md).',
    tags: ['vault-rollout', 'vault', 'kubernetes'],
    editable: true,
    graphTooltip: 1,
    timezone: 'browser',
    time: { from: 'now-6h', to: 'now' },
    timepicker: {},
    refresh: '30s',
    schemaVersion: SCHEMA_VERSION,
    version: 1,
    fiscalYearStartMonth: 0,
    liveNow: false,
    weekStart: '',
    links: [],
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
      ],
    },
    templating: { list: variables() },
    panels: layout(ROWS),
  };
}

/** The file's text: two-space JSON and a final newline, as committed. */
export const dashboardText = (): string => `${JSON.stringify(grafanaDashboard(), null, 2)}\n`;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(new URL(`../../${DASHBOARD_FILE}`, import.meta.url), dashboardText());
  process.stdout.write(`wrote ${DASHBOARD_FILE}\n`);
}
