import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { memoryIo, readRepoFile, vaultSamples } from '../../helpers.ts';

const routes = readRepoFile('infra/routes/example.yaml');
const demo = readRepoFile('test/fixtures/demo/rotation.ndjson');

describe('vault-rollout plan', () => {
  it('prints a readable plan and exits 0 when every record was understood', async () => {
    const io = memoryIo({ 'routes.yaml': routes, '-': demo });
    expect(await main(['plan', '--routes', 'routes.yaml'], io)).toBe(0);
    expect(io.out).toContain('Changes: 5 of 6 records (1 ignored, 0 rejected)');
    expect(io.out).toMatch(/alpha\s+payments\s+Deployment\s+api\s+payments-db\s+team-a\/secret\/payments\/api\/db@v7/);
    expect(io.out).toContain('Targets: 11');
    expect(io.out).toContain(
      'Note: legacy is KV v1 (no versions): reconcile cannot see changes there; only the change feed restarts for them.',
    );
    expect(io.err).toBe('');
  });

  it('prints the documented JSON', async () => {
    const io = memoryIo({ 'routes.yaml': routes, 'in.ndjson': demo });
    expect(await main(['plan', '--routes', 'routes.yaml', '--input', 'in.ndjson', '--json'], io)).toBe(0);
    const doc = JSON.parse(io.out);
    expect(Object.keys(doc)).toEqual(['changes', 'ignored', 'rejected', 'targets', 'problems', 'waves']);
    expect(doc.changes[0]).toMatchObject({
      namespace: 'team-a',
      mount: 'secret',
      key: 'payments/api/db',
      path: 'secret/payments/api/db',
      operation: 'write',
      version: 7,
      source: 'audit',
      id: '4b8f1e0a-6f0e-4c2a-9d3b-2f3f5b2d1a10',
    });
    expect(doc.changes[3]).toMatchObject({ mount: 'legacy', version: null, kvVersion: 1 });
    expect(doc.ignored).toEqual([{ record: 'line 3', reason: 'read', detail: 'read is not a change' }]);
    expect(doc.targets[0]).toMatchObject({
      cluster: 'alpha',
      namespace: 'batch',
      kind: 'CronJob',
      annotated: true,
      routes: ['batch-opt-in'],
      paths: ['legacy/batch/reports'],
    });
    expect(doc.targets.find((t: { kind: string }) => t.kind === 'Harbor')).toMatchObject({
      apiVersion: 'example.com/v1',
      name: 'main',
      patch: { spec: { secretVersion: '2' } },
    });
    expect(doc.targets.find((t: { selector?: string }) => t.selector)).toMatchObject({
      selector: 'vault-rollout.io/tls=shared',
    });
  });

  it('exits 2 when a record cannot be parsed, names it, and still plans the others', async () => {
    const io = memoryIo({ 'routes.yaml': routes, '-': `${demo}{"type":"response","request":{"id":1}}\nnot json\n` });
    expect(await main(['plan', '--routes', 'routes.yaml', '--json'], io)).toBe(2);
    const doc = JSON.parse(io.out);
    expect(doc.rejected).toEqual([
      {
        record: 'line 7',
        error:
          'not a valid audit entry: request.id: Invalid input: expected string, received number; request.operation: Invalid input: expected string, received undefined; request.path: Invalid input: expected string, received undefined',
      },
      { record: 'line 8', error: 'invalid JSON' },
    ]);
    expect(doc.targets).toHaveLength(11);
    expect(io.err).toContain('stdin: line 8: invalid JSON');
  });

  it('plan --json shows the Vault index an event carries, and none for an audit entry', async () => {
    const event = memoryIo({
      'routes.yaml': routes,
      '-': readFileSync(`${vaultSamples}event-kvv2-data-write.json`, 'utf8'),
    });
    expect(await main(['plan', '--routes', 'routes.yaml', '--json'], event)).toBe(0);
    expect(JSON.parse(event.out).changes[0].vaultIndex).toBe(
      JSON.parse(readFileSync(`${vaultSamples}event-kvv2-data-write.json`, 'utf8')).data.event.metadata.vault_index,
    );
    const audit = memoryIo({
      'routes.yaml': routes,
      '-': readFileSync(`${vaultSamples}audit-response-kvv2-update.json`, 'utf8'),
    });
    expect(await main(['plan', '--routes', 'routes.yaml', '--json'], audit)).toBe(0);
    expect(JSON.parse(audit.out).changes[0]).not.toHaveProperty('vaultIndex');
  });

  it('honours --format', async () => {
    const io = memoryIo({
      'routes.yaml': routes,
      '-': readFileSync(`${vaultSamples}event-kvv2-data-write.json`, 'utf8'),
    });
    expect(await main(['plan', '--routes', 'routes.yaml', '--format', 'audit', '--json'], io)).toBe(2);
    expect(JSON.parse(io.out).rejected[0].error).toBe('a event record, but the input format says otherwise');
  });

  it.each([
    [['plan'], 64, 'missing --routes FILE'],
    [
      ['plan', '--routes', 'r', '--format', 'xml'],
      64,
      '--format xml: one of auto, audit, event, cloudwatch, fluent-bit, vector',
    ],
    [['plan', '--bogus'], 64, 'unknown option "--bogus"'],
    [['plan', '--routes', 'missing.yaml'], 1, 'cannot read the routing table: missing.yaml: no such file'],
    [
      ['plan', '--routes', 'routes.yaml', '--input', 'missing.ndjson'],
      1,
      'cannot read the change records: missing.ndjson: no such file',
    ],
    [['status', '--routes', 'routes.yaml', '--output', 'xml'], 64, '--output xml: one of table, json, yaml, html'],
    [['status', '--routes', 'routes.yaml', '--json', '--output', 'html'], 64, '--json is -o json: give one of them'],
    [
      ['serve', '--status-page', '--status-refresh', '1s'],
      64,
      '--status-refresh 1s: 1s is out of range: from 5s to 1h',
    ],
    [['frobnicate'], 64, 'unknown command "frobnicate"'],
    [[], 64, 'Usage: vault-rollout'],
  ])('%j exits %i', async (argv, code, message) => {
    const io = memoryIo({ 'routes.yaml': routes });
    expect(await main(argv, io)).toBe(code);
    expect(io.err + io.out).toContain(message);
  });

  it('prints help', async () => {
    const io = memoryIo();
    expect(await main(['--help'], io)).toBe(0);
    expect(io.out).toMatch(/validate +Check a routing table/);
  });

  it.each([['--version'], ['version']])("%s prints package.json's version", async (flag) => {
    const io = memoryIo();
    expect(await main([flag], io)).toBe(0);
    expect(io.out).toBe(`vault-rollout ${JSON.parse(readRepoFile('package.json')).version}\n`);
  });
});

