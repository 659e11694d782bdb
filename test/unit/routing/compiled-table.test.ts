import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compileRoutingTable,
  COMPILED_TABLE_FORMAT,
  isCompiledTable,
  loadCompiledRoutingTable,
} from '../../../lib/routing/compiled-table.ts';
import { loadRoutingTable, RoutingTableError } from '../../../lib/routing/routing-table.ts';
import { matchRoutes } from '../../../lib/routing/router.ts';
import { tableShape } from './table-shape.ts';

const TABLES = ['example', 'dev', 'staging', 'prod'].map((stage) => ({
  stage,
  file: `infra/routes/${stage}.yaml`,
  text: readFileSync(new URL(`../../../infra/routes/${stage}.yaml`, import.meta.url), 'utf8'),
}));

describe('compiled routing table', () => {
  it.each(TABLES)('loads $stage into the same table as its YAML, without the YAML', ({ file, text }) => {
    const compiled = compileRoutingTable(text, file);
    expect(isCompiledTable(compiled)).toBe(true);
    expect(tableShape(loadCompiledRoutingTable(compiled, file))).toEqual(tableShape(loadRoutingTable(text, file)));
  });

  it('carries the checked document whole, so a field the schema adds travels without a change here', () => {
    const { file, text } = TABLES[0] as (typeof TABLES)[number];
    const parsed = JSON.parse(compileRoutingTable(text, file)) as {
      format: string;
      source: { file: string; sha256: string };
      document: Record<string, unknown>;
    };
    expect(parsed.format).toBe(COMPILED_TABLE_FORMAT);
    expect(parsed.source.file).toBe(file);
    expect(parsed.source.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(parsed.document)).toEqual(expect.arrayContaining(['clusters', 'vault', 'routes']));
  });

  it('matches like the YAML table does', () => {
    const text =
      'clusters:\n  a: { kubeconfig: { env: A } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: api\n    match: { path: "secret/{app}/db" }\n    targets: [{ clusters: [a], namespace: prod, names: [api], kind: Deployment, name: "{app}" }]\n';
    const table = loadCompiledRoutingTable(compileRoutingTable(text, 'r.yaml'), 'r.json');
    const change = {
      namespace: '',
      mount: 'secret',
      path: 'secret/api/db',
      key: 'api/db',
      operation: 'write',
      version: 3,
      source: 'audit',
      id: '1',
      time: 0,
    } as unknown as Parameters<typeof matchRoutes>[1];
    expect(matchRoutes(table, change).map((m) => [m.route.name, m.captures])).toEqual([['api', { app: 'api' }]]);
  });

  it('keeps file:line errors: compiling refuses a table validate refuses, with the same problems', () => {
    const text =
      'clusters:\n  a: { kubeconfig: { env: A } }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: api\n    match: { path: "secret/{app}/db" }\n    targets: [{ clusters: [nope], namespace: prod, names: [api], kind: Deployment, name: "{app}" }]\n';
    const problems = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        return (e as RoutingTableError).problems;
      }
      return [];
    };
    const fromCompile = problems(() => compileRoutingTable(text, 'r.yaml'));
    expect(fromCompile).toEqual(problems(() => loadRoutingTable(text, 'r.yaml')));
    expect(fromCompile[0]).toMatchObject({ file: 'r.yaml', line: 7, field: 'routes[0].targets[0].clusters' });
  });

  it('refuses a file that is not a compiled table of this format', () => {
    expect(() =>
      loadCompiledRoutingTable('{"format":"vault-rollout/compiled-routing-table/v0","document":{}}', 'r.json'),
    ).toThrow(/compile it with npm run package/);
    expect(() => loadCompiledRoutingTable('routes: []', 'r.json')).toThrow(RoutingTableError);
    expect(isCompiledTable('routes: []')).toBe(false);
  });
});
