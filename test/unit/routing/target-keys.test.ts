/** A target's `keys`: validated with file:line errors, planned per path, shown by `plan`. */
import { describe, expect, it } from 'vitest';
import { planRollouts } from '../../../lib/plan/planner.ts';
import { readFileSync } from 'node:fs';
import { main } from '../../../lib/cli/main.ts';
import { keysLabel, keysWouldSkip, planJson, planText } from '../../../lib/report/plan-report.ts';
import { memoryIo } from '../../helpers.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { emptyParseResult, type SecretChange } from '../../../lib/sources/secret-change.ts';
import { problemsOf } from './problems.ts';
import { kvWrite } from '../../secret-changes.ts';

const head = `clusters:
  eu: { kubeconfig: { file: eu.yaml } }
routes:
  - name: db
    match: { path: "secret/app/db" }
    targets:
`;

const change = (key: string, version: number): SecretChange => kvWrite(key, version, { id: `id-${version}` });

describe('target keys', () => {
  it('every target form may name keys; the plan carries them per path with the route they come from', () => {
    const table =
      loadRoutingTable(`${head}      - { clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [password, api_key] }
      - { clusters: [eu], namespace: p, kind: Deployment, name: all }
      - { clusters: [eu], namespace: p, consumers: { secret: db }, keys: [username] }
      - { clusters: [eu], namespace: p, sync: { kind: ExternalSecret, name: db }, keys: [password] }
      - { clusters: [eu], resource: { apiVersion: example.com/v1, kind: Harbor, name: h }, patch: { spec: { v: "{version}" } }, keys: [api_key] }
`);
    const plan = planRollouts(table, [change('app/db', 7)]);
    expect(plan.problems).toEqual([]);
    expect(plan.targets.map((t) => [t.kind, t.name, keysLabel(t)])).toEqual([
      ['Harbor', 'h', 'api_key (route db)'],
      ['Deployment', 'all', 'all'],
      ['Deployment', 'api', 'api_key, password (route db)'],
      ['ExternalSecret', 'db', 'password (route db)'],
      ['Secret', 'db', 'username (route db)'],
    ]);
    const json = planJson({ ...emptyParseResult(), changes: [change('app/db', 7)] }, plan);
    expect(json.targets[2]?.keys).toEqual({ 'secret/app/db': { keys: ['api_key', 'password'], from: ['route db'] } });
    expect(json.targets[1]?.keys).toEqual({ 'secret/app/db': 'all' });
    expect(json.changes[0]?.changedKeys).toBe('all');
    expect(planText({ ...emptyParseResult(), changes: [change('app/db', 7)] }, plan)).toMatch(
      /KEYS USED[\s\S]*api\s.*api_key, password \(route db\)/,
    );
  });

  it('two routes naming one target: the union of their keys; one without keys makes it every key, for that path only', () => {
    const table = loadRoutingTable(`clusters:
  eu: { kubeconfig: { file: eu.yaml } }
routes:
  - name: a
    match: { path: "secret/app/db" }
    targets: [{ clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [password] }]
  - name: b
    match: { path: "secret/app/db" }
    targets: [{ clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [username] }]
  - name: c
    match: { path: "secret/app/tls" }
    targets: [{ clusters: [eu], namespace: p, kind: Deployment, name: api }]
  - name: d
    match: { path: "secret/app/tls" }
    targets: [{ clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [crt] }]
`);
    const [target] = planRollouts(table, [change('app/db', 3), change('app/tls', 2)]).targets;
    expect(target?.uses).toEqual({ 'secret/app/db': { keys: ['password', 'username'], from: ['route a', 'route b'] } });
    expect(target && keysLabel(target)).toBe(
      'secret/app/db: password, username (route a, route b); secret/app/tls: all',
    );
  });

  it.each([
    [
      'an empty list',
      'keys: []',
      'routes.yaml:7:76: routes[0].targets[0].keys: list at least one key, or leave keys out (every key)',
    ],
    ['an empty name', 'keys: [""]', 'routes.yaml:7:77: routes[0].targets[0].keys[0]: a key name must not be empty'],
    ['a name twice', 'keys: [a, a]', 'routes.yaml:7:76: routes[0].targets[0].keys: each key once'],
    [
      'a name too long',
      `keys: [${'k'.repeat(257)}]`,
      'routes.yaml:7:77: routes[0].targets[0].keys[0]: a key name has at most 256 characters',
    ],
    [
      'too many keys',
      `keys: [${Array.from({ length: 65 }, (_, i) => `k${i}`).join(', ')}]`,
      'routes.yaml:7:76: routes[0].targets[0].keys: at most 64 keys',
    ],
    [
      'a control character',
      'keys: ["a\\tb"]',
      'routes.yaml:7:77: routes[0].targets[0].keys[0]: a key name must not contain control characters',
    ],
    ['a number', 'keys: [1]', 'routes.yaml:7:77: routes[0].targets[0].keys[0]: expected a string, got a number'],
  ])('refuses %s, naming file, line and field', (_name, keys, expected) => {
    expect(
      problemsOf(`${head}      - { clusters: [eu], namespace: p, kind: Deployment, name: api, ${keys} }\n`),
    ).toEqual([expected]);
  });
});

