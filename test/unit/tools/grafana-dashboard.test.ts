/**
 * The Grafana dashboard (tools/grafana/dashboard.ts -> infra/helm/vault-rollout/dashboards/vault-rollout.json):
 * valid for Grafana's dashboard schema, every query naming metrics and labels that exist, no overlapping panels.
 *
 * The schema is Grafana's own: the dashboard JSON model and the panel plugins' options as @grafana/schema publishes
 * them (TypeScript types generated from Grafana's CUE kinds), turned into JSON Schema by ts-json-schema-generator
 * and checked with Ajv; objects take no property the types do not name, enums only their values. The queries are
 * parsed with Prometheus's own PromQL grammar (@prometheus-io/lezer-promql, what the Prometheus UI uses).
 */
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { parser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';
import { Ajv, type ValidateFunction } from 'ajv';
import { createGenerator } from 'ts-json-schema-generator';
import { beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_FILE, dashboardText, SCHEMA_VERSION } from '../../../tools/grafana/dashboard.ts';
import { METRIC_SPECS, prometheusName, type MetricName } from '../../../lib/kernel/telemetry.ts';
import { readRepoFile } from '../../helpers.ts';

type Json = Record<string, unknown>;
interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: GridPos;
  options?: Json;
  fieldConfig?: { defaults: { custom?: Json } };
  targets?: Array<{ expr: string; refId: string; legendFormat?: string; datasource?: Json }>;
  datasource?: Json;
}
interface Dashboard {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: unknown; datasource?: Json }> };
}

const require = createRequire(import.meta.url);
const grafanaSchema = dirname(require.resolve('@grafana/schema/package.json'));
const typesOf = (relative: string) => join(grafanaSchema, 'dist/types/raw', relative);

/** JSON Schema of one exported type of @grafana/schema, compiled by Ajv. */
function grafanaValidator(file: string, type: string): ValidateFunction {
  const schema = createGenerator({
    path: typesOf(file),
    type,
    skipTypeCheck: true,
    expose: 'export',
    topRef: true,
    additionalProperties: false,
  }).createSchema(type);
  return new Ajv({ allErrors: true, strict: false }).compile(schema);
}

/** Ajv's errors, short: where and what. */
const problems = (validate: ValidateFunction, data: unknown, where: string): string[] =>
  validate(data)
    ? []
    : (validate.errors ?? []).map((e) => `${where}${e.instancePath} ${e.message ?? ''} ${JSON.stringify(e.params)}`);

/** The panel plugins the dashboard uses and the types of their options and custom field config. */
const PANEL_PLUGINS = ['timeseries', 'stat', 'heatmap'] as const;
let dashboardSchema: ValidateFunction;
const pluginSchemas = new Map<string, { options: ValidateFunction; fieldConfig?: ValidateFunction }>();

beforeAll(() => {
  dashboardSchema = grafanaValidator('dashboard/x/types.gen.d.ts', 'Dashboard');
  for (const plugin of PANEL_PLUGINS) {
    const file = `composable/${plugin}/panelcfg/x/types.gen.d.ts`;
    pluginSchemas.set(plugin, {
      options: grafanaValidator(file, 'Options'),
      ...(plugin === 'stat' ? {} : { fieldConfig: grafanaValidator(file, 'FieldConfig') }),
    });
  }
}, 180_000);

/** Everything Grafana's schema says is wrong with a dashboard: the model, then each panel's plugin options. */
function schemaProblems(dashboard: Dashboard): string[] {
  const out = problems(dashboardSchema, dashboard, 'dashboard');
  for (const panel of dashboard.panels) {
    if (panel.type === 'row') continue;
    const plugin = pluginSchemas.get(panel.type);
    if (plugin === undefined) {
      out.push(`panel ${panel.id}: type ${panel.type} is not one of ${PANEL_PLUGINS.join(', ')}`);
      continue;
    }
    out.push(...problems(plugin.options, panel.options ?? {}, `panel ${panel.id} options`));
    const custom = panel.fieldConfig?.defaults.custom;
    if (custom !== undefined)
      out.push(
        plugin.fieldConfig
          ? problems(plugin.fieldConfig, custom, `panel ${panel.id} fieldConfig.defaults.custom`).join('\n')
          : `panel ${panel.id}: ${panel.type} has no custom field config`,
      );
  }
  return out.filter((p) => p !== '');
}

/** Labels every series has from its scrape target, whatever the metric. */
const TARGET_LABELS = ['job', 'instance'];

