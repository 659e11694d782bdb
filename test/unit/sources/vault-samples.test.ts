/** Every public sample in test/events/vault-samples is an input; expectations follow from Vault's format. */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';
import { vaultSamples } from '../../helpers.ts';

const mounts = new Map([
  ['kv', 2],
  ['kvv1', 1],
  ['secret', 2],
] as const);

type Expectation = { change: Record<string, unknown> } | { ignored: string };

const expectations: Record<string, Expectation> = {
  'audit-request-token-lookup.json': { ignored: 'request-entry' },
  'audit-response-token-lookup.json': { ignored: 'auth' },
  'audit-response-kvv2-read.json': { ignored: 'read' },
  'audit-response-kvv1-create.json': {
    change: {
      namespace: '',
      mount: 'kvv1',
      key: 'app/db',
      path: 'kvv1/app/db',
      operation: 'write',
      version: null,
      kvVersion: 1,
      source: 'audit',
      id: 'r1',
    },
  },
  'audit-response-kvv2-create.json': {
    change: {
      namespace: '',
      mount: 'kv',
      key: 'app/jwt',
      path: 'kv/app/jwt',
      operation: 'write',
      version: 1,
      kvVersion: 2,
      source: 'audit',
      id: 'r2',
    },
  },
  'audit-response-kvv2-update.json': {
    change: {
      namespace: '',
      mount: 'kv',
      key: 'app/db',
      path: 'kv/app/db',
      operation: 'write',
      version: 3,
      kvVersion: 2,
      source: 'audit',
      id: 'r1',
    },
  },
  'audit-response-kvv2-delete.json': {
    change: {
      namespace: '',
      mount: 'kv',
      key: 'app/db',
      path: 'kv/app/db',
      operation: 'delete',
      version: null,
      kvVersion: 2,
      source: 'audit',
      id: 'r3',
    },
  },
  'event-kvv2-data-write.json': {
    change: {
      namespace: '',
      mount: 'secret',
      key: 'foo',
      path: 'secret/foo',
      operation: 'write',
      version: 1,
      kvVersion: 2,
      source: 'event',
      id: 'a3be9fb1-b514-519f-5b25-b6f144a8c1ce',
      vaultIndex:
        'djE6MDAwYjdlMWMtZmU2Yy05NWU1LTExYzMtOGIzNjJmZjRmNDg3Ojc0NDkwNTo3NDQ5MDU6N2Q4NGFhN2NmYzc5ZWMzMjEzOGMxYTc4ZDI1YzdjYTMxN2IxOWFmZTA3NjFiZWYyMzA5NDFjOTA4Zjk4YzM0Mw==',
    },
  },
};

describe('the public Vault samples', () => {
  const files = readdirSync(vaultSamples).filter((f) => f.endsWith('.json'));

  it('has an expectation for every sample', () => {
    expect(files.sort()).toEqual(Object.keys(expectations).sort());
  });

  it.each(files)('%s parses to what the format says', (file) => {
    const text = readFileSync(`${vaultSamples}${file}`, 'utf8');
    const expected = expectations[file];
    const result = parseInput(text, { mounts });
    expect(result.rejected).toEqual([]);
    if (expected && 'change' in expected) {
      expect(result.ignored).toEqual([]);
      expect(result.changes).toHaveLength(1);
      expect(result.changes[0]).toMatchObject(expected.change);
    } else {
      expect(result.changes).toEqual([]);
      expect(result.ignored.map((i) => i.reason)).toEqual([expected?.ignored]);
    }
  });

  it('infers the KV version without a routing table and says so', () => {
    const create = parseInput(readFileSync(`${vaultSamples}audit-response-kvv2-create.json`, 'utf8'));
    expect(create.changes[0]).toMatchObject({ kvVersion: 2, kvVersionFrom: 'inferred', key: 'app/jwt' });
    const v1 = parseInput(readFileSync(`${vaultSamples}audit-response-kvv1-create.json`, 'utf8'));
    expect(v1.changes[0]).toMatchObject({ kvVersion: 1, kvVersionFrom: 'inferred', key: 'app/db' });
  });

  it('reads every sample as one NDJSON batch, counting each once', () => {
    const batch = files.map((f) => JSON.stringify(JSON.parse(readFileSync(`${vaultSamples}${f}`, 'utf8')))).join('\n');
    const result = parseInput(batch, { mounts });
    expect(result.changes.length + result.ignored.length + result.rejected.length).toBe(files.length);
    expect(result.changes).toHaveLength(5);
  });
});