describe('plan with keys: which keys each entry of the input changed, compared within the input', () => {
  it.each(['openbao-2.7.2', 'vault-1.15.3', 'vault-1.21.1'])(
    '%s audit log: create = all, update = password, patch = user; a keyed target that would skip',
    async (server) => {
      const routes = `clusters:
  eu: { kubeconfig: { file: eu.yaml } }
routes:
  - name: db
    match: { path: "secret2/payments/api/db" }
    targets:
      - { clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [password] }
      - { clusters: [eu], namespace: p, kind: Deployment, name: all }
`;
      const log = readFileSync(new URL(`../../vault/captured/${server}/audit-file.ndjson`, import.meta.url), 'utf8');
      const io = memoryIo({ 'routes.yaml': routes, 'audit.ndjson': log });
      expect(await main(['plan', '--routes', 'routes.yaml', '--input', 'audit.ndjson', '--json'], io)).toBe(0);
      const doc = JSON.parse(io.out) as {
        changes: Array<{
          path: string;
          version: number | null;
          operation: string;
          changedKeys: unknown;
          keys?: unknown;
        }>;
        targets: Array<{ name: string; skipWhenAtPrevious?: string }>;
      };
      const writes = doc.changes.filter((c) => c.path === 'secret2/payments/api/db' && c.operation === 'write');
      expect(writes.map((c) => [c.version, c.changedKeys, c.keys])).toEqual([
        [1, 'all', { mode: 'write', keys: ['password'] }],
        [2, ['password'], { mode: 'write', keys: ['password'] }],
        [3, ['user'], { mode: 'patch', keys: ['user'] }],
      ]);
      expect(io.out).not.toMatch(/[0-9a-f]{64}/);
      const text = memoryIo({ 'routes.yaml': routes, 'audit.ndjson': log });
      await main(['plan', '--routes', 'routes.yaml', '--input', 'audit.ndjson'], text);
      expect(text.out).toMatch(/changed password/);
      expect(text.out).not.toMatch(/[0-9a-f]{64}/);
    },
  );

  it('the newest change of a path decides: a keyed target whose keys it did not change would be skipped at the version before', () => {
    const table =
      loadRoutingTable(`${head}      - { clusters: [eu], namespace: p, kind: Deployment, name: api, keys: [password] }
`);
    const [target] = planRollouts(table, [{ ...change('app/db', 7), changedKeys: ['user'] }]).targets;
    expect(target && keysWouldSkip(target)).toBe('keys password unchanged in v7');
    const [restarts] = planRollouts(table, [{ ...change('app/db', 7), changedKeys: ['password'] }]).targets;
    expect(restarts && keysWouldSkip(restarts)).toBeUndefined();
  });
});
