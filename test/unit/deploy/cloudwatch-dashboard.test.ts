/**
 * The stage's CloudWatch dashboard (serverless.yml `Dashboard`, infra/serverless/dashboard.js,
 * lib/deploy/cloudwatch-dashboard.ts): every metric of the functions' namespace it reads is one the functions write,
 * with the namespace and the dimension set Powertools really writes it with (captured from Powertools' own EMF
 * output); every `${...}` it names is a resource of the stack; no two widgets overlap; every alarm is on it.
 * test/integration/package.test.ts checks the template osls writes, with cfn-lint.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
// @ts-expect-error -- a plain ES module for osls's variable resolver, without type declarations
import { dashboardBody } from '../../../infra/serverless/dashboard.js';
import { cloudWatchDashboard, emfDimensions, type DashboardBody } from '../../../lib/deploy/cloudwatch-dashboard.ts';
import { METRIC_SPECS, type MetricName } from '../../../lib/kernel/telemetry.ts';
import { powertoolsTelemetry } from '../../../lib/observability/powertools.ts';
import { readRepoFile } from '../../helpers.ts';

interface ServerlessYml {
  params: Record<string, Record<string, unknown>>;
  provider: { environment: Record<string, string> };
  functions: Record<string, unknown>;
  resources: Array<{ Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }> } | string>;
}
const yml = parse(readRepoFile('serverless.yml'), { logLevel: 'silent' }) as ServerlessYml;
const STAGES = ['dev', 'staging', 'prod'] as const;
const resources = Object.assign(
  {},
  ...yml.resources.flatMap((r) => (typeof r === 'object' && r.Resources ? [r.Resources] : [])),
) as Record<string, { Type: string; Properties?: Record<string, unknown> }>;
/** The logical ids a `${...}` of the body may name: the resources, and the functions as osls names them. */
const LOGICAL_IDS = new Set([
  ...Object.keys(resources),
  ...Object.keys(yml.functions).map((fn) => `${fn[0]?.toUpperCase()}${fn.slice(1)}LambdaFunction`),
]);
const PSEUDO_PARAMETERS = new Set(['AWS::Region', 'AWS::Partition', 'AWS::AccountId']);

/** A param of a stage as osls resolves it: the stage's own, else the default, with `${sls:stage}` in it resolved. */
function param(stage: string, name: string): string {
  const value = yml.params[stage]?.[name] ?? yml.params.default?.[name];
  if (value === undefined) throw new Error(`no param ${name}`);
  return String(value).replaceAll('${sls:stage}', stage);
}
const resolverFor = (stage: string) => ({
  resolveVariable: async (name: string) => {
    if (name.startsWith('param:')) return param(stage, name.slice('param:'.length));
    if (name === 'sls:stage') return stage;
    if (name === 'self:provider.environment.POWERTOOLS_SERVICE_NAME')
      return yml.provider.environment.POWERTOOLS_SERVICE_NAME;
    throw new Error(`the test resolves no ${name}`);
  },
});

/** The body with its references resolved to stand-ins, and the references it makes. */
function resolved(sub: string): { body: DashboardBody; references: string[] } {
  const references = [...sub.matchAll(/\$\{([^}]+)\}/g)].map(([, ref]) => ref ?? '');
  return {
    body: JSON.parse(
      sub.replace(/\$\{([^}]+)\}/g, (_, ref: string) => `ref-${ref.replace(/\W/g, '-')}`),
    ) as DashboardBody,
    references,
  };
}

interface EmfMetric {
  namespace: string;
  name: string;
  dimensions: string[];
}
const key = (m: EmfMetric) => `${m.namespace} ${m.name} {${[...m.dimensions].sort().join(',')}}`;

/**
 * What the functions write: each metric of METRIC_SPECS the telemetry sends to EMF, through Powertools as Lambda
 * sets it up (the stage's namespace and service), with a value for each of its labels as the callers pass them.
 */