describe('vault-rollout validate', () => {
  it('exits 0 on a good table', async () => {
    const io = memoryIo({ 'routes.yaml': routes });
    expect(await main(['validate', 'routes.yaml'], io)).toBe(0);
    expect(io.out).toBe('routes.yaml: ok (3 clusters, 4 routes, 5 targets, 3 KV mounts)\n');
  });

  it('exits 1 and lists every problem', async () => {
    const io = memoryIo({
      'bad.yaml':
        'clusters: {}\nroutes:\n  - name: x\n    match: { path: "a/{b}" }\n    targets: [{ clusters: [c], namespace: n, names: ["*"], kind: Deployment, name: "{b}" }]\n',
    });
    expect(await main(['validate', 'bad.yaml'], io)).toBe(1);
    expect(io.err).toContain('bad.yaml:5:27: routes[0].targets[0].clusters: unknown cluster "c"; defined: none');
  });

  it('needs exactly one file', async () => {
    expect(await main(['validate'], memoryIo())).toBe(64);
  });
});

describe('vault-rollout schema', () => {
  it('prints the JSON Schema that infra/routes/routing-table.schema.json holds (run npm run schema after changing it)', async () => {
    const io = memoryIo();
    expect(await main(['schema'], io)).toBe(0);
    expect(io.out).toBe(readRepoFile('infra/routes/routing-table.schema.json'));
  });
});
