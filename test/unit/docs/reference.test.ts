/**
 * The generated reference pages (docs/reference/, tools/site/reference.ts) are what the code says: each is rendered
 * in memory and compared with the committed page, so adding a flag, an environment variable, a metric, an endpoint,
 * an annotation or a routing-table field without `npm run docs:reference` fails here. And the registries the pages
 * are rendered from are checked against the code they describe.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXIT } from '../../../lib/cli/io.ts';
import { EXIT_CODE_MEANINGS } from '../../../lib/cli/exit-codes.ts';
import { ANNOTATION_USES, EVENT_USES } from '../../../lib/deploy/kubernetes-names.ts';
import { buildApp } from '../../../lib/http/app.ts';
import { HTTP_ENDPOINTS } from '../../../lib/http/endpoints.ts';
import { EVENT_REASONS } from '../../../lib/workloads/annotations.ts';
import { memoryTelemetry, METRIC_SPECS, type MetricName } from '../../../lib/kernel/telemetry.ts';
import { METRIC_DOCS } from '../../../lib/observability/metric-docs.ts';
import { routingTableJsonSchema } from '../../../lib/routing/json-schema.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { REFERENCE_PAGES, REPO, schemaFields } from '../../../tools/site/reference.ts';
import { environmentPage, webhookAuthFacts } from '../../../tools/site/reference.ts';
import { authModes } from '../../../lib/runtime/config.ts';

describe('the generated reference pages', () => {
  for (const page of REFERENCE_PAGES) {
    it(`${page.file} is up to date (else: npm run docs:reference)`, () => {
      expect(
        readFileSync(join(REPO, page.file), 'utf8'),
        `${page.file} differs from what the code says: run npm run docs:reference`,
      ).toBe(page.render());
    });
  }
});

describe('the environment reference says what the code does', () => {
  it('VAULT_ROLLOUT_AUTH: the default authModes takes when unset, and exactly the values it accepts', () => {
    const facts = webhookAuthFacts();
    expect(facts.default).toBe([...authModes({})].join(','));
    expect(facts.values).toEqual(expect.arrayContaining(['hmac', 'bearer', 'hmac,bearer', 'iam']));
    for (const refused of ['', 'hmac,iam', 'iam,bearer', 'HMAC', 'none']) {
      expect(() => authModes({ VAULT_ROLLOUT_AUTH: refused }), refused).toThrow(/VAULT_ROLLOUT_AUTH is not valid/);
    }
    const row =
      environmentPage()
        .split('\n')
        .find((line) => line.startsWith('| `VAULT_ROLLOUT_AUTH` |')) ?? '';
    expect(row).toContain(`| \`${facts.default}\` |`);
    for (const value of facts.values) expect(row).toContain(`\`${value}\``);
  });
});

describe('the routing table reference', () => {
  const fields = schemaFields(routingTableJsonSchema());

  it('describes every field of the schema (add .describe() in lib/routing/schema.ts)', () => {
    expect(fields.filter((f) => f.description === undefined).map((f) => f.path)).toEqual([]);
  });

  it('lists fields from every branch: kubeconfig forms, target forms, sinks, waves', () => {
    const paths = fields.map((f) => f.path);
    for (const p of [
      'clusters.<cluster>.kubeconfig.file',
      'clusters.<cluster>.kubeconfig.secretsManager',
      'clusters.<cluster>.eks.roleArn',
      'routes[].targets[].sync.timeout',
      'routes[].targets[].consumers.secretProviderClass',
      'routes[].targets[].selector',
      'rollout.waves[].clusters',
      'notifications.sinks.<sink>.topicArn',
      'vault.mounts',
    ])
      expect(paths).toContain(p);
    expect(new Set(paths).size).toBe(paths.length);
    expect(fields.find((f) => f.path === 'clusters.<cluster>.concurrency')?.bounds).toEqual(['≥ 1', '≤ 100']);
    expect(fields.find((f) => f.path === 'routes[].match.operations')?.default).toEqual(['write', 'undelete']);
  });
});

describe('the registries behind the pages', () => {
  it('explains every exit code', () => {
    expect(Object.keys(EXIT_CODE_MEANINGS).sort()).toEqual(Object.keys(EXIT).sort());
  });

  it('lists exactly the routes the HTTP app registers (serve with /metrics and /status; Lambda without)', () => {
    const table = loadRoutingTable('clusters: {}\nroutes: []\n');
    const routesOf = (over: object) => {
      const app = buildApp({
        table,
        queue: { send: async () => undefined },
        telemetry: memoryTelemetry(),
        secrets: async () => ({ bearerToken: 'x'.repeat(32) }),
        ...over,
      });
      return [...new Set(app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`))].sort();
    };
    const listed = (server: 'serve' | 'lambda') =>
      HTTP_ENDPOINTS.filter((e) => e.servers.includes(server))
        .map((e) => `${e.method} ${e.path}`)
        .sort();
    expect(
      routesOf({
        metrics: async () => ({ contentType: 'text/plain', body: '' }),
        statusPage: async () => '',
        safeToRevoke: async () => ({ safe: false }),
      }),
    ).toEqual(listed('serve'));
    expect(routesOf({})).toEqual(listed('lambda'));
  });

  it('documents the labels of every metric as METRIC_SPECS declares them', () => {
    for (const name of Object.keys(METRIC_SPECS) as MetricName[]) {
      const declared = METRIC_SPECS[name].labels;
      const documented = [...METRIC_DOCS[name].labels.replace(/\([^)]*\)/g, '').matchAll(/`([a-z_]+)`/g)].map(
        (m) => m[1],
      );
      expect(documented, name).toEqual([...declared]);
    }
  });

  it('lists every vault-rollout.io annotation and every Event reason lib/ uses', () => {
    const files = readdirSync(join(REPO, 'lib'), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => join(e.parentPath, e.name));
    const annotations = new Set<string>();
    for (const file of files) {
      if (relative(REPO, file) === 'lib/deploy/kubernetes-names.ts') continue;
      for (const m of readFileSync(file, 'utf8').matchAll(/['"`](vault-rollout\.io\/[a-z-]+)['"`]/g))
        annotations.add(m[1]!);
    }
    expect([...annotations].filter((a) => !ANNOTATION_USES.some((u) => u.name === a)).sort()).toEqual([]);
    expect(annotations.size).toBeGreaterThanOrEqual(8);
    // Events are created in one file, each with a reason from EVENT_REASONS (a literal there would escape this page).
    const events = readFileSync(join(REPO, 'lib/engine/events.ts'), 'utf8');
    expect([...events.matchAll(/\breason: ([^,\n]+),/g)].map((m) => m[1]).filter((r) => /['"`]/.test(r!))).toEqual([]);
    expect(EVENT_USES.map((e) => e.reason).sort()).toEqual(Object.values(EVENT_REASONS).sort());
  });
});