/** Each series name /metrics exposes, with its labels: a histogram's `_bucket` (with `le`), `_sum` and `_count`. */
const SERIES: ReadonlyMap<string, readonly string[]> = new Map(
  (Object.keys(METRIC_SPECS) as MetricName[]).flatMap((name) => {
    const spec = METRIC_SPECS[name];
    const labels = [...TARGET_LABELS, ...spec.labels];
    const base = prometheusName(name);
    return spec.type === 'histogram'
      ? [
          [`${base}_bucket`, [...labels, 'le']],
          [`${base}_sum`, labels],
          [`${base}_count`, labels],
        ]
      : [[base, labels]];
  }),
);

/** Grafana's range variables are not PromQL durations: a duration stands in for them before parsing. */
const asPromql = (expr: string) => expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m');

const children = (node: SyntaxNode): SyntaxNode[] => {
  const out: SyntaxNode[] = [];
  for (let c = node.firstChild; c; c = c.nextSibling) out.push(c);
  return out;
};
const descendants = (node: SyntaxNode, name: string): SyntaxNode[] =>
  children(node).flatMap((c) => [...(c.name === name ? [c] : []), ...descendants(c, name)]);

/**
 * What is wrong with one PromQL expression: a syntax error, a series that is not one of METRIC_SPECS', a label in a
 * selector that the series does not have, a `by`/`without` label that a series aggregated does not have, a
 * `{{label}}` in the legend that a series of the expression does not have.
 */
function queryProblems(expr: string, legendFormat = ''): string[] {
  const text = asPromql(expr);
  const tree = parser.parse(text);
  const out: string[] = [];
  const at = (n: SyntaxNode) => text.slice(n.from, n.to);
  tree.iterate({ enter: (n) => void (n.type.isError ? out.push(`syntax error at ${n.from} in ${expr}`) : undefined) });
  const labelsOf = (selector: SyntaxNode): { name: string; labels: readonly string[] | undefined } => {
    const name = at(selector.getChild('Identifier') ?? selector);
    return { name, labels: SERIES.get(name) };
  };
  const selectors = descendants(tree.topNode, 'VectorSelector');
  if (selectors.length === 0) out.push(`no metric in ${expr}`);
  for (const selector of selectors) {
    const { name, labels } = labelsOf(selector);
    if (labels === undefined) {
      out.push(`${name} is not a metric of METRIC_SPECS`);
      continue;
    }
    for (const matcher of descendants(selector, 'LabelName'))
      if (!labels.includes(at(matcher))) out.push(`${name} has no label ${at(matcher)}`);
  }
  for (const aggregate of descendants(tree.topNode, 'AggregateExpr')) {
    const modifier = aggregate.getChild('AggregateModifier');
    if (modifier === null) continue;
    const grouping = descendants(modifier, 'LabelName').map(at);
    for (const selector of descendants(aggregate, 'VectorSelector')) {
      const { name, labels } = labelsOf(selector);
      for (const label of grouping)
        if (labels !== undefined && !labels.includes(label)) out.push(`${name} has no label ${label} to aggregate by`);
    }
  }
  for (const [, label] of legendFormat.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) {
    for (const selector of selectors) {
      const { name, labels } = labelsOf(selector);
      if (labels !== undefined && label !== undefined && !labels.includes(label))
        out.push(`legend {{${label}}}: ${name} has no label ${label}`);
    }
  }
  return out;
}

/** `label_values(selector, label)`: the selector's series and label must exist, like a panel's. */
function variableProblems(query: string): string[] {
  const m = /^label_values\((.+),\s*(\w+)\)$/.exec(query);
  if (m === null) return [`not label_values(selector, label): ${query}`];
  const [, selector = '', label = ''] = m;
  return queryProblems(`count by (${label}) (${selector})`);
}

/** Overlapping panels, ids used twice, panels past the 24 columns. */
function layoutProblems(panels: readonly Panel[]): string[] {
  const out: string[] = [];
  const ids = new Set<number>();
  for (const p of panels) {
    if (ids.has(p.id)) out.push(`id ${p.id} used twice`);
    ids.add(p.id);
    const { x, y, w, h } = p.gridPos;
    if (x < 0 || y < 0 || w <= 0 || h <= 0 || x + w > 24)
      out.push(`panel ${p.id} (${p.title}) is outside the grid: ${JSON.stringify(p.gridPos)}`);
  }
  for (const [i, a] of panels.entries()) {
    for (const b of panels.slice(i + 1)) {
      const overlap =
        a.gridPos.x < b.gridPos.x + b.gridPos.w &&
        b.gridPos.x < a.gridPos.x + a.gridPos.w &&
        a.gridPos.y < b.gridPos.y + b.gridPos.h &&
        b.gridPos.y < a.gridPos.y + a.gridPos.h;
      if (overlap) out.push(`panels ${a.id} (${a.title}) and ${b.id} (${b.title}) overlap`);
    }
  }
  return out;
}