function emittedByLambda(namespace: string, service: string): Set<string> {
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  vi.stubEnv('POWERTOOLS_DEV', 'false');
  vi.stubEnv('POWERTOOLS_METRICS_NAMESPACE', namespace);
  const written: string[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  });
  try {
    const telemetry = powertoolsTelemetry(service);
    for (const name of Object.keys(METRIC_SPECS) as MetricName[]) {
      const spec = METRIC_SPECS[name];
      if (!spec.emf) continue;
      const labels = spec.labels.length > 0 ? Object.fromEntries(spec.labels.map((l) => [l, 'x'])) : undefined;
      telemetry.metric(name, 1, spec.type === 'histogram' ? 'Milliseconds' : 'Count', labels);
    }
    telemetry.flush();
  } finally {
    write.mockRestore();
  }
  const docs = written
    .flatMap((w) => w.split('\n'))
    .filter((l) => l.includes('"_aws"'))
    .map(
      (l) =>
        JSON.parse(l) as {
          _aws: {
            CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }>;
          };
        },
    );
  return new Set(
    docs.flatMap((d) =>
      d._aws.CloudWatchMetrics.flatMap((m) =>
        m.Metrics.flatMap((metric) =>
          m.Dimensions.map((dimensions) => key({ namespace: m.Namespace, name: metric.Name, dimensions })),
        ),
      ),
    ),
  );
}

/** Every metric the body reads outside AWS's namespaces: plain metric rows and SEARCH expressions. */
function customMetrics(body: DashboardBody): EmfMetric[] {
  const out: EmfMetric[] = [];
  for (const w of body.widgets) {
    for (const row of (w.properties.metrics as unknown[][] | undefined) ?? []) {
      const [first] = row;
      if (typeof first === 'string') {
        if (first.startsWith('AWS/')) continue;
        const names = row.filter((c): c is string => typeof c === 'string');
        out.push({ namespace: first, name: names[1] ?? '', dimensions: names.slice(2).filter((_, i) => i % 2 === 0) });
        continue;
      }
      const expression = (first as { expression?: string }).expression ?? '';
      for (const [, schema = '', name = ''] of expression.matchAll(/SEARCH\('\{([^}]*)\}[^']*MetricName="(\w+)"/g)) {
        const [namespace = '', ...dimensions] = schema.split(',').map((s) => s.trim().replace(/^"|"$/g, ''));
        out.push({ namespace, name, dimensions });
      }
      if (expression !== '' && !expression.startsWith('SEARCH('))
        out.push({ namespace: '?', name: expression, dimensions: [] });
    }
  }
  return out;
}

/** Widgets past the 24 columns or on the same cells. */
function overlaps(body: DashboardBody): string[] {
  const out: string[] = [];
  const ws = body.widgets;
  for (const [i, a] of ws.entries()) {
    if (a.x < 0 || a.x + a.width > 24) out.push(`widget ${i} is outside the 24 columns`);
    for (const [j, b] of ws.slice(i + 1).entries())
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height)
        out.push(`widgets ${i} and ${i + 1 + j} overlap`);
  }
  return out;
}

afterEach(() => vi.unstubAllEnvs());

describe.each(STAGES)('the CloudWatch dashboard of stage %s', (stage) => {
  const namespace = param(stage, 'metricsNamespace');
  const service = yml.provider.environment.POWERTOOLS_SERVICE_NAME ?? '';

  it('reads only metrics the functions write, in the namespace and with the dimensions Powertools writes them with', async () => {
    const sub = ((await dashboardBody(resolverFor(stage))) as { 'Fn::Sub': string })['Fn::Sub'];
    const { body } = resolved(sub);
    const emitted = emittedByLambda(namespace, service);
    const read = customMetrics(body);
    expect(read.length).toBeGreaterThan(0);
    expect(read.map(key).filter((k) => !emitted.has(k))).toEqual([]);
    // And all of them: each metric the functions write has a widget.
    const shown = new Set(read.map((m) => m.name));
    expect((Object.keys(METRIC_SPECS) as MetricName[]).filter((n) => METRIC_SPECS[n].emf && !shown.has(n))).toEqual([]);
    // A SEARCH names the service too, so another service's metrics in the namespace stay out.
    for (const w of body.widgets)
      for (const row of (w.properties.metrics as unknown[][] | undefined) ?? []) {
        const expression = (row[0] as { expression?: string }).expression;
        if (expression !== undefined) expect(expression).toContain(`service="${service}"`);
      }
  });

  it('names only this stack: its functions, queues and alarms, and pseudo parameters', async () => {
    const sub = ((await dashboardBody(resolverFor(stage))) as { 'Fn::Sub': string })['Fn::Sub'];
    const { body, references } = resolved(sub);
    expect(references.length).toBeGreaterThan(0);
    expect(references.filter((r) => !PSEUDO_PARAMETERS.has(r) && !LOGICAL_IDS.has(r.split('.')[0] ?? ''))).toEqual([]);
    expect(references.filter((r) => r.includes('.')).map((r) => r.split('.')[1])).toEqual(
      expect.arrayContaining(['QueueName']),
    );
    expect(new Set(references.filter((r) => r.includes('.')).map((r) => r.split('.')[1]))).toEqual(
      new Set(['QueueName']),
    );
    expect(sub).not.toMatch(/\d{12}/);
    // Every alarm of the stack is on the alarm widget.
    const alarms = Object.entries(resources)
      .filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm')
      .map(([id]) => id);
    const widget = body.widgets.find((w) => w.type === 'alarm');
    expect(((widget?.properties.alarms as string[]) ?? []).map((a) => a.replace(/^.*:alarm:ref-/, '')).sort()).toEqual(
      alarms.sort(),
    );
    expect(overlaps(body)).toEqual([]);
    expect(
      body.widgets.filter((w) => w.type === 'metric').every((w) => w.properties.region === 'ref-AWS--Region'),
    ).toBe(true);
  });
});

