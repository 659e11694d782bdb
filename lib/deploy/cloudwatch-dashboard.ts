/**
 * A stage's CloudWatch dashboard (serverless.yml `Dashboard`, through infra/serverless/dashboard.js): the metrics the
 * functions write in EMF (METRIC_SPECS with `emf: true`), in the stage's namespace and with the dimension set
 * Powertools writes each with — `service`, then the metric's labels — beside what AWS publishes of the functions and
 * queues, and the stack's alarms. The per-request and sampled metrics (`emf: false`) are Prometheus's alone: the
 * Grafana dashboard shows them (docs/how-to/metrics-and-dashboards.md).
 *
 * Pure. The body holds CloudFormation references (`${AWS::Region}`, `${WorkerLambdaFunction}`,
 * `${RolloutQueue.QueueName}`) for `Fn::Sub`, so it names this stack's functions and queues, never an account.
 * A metric with labels is read with a SEARCH over its dimension set, so each cluster, outcome or reason is a line
 * without the dashboard knowing them.
 */
import { METRIC_SPECS, METRICS, type MetricName } from '../kernel/telemetry.ts';

export interface CloudWatchDashboardOptions {
  /** POWERTOOLS_METRICS_NAMESPACE of the stage's functions. */
  namespace: string;
  /** POWERTOOLS_SERVICE_NAME: the `service` dimension Powertools puts on every metric. */
  service: string;
  stage: string;
}

/** What a widget of the body holds (the CloudWatch dashboard body structure, the parts used here). */
export interface DashboardWidget {
  type: 'metric' | 'text' | 'alarm';
  x: number;
  y: number;
  width: number;
  height: number;
  properties: Record<string, unknown>;
}
export interface DashboardBody {
  start: string;
  periodOverride: 'auto' | 'inherit';
  widgets: DashboardWidget[];
}

/** The dimensions Powertools writes a metric with: its default `service`, then the labels the telemetry passes. */
export const emfDimensions = (name: MetricName): string[] => ['service', ...METRIC_SPECS[name].labels];

/** The alarms serverless.yml defines (their Ref is the alarm name), shown in the dashboard's alarm widget. */
export const STACK_ALARMS = [
  'HaltedRotationsAlarm',
  'RefusedMessagesAlarm',
  'DeadLetterQueueDepthAlarm',
  'LogsFailureQueueDepthAlarm',
  'RolloutQueueAgeAlarm',
  'WorkerErrorsAlarm',
  'HttpErrorsAlarm',
  'LogsErrorsAlarm',
  'ReconcileErrorsAlarm',
  'NotifyErrorsAlarm',
  'NotificationsDroppedAlarm',
] as const;
/** The functions (osls names their logical ids `<Name>LambdaFunction`; the Ref is the function name). */
const FUNCTIONS = ['http', 'logs', 'worker', 'reconcile', 'notify'] as const;
const functionRef = (fn: string) => `\${${fn[0]?.toUpperCase()}${fn.slice(1)}LambdaFunction}`;

const PERIOD = 300;
const GRID_WIDTH = 24;
const HEIGHT = 6;
const REGION = '${AWS::Region}';

type MetricRow = unknown[];
interface MetricWidget {
  title: string;
  width: number;
  metrics: MetricRow[];
  stat?: string;
  /** Seconds, or the unit Powertools wrote (milliseconds for times). */
  label?: string;
}

/** The rows of metrics of one dashboard: each row's id is the next of the dashboard (`m1`, `m2`, ...). */
class MetricRows {
  #ids = 0;
  readonly namespace: string;
  readonly service: string;

  constructor(namespace: string, service: string) {
    this.namespace = namespace;
    this.service = service;
  }