/** Every query of every panel, with where it is. */
const panelQueries = (d: Dashboard) =>
  d.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel ${p.id} (${p.title}) ${t.refId}`, ...t })));
const allQueryProblems = (d: Dashboard) => [
  ...panelQueries(d).flatMap((q) => queryProblems(q.expr, q.legendFormat).map((p) => `${q.where}: ${p}`)),
  ...d.templating.list
    .filter((v) => v.type === 'query')
    .flatMap((v) =>
      variableProblems(typeof v.query === 'string' ? v.query : String((v.query as { query: string }).query)).map(
        (p) => `variable ${v.name}: ${p}`,
      ),
    ),
];

const committed = () => JSON.parse(readRepoFile(DASHBOARD_FILE)) as Dashboard;

describe('the Grafana dashboard', () => {
  it('is the file tools/grafana/dashboard.ts writes (npm run dashboard)', () => {
    expect(readRepoFile(DASHBOARD_FILE)).toBe(dashboardText());
  });

  it("is valid for Grafana's dashboard schema, and each panel's options for its plugin's", () => {
    const dashboard = committed();
    expect(schemaProblems(dashboard)).toEqual([]);
    expect(dashboard.schemaVersion).toBe(SCHEMA_VERSION);
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(39);
  });

  it('names in its queries only metrics of METRIC_SPECS, and only labels those metrics have', () => {
    const dashboard = committed();
    expect(panelQueries(dashboard).length).toBeGreaterThan(20);
    expect(allQueryProblems(dashboard)).toEqual([]);
  });

  it('has no two panels on the same cells, and no id twice', () => {
    const dashboard = committed();
    expect(layoutProblems(dashboard.panels)).toEqual([]);
    // Rows hold no panels of their own (collapsed: false): every panel is at the top level, where the grid is checked.
    expect(
      dashboard.panels
        .filter((p) => p.type === 'row')
        .every((p) => (p as unknown as { panels: unknown[] }).panels.length === 0),
    ).toBe(true);
  });

  it('queries the data source the datasource variable picks, and offers job, instance and cluster', () => {
    const dashboard = committed();
    const vars = dashboard.templating.list;
    expect(vars.map((v) => [v.name, v.type])).toEqual([
      ['datasource', 'datasource'],
      ['job', 'query'],
      ['instance', 'query'],
      ['cluster', 'query'],
    ]);
    expect(vars[0]?.query).toBe('prometheus');
    for (const v of vars.slice(1)) expect(v.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
    for (const p of dashboard.panels.filter((x) => x.type !== 'row')) {
      expect(p.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
      for (const t of p.targets ?? []) {
        expect(t.datasource).toEqual({ type: 'prometheus', uid: '${datasource}' });
        expect(t.expr).toContain('job=~"$job"');
        expect(t.expr).toContain('instance=~"$instance"');
      }
    }
  });

  it('covers the metrics an operator of rotations watches', () => {
    const exprs = panelQueries(committed())
      .map((q) => q.expr)
      .join('\n');
    const series = new Set([...exprs.matchAll(/vault_rollout_\w+/g)].map(([s]) => s));
    const wanted: MetricName[] = [
      'ChangesReceived',
      'RecordsIgnored',
      'RecordsRejected',
      'Targets',
      'RolloutDuration',
      'GateDecisions',
      'HaltedRotations',
      'ContinuationsPending',
      'ContinuationOldestAge',
      'QueueDepth',
      'QueueOldestMessageAge',
      'DeadLetters',
      'KubeRequestDuration',
      'KubeRequestErrors',
      'VaultRequestDuration',
      'VaultRequestErrors',
      'RelaySpoolBytes',
      'RelayDeliveryLag',
    ];
    const shown = (name: MetricName) =>
      [...series].some((s) => s === prometheusName(name) || s.startsWith(`${prometheusName(name)}_`));
    expect(wanted.filter((name) => !shown(name))).toEqual([]);
    // The rollout duration both as a heatmap of its buckets and as quantiles.
    expect(
      committed().panels.some(
        (p) =>
          p.type === 'heatmap' &&
          p.targets?.some((t) => t.expr.includes('vault_rollout_rollout_duration_seconds_bucket')),
      ),
    ).toBe(true);
    expect(exprs).toMatch(
      /histogram_quantile\(0\.99, sum by \(outcome, le\) \(rate\(vault_rollout_rollout_duration_seconds_bucket/,
    );
  });
});

/** The checks find what they are for: each mistake below, made on a copy of the dashboard, is reported. */
describe('the dashboard checks', () => {
  const copy = (): Dashboard => structuredClone(committed());
  const firstOf = (d: Dashboard, type: string): Panel => {
    const panel = d.panels.find((p) => p.type === type);
    if (panel === undefined) throw new Error(`no ${type} panel`);
    return panel;
  };
  const cases: Array<[string, (d: Dashboard) => void, (d: Dashboard) => string[], RegExp]> = [
    [
      'a property the model does not have',
      (d) => Object.assign(d, { refreshInterval: '30s' }),
      schemaProblems,
      /must NOT have additional properties.*refreshInterval/,
    ],
    [
      'a panel without a width',
      (d) => delete (firstOf(d, 'timeseries').gridPos as Partial<GridPos>).w,
      schemaProblems,
      /gridPos must have required property 'w'/,
    ],
    [
      'a stat option out of its enum',
      (d) => Object.assign(firstOf(d, 'stat').options ?? {}, { colorMode: 'rainbow' }),
      schemaProblems,
      /panel \d+ options\/colorMode must be equal to one of the allowed values/,
    ],
    [
      'a time series draw style out of its enum',
      (d) => Object.assign(firstOf(d, 'timeseries').fieldConfig?.defaults.custom ?? {}, { drawStyle: 'dots' }),
      schemaProblems,
      /custom\/drawStyle must be equal to one of the allowed values/,
    ],
    [
      'a metric that does not exist',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum(rate(vault_rollout_changes_recieved_total[5m]))',
        }),
      allQueryProblems,
      /vault_rollout_changes_recieved_total is not a metric of METRIC_SPECS/,
    ],
    [
      'a counter without its _total',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum(rate(vault_rollout_changes_received[5m]))',
        }),
      allQueryProblems,
      /vault_rollout_changes_received is not a metric/,
    ],
    [
      'a selector label the metric does not have',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum(rate(vault_rollout_changes_received_total{cluster="a"}[5m]))',
        }),
      allQueryProblems,
      /vault_rollout_changes_received_total has no label cluster/,
    ],
    [
      'le outside a histogram bucket',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum by (le) (rate(vault_rollout_rollout_duration_seconds_count[5m]))',
        }),
      allQueryProblems,
      /_count has no label le to aggregate by/,
    ],
    [
      'a by() label the metric does not have',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum by (path) (rate(vault_rollout_targets_total[5m]))',
        }),
      allQueryProblems,
      /vault_rollout_targets_total has no label path to aggregate by/,
    ],
    [
      'a legend label the metric does not have',
      (d) => Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, { legendFormat: '{{workload}}' }),
      allQueryProblems,
      /legend \{\{workload\}\}: vault_rollout_changes_received_total has no label workload/,
    ],
    [
      'a query that is not PromQL',
      (d) =>
        Object.assign(firstOf(d, 'timeseries').targets?.[0] ?? {}, {
          expr: 'sum(rate(vault_rollout_changes_received_total[5m])',
        }),
      allQueryProblems,
      /syntax error/,
    ],
    [
      'a variable over a missing label',
      (d) =>
        Object.assign(d.templating.list[3] ?? {}, {
          query: 'label_values(vault_rollout_changes_received_total, cluster)',
        }),
      allQueryProblems,
      /variable cluster: vault_rollout_changes_received_total has no label cluster/,
    ],
    [
      'two panels on the same cells',
      (d) => Object.assign(d.panels[2] ?? {}, { gridPos: { ...d.panels[1]?.gridPos } }),
      (d) => layoutProblems(d.panels),
      /overlap/,
    ],
    [
      'an id twice',
      (d) => Object.assign(d.panels[2] ?? {}, { id: d.panels[1]?.id }),
      (d) => layoutProblems(d.panels),
      /used twice/,
    ],
  ];
  it.each(cases)('report %s', (_name, mistake, check, expected) => {
    const d = copy();
    expect(check(d)).toEqual([]);
    mistake(d);
    expect(check(d).join('\n')).toMatch(expected);
  });
});