describe('serverless.yml', () => {
  it('writes, alarms on and shows the EMF metrics in one namespace per stage', () => {
    expect(yml.provider.environment.POWERTOOLS_METRICS_NAMESPACE).toBe('${param:metricsNamespace}');
    for (const id of ['RefusedMessagesAlarm', 'HaltedRotationsAlarm'])
      expect([id, resources[id]?.Properties?.Namespace]).toEqual([id, '${param:metricsNamespace}']);
    expect(new Set(STAGES.map((s) => param(s, 'metricsNamespace'))).size).toBe(STAGES.length);
    expect(resources.Dashboard).toEqual({
      Type: 'AWS::CloudWatch::Dashboard',
      Properties: {
        DashboardName: '${self:service}-${sls:stage}',
        DashboardBody: '${file(./infra/serverless/dashboard.js):dashboardBody}',
      },
    });
  });
});

/** The checks find what they are for. */
describe('the CloudWatch dashboard checks', () => {
  const options = { namespace: 'VaultRollout/dev', service: 'vault-rollout', stage: 'dev' };
  const emitted = () => emittedByLambda(options.namespace, options.service);
  const bodyWith = (replace: (json: string) => string) =>
    resolved(replace(JSON.stringify(cloudWatchDashboard(options)))).body;
  it.each([
    [
      'a metric only Prometheus has',
      (j: string) => j.replace('MetricName=\\"Targets\\"', 'MetricName=\\"QueueDepth\\"'),
      /QueueDepth/,
    ],
    [
      'a dimension the metric is not written with',
      (j: string) =>
        j.replace('service,cluster,outcome} MetricName=\\"Targets', 'service,cluster,method} MetricName=\\"Targets'),
      /Targets \{cluster,method,service\}/,
    ],
    [
      'another namespace',
      (j: string) => j.replace('"VaultRollout/dev","ChangesReceived"', '"VaultRollout","ChangesReceived"'),
      /^VaultRollout ChangesReceived/m,
    ],
  ])('report %s', (_name, mistake, expected) => {
    expect(
      customMetrics(bodyWith((j) => j))
        .map(key)
        .filter((k) => !emitted().has(k)),
    ).toEqual([]);
    expect(
      customMetrics(bodyWith(mistake))
        .map(key)
        .filter((k) => !emitted().has(k))
        .join('\n'),
    ).toMatch(expected);
  });

  it('writes each metric with service and its labels, as Powertools does', () => {
    const emf = emitted();
    for (const name of Object.keys(METRIC_SPECS) as MetricName[])
      if (METRIC_SPECS[name].emf)
        expect(emf.has(key({ namespace: options.namespace, name, dimensions: emfDimensions(name) }))).toBe(true);
  });

  it('refuses a namespace CloudWatch would not take', () => {
    expect(() => cloudWatchDashboard({ ...options, namespace: 'AWS/Lambda' })).toThrow(/not AWS\//);
    expect(() => cloudWatchDashboard({ ...options, namespace: 'Vault Rollout' })).toThrow(/namespace/);
  });
});