  #id(): string {
    return `m${++this.#ids}`;
  }

  /** A metric without labels: its one series, `service` its only dimension. */
  single(name: MetricName, stat: string, label: string): MetricRow {
    if (METRIC_SPECS[name].labels.length > 0) throw new Error(`${name} has labels: read it with search()`);
    return [this.namespace, name, 'service', this.service, { stat, label, id: this.#id() }];
  }

  /** A metric with labels: every series of its dimension set, one line per label set. */
  search(name: MetricName, stat: string, label = ''): MetricRow {
    const schema = [this.namespace, ...emfDimensions(name)].map((d) => (/^[\w/]+$/.test(d) ? d : `"${d}"`)).join(',');
    return [
      {
        expression: `SEARCH('{${schema}} MetricName="${name}" service="${this.service}"', '${stat}', ${PERIOD})`,
        id: this.#id(),
        label,
      },
    ];
  }

  lambda(metric: string, stat: string, what = ''): MetricRow[] {
    return FUNCTIONS.map((fn) => [
      'AWS/Lambda',
      metric,
      'FunctionName',
      functionRef(fn),
      { stat, label: `${fn}${what}`, id: this.#id() },
    ]);
  }

  queue(metric: string, ref: string, label: string): MetricRow {
    return ['AWS/SQS', metric, 'QueueName', `\${${ref}.QueueName}`, { stat: 'Maximum', label, id: this.#id() }];
  }
}

/** The first rows: what came in and what it restarted, and how long rollouts took. */
function changeRows(m: MetricRows): MetricWidget[][] {
  return [
    [
      {
        title: 'Changes received, records ignored and rejected',
        width: 8,
        stat: 'Sum',
        metrics: [
          m.single(METRICS.changesReceived, 'Sum', 'received'),
          m.single(METRICS.recordsRejected, 'Sum', 'rejected'),
          m.search(METRICS.recordsIgnored, 'Sum'),
        ],
      },
      { title: 'Restarts by cluster and outcome', width: 8, stat: 'Sum', metrics: [m.search(METRICS.targets, 'Sum')] },
      {
        title: 'Refused messages, lost visibility',
        width: 8,
        stat: 'Sum',
        metrics: [
          m.single(METRICS.refusedMessages, 'Sum', 'refused'),
          m.single(METRICS.visibilityLost, 'Sum', 'visibility lost'),
        ],
      },
    ],
    [
      {
        title: 'Rollout duration p90 by cluster and outcome (ms)',
        width: 8,
        stat: 'p90',
        metrics: [m.search(METRICS.rolloutDuration, 'p90')],
      },
      {
        title: 'Rollouts by cluster and outcome',
        width: 8,
        stat: 'SampleCount',
        metrics: [m.search(METRICS.rolloutDuration, 'SampleCount')],
      },
      {
        title: 'Vault change to patch p90 by cluster (ms)',
        width: 8,
        stat: 'p90',
        metrics: [m.search(METRICS.lag, 'p90')],
      },
    ],
  ];
}

/** The last rows: gates and halts, the queues, the functions, the notifications. */
function operationRows(m: MetricRows): MetricWidget[][] {
  return [
    [
      { title: 'Gate decisions', width: 8, stat: 'Sum', metrics: [m.search(METRICS.gateDecisions, 'Sum')] },
      {
        title: 'Halted rotations',
        width: 8,
        stat: 'Sum',
        metrics: [m.single(METRICS.haltedRotations, 'Sum', 'halted')],
      },
      {
        title: 'Rollout queue and dead letters',
        width: 8,
        metrics: [
          m.queue('ApproximateNumberOfMessagesVisible', 'RolloutQueue', 'waiting'),
          m.queue('ApproximateNumberOfMessagesNotVisible', 'RolloutQueue', 'in flight or held'),
          m.queue('ApproximateNumberOfMessagesVisible', 'RolloutDeadLetterQueue', 'dead letters'),
          m.queue('ApproximateNumberOfMessagesVisible', 'LogsFailureQueue', 'failed log batches'),
        ],
      },
    ],
    [
      {
        title: 'Oldest rollout message age (s)',
        width: 8,
        metrics: [m.queue('ApproximateAgeOfOldestMessage', 'RolloutQueue', 'oldest message')],
      },
      {
        title: 'Function errors and throttles',
        width: 8,
        stat: 'Sum',
        metrics: [...m.lambda('Errors', 'Sum', ' errors'), ...m.lambda('Throttles', 'Sum', ' throttled')],
      },
      { title: 'Function duration p99 (ms)', width: 8, stat: 'p99', metrics: m.lambda('Duration', 'p99') },
    ],
    [
      {
        title: 'Notification deliveries by outcome',
        width: 8,
        stat: 'Sum',
        metrics: [m.search(METRICS.notifications, 'Sum')],
      },
    ],
  ];
}

/** The title and the stack's alarms, above the metric rows. */
function headerWidgets({ namespace, service, stage }: CloudWatchDashboardOptions): DashboardWidget[] {
  return [
    {
      type: 'text',
      x: 0,
      y: 0,
      width: 16,
      height: 3,
      properties: {
        markdown: `## vault-rollout ${stage}\nThe functions' EMF metrics (namespace \`${namespace}\`, dimension \`service\` = \`${service}\`), the queues and the functions. Kubernetes and Vault request latency and serve's queue are Prometheus metrics: the Grafana dashboard (docs/how-to/metrics-and-dashboards.md).`,
      },
    },
    {
      type: 'alarm',
      x: 16,
      y: 0,
      width: 8,
      height: 3,
      properties: {
        title: 'Alarms',
        alarms: STACK_ALARMS.map(
          (a) => `arn:\${AWS::Partition}:cloudwatch:${REGION}:\${AWS::AccountId}:alarm:\${${a}}`,
        ),
        sortBy: 'stateUpdatedTimestamp',
      },
    },
  ];
}

/** The metric rows laid out on the grid below the header, each widget as wide as it says. */
function metricWidgets(rows: readonly MetricWidget[][]): DashboardWidget[] {
  const widgets: DashboardWidget[] = [];

  let y = 3;
  for (const row of rows) {
    let x = 0;
    for (const w of row) {
      if (x + w.width > GRID_WIDTH) throw new Error(`widget "${w.title}" does not fit its row`);
      widgets.push({
        type: 'metric',
        x,
        y,
        width: w.width,
        height: HEIGHT,
        properties: {
          title: w.title,
          region: REGION,
          view: 'timeSeries',
          stacked: false,
          period: PERIOD,
          ...(w.stat ? { stat: w.stat } : {}),
          metrics: w.metrics,
          yAxis: { left: { min: 0 } },
        },
      });
      x += w.width;
    }
    y += HEIGHT;
  }
  return widgets;
}

export function cloudWatchDashboard(options: CloudWatchDashboardOptions): DashboardBody {
  const { namespace, service } = options;
  if (!/^[\w.\-/#:]{1,255}$/.test(namespace) || namespace.startsWith('AWS/'))
    throw new Error(`metrics namespace "${namespace}": CloudWatch takes letters, digits and . - _ / # : (not AWS/)`);
  const m = new MetricRows(namespace, service);
  const rows = [...changeRows(m), ...operationRows(m)];
  const widgets = [...headerWidgets(options), ...metricWidgets(rows)];
  return { start: '-PT12H', periodOverride: 'inherit', widgets };
}

/** The body as `Fn::Sub` takes it: JSON whose `${...}` are the stack's references. */
export const dashboardBodySub = (options: CloudWatchDashboardOptions): { 'Fn::Sub': string } => ({
  'Fn::Sub': JSON.stringify(cloudWatchDashboard(options)),
});
