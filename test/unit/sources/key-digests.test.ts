/** What a KV v2 write's audit entry says of its keys, from the entries real servers wrote. */
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { keyDigestsOf } from '../../../lib/sources/key-digests.ts';
import { parseInput } from '../../../lib/sources/parse.ts';

const captured = new URL('../../vault/captured/', import.meta.url);
const read = (server: string, file: string): string => readFileSync(new URL(`${server}/${file}`, captured), 'utf8');
const SERVERS = ['openbao-2.7.2', 'vault-1.15.3', 'vault-1.21.1'] as const;
const HMAC_OR_DIGEST = /[0-9a-f]{64}/;

describe('key digests from real audit entries', () => {
  it.each(SERVERS)('%s: create and update carry their keys, a patch the keys it changes, from one device', (server) => {
    const changes = [
      'audit-kv2-write-response.json',
      'audit-kv2-update-response.json',
      'audit-kv2-patch-response.json',
    ].map((f) => parseInput(read(server, f)).changes[0]);
    expect(changes.map((c) => [c?.version, c?.keyDigests?.mode, c?.keyDigests?.names])).toEqual([
      [1, 'write', ['password']],
      [2, 'write', ['password']],
      [3, 'patch', ['user']],
    ]);
    const [first, second, third] = changes.map((c) => c?.keyDigests);
    // The same device wrote all three: the same identity; two different passwords: two different digests.
    expect(first?.device()).toBeDefined();
    expect(new Set([first?.device(), second?.device(), third?.device()]).size).toBe(1);
    expect(first?.digests().get('password')).not.toBe(second?.digests().get('password'));
  });

  it('two servers (two audit devices, two salts) are two devices', () => {
    const [a, b] = SERVERS.map((s) =>
      parseInput(read(s, 'audit-kv2-update-response.json')).changes[0]?.keyDigests?.device(),
    );
    expect(a).not.toBe(b);
  });

  it.each(SERVERS)('%s: deletes, undeletes, destroys, reads and KV v1 writes carry no keys (every key)', (server) => {
    for (const file of [
      'audit-kv2-delete-response.json',
      'audit-kv2-delete-versions-response.json',
      'audit-kv2-undelete-response.json',
      'audit-kv2-destroy-response.json',
      'audit-kv2-metadata-delete-response.json',
      'audit-kv1-write-response.json',
      'audit-kv1-update-response.json',
    ]) {
      for (const change of parseInput(read(server, file)).changes)
        expect([file, change.keyDigests]).toEqual([file, undefined]);
    }
  });

  it.each(SERVERS)('%s: no HMAC or digest in what the change serializes to or prints as', (server) => {
    const text = read(server, 'audit-kv2-update-response.json');
    const parsed = parseInput(text);
    expect(parsed.changes[0]?.keyDigests?.names).toEqual(['password']);
    expect(JSON.stringify(parsed)).not.toMatch(HMAC_OR_DIGEST);
    expect(inspect(parsed, { depth: 10 })).not.toMatch(HMAC_OR_DIGEST);
  });

  const entry = (data: unknown, deletion: unknown = `hmac-sha256:${'a'.repeat(64)}`) => ({
    request: { data: { data } },
    response: { data: { deletion_time: deletion } },
  });
  const hmac = (c: string) => `hmac-sha256:${c.repeat(64)}`;

  it.each([
    ['a raw (log_raw) value', entry({ password: 'hunter2' }), 'update'],
    ['a nested map', entry({ password: { x: hmac('b') } }), 'update'],
    ['a number', entry({ port: 5432 }), 'update'],
    ['null outside a patch', entry({ password: null }), 'update'],
    ['no data map', { request: { data: {} } }, 'create'],
    ['too many keys', entry(Object.fromEntries(Array.from({ length: 257 }, (_, i) => [`k${i}`, hmac('c')]))), 'update'],
    ['a key name too long', entry({ ['k'.repeat(257)]: hmac('c') }), 'update'],
    ['an operation that is no write', entry({ password: hmac('c') }), 'read'],
  ])('%s: the entry says nothing of its keys (every key)', (_name, value, operation) => {
    expect(keyDigestsOf(value, operation)).toBeUndefined();
  });

  it('a patch that removes a key (null) carries it as removed; an entry without an HMAC deletion_time has no device', () => {
    const patch = keyDigestsOf(entry({ old: null, password: hmac('d') }), 'patch');
    expect([patch?.names, patch?.digests().get('old'), typeof patch?.digests().get('password')]).toEqual([
      ['old', 'password'],
      null,
      'string',
    ]);
    expect(keyDigestsOf(entry({ password: hmac('d') }, ''), 'update')?.device()).toBeUndefined();
    expect(keyDigestsOf(entry({ password: hmac('d') }, '2026-12-01T00:00:00Z'), 'update')?.device()).toBeUndefined();
  });
});
