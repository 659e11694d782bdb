import { describe, expect, it } from 'vitest';
import { findMount, inferKvVersion, kvMeaning, underMount } from '../../../lib/sources/kv-mounts.ts';

describe('kvMeaning: what a Vault operation on a KV path means', () => {
  it.each([
    // kv version, path below the mount, Vault operation, expected
    [2, 'data/app/db', 'create', { kind: 'change', operation: 'write', key: 'app/db' }],
    [2, 'data/app/db', 'update', { kind: 'change', operation: 'write', key: 'app/db' }],
    [2, 'data/app/db', 'patch', { kind: 'change', operation: 'write', key: 'app/db' }],
    [2, 'data/app/db', 'delete', { kind: 'change', operation: 'delete', key: 'app/db' }],
    [2, 'data/app/db', 'read', { kind: 'ignored', reason: 'read' }],
    [2, 'delete/app/db', 'update', { kind: 'change', operation: 'delete', key: 'app/db' }],
    [2, 'undelete/app/db', 'update', { kind: 'change', operation: 'undelete', key: 'app/db' }],
    [2, 'destroy/app/db', 'update', { kind: 'change', operation: 'destroy', key: 'app/db' }],
    [2, 'destroy/app/db', 'delete', { kind: 'ignored', reason: 'not-kv' }],
    [2, 'metadata/app/db', 'update', { kind: 'ignored', reason: 'metadata' }],
    [2, 'metadata/app/db', 'patch', { kind: 'ignored', reason: 'metadata' }],
    [2, 'metadata/app/db', 'delete', { kind: 'change', operation: 'destroy', key: 'app/db' }],
    [2, 'metadata/app/', 'list', { kind: 'ignored', reason: 'read' }],
    [2, 'config', 'update', { kind: 'ignored', reason: 'metadata' }],
    [2, 'subkeys/app/db', 'read', { kind: 'ignored', reason: 'read' }],
    [2, 'subkeys/app/db', 'update', { kind: 'ignored', reason: 'read' }],
    [2, 'data/', 'update', { kind: 'ignored', reason: 'not-kv' }],
    [2, 'other/app', 'update', { kind: 'ignored', reason: 'not-kv' }],
    [1, 'app/db', 'create', { kind: 'change', operation: 'write', key: 'app/db' }],
    [1, 'app/db', 'update', { kind: 'change', operation: 'write', key: 'app/db' }],
    [1, 'app/db', 'delete', { kind: 'change', operation: 'delete', key: 'app/db' }],
    [1, 'app/', 'list', { kind: 'ignored', reason: 'read' }],
    [1, '', 'update', { kind: 'ignored', reason: 'read' }],
    [1, 'data/app', 'update', { kind: 'change', operation: 'write', key: 'data/app' }],
  ] as const)('v%s %s %s', (kvVersion, rest, operation, expected) => {
    expect(kvMeaning(kvVersion, rest, operation)).toMatchObject(expected);
  });
});

describe('inferKvVersion', () => {
  it.each([
    ['data/app', 'update', 3, 2],
    ['data/app', 'update', null, 1],
    ['data/app', 'delete', null, 2],
    ['data/app', 'read', null, 2],
    ['metadata/app', 'delete', null, 2],
    ['destroy/app', 'update', null, 2],
    ['app/db', 'update', null, 1],
    ['config', 'update', null, 1],
  ] as const)('%s %s (version %s) -> v%s', (rest, op, version, expected) => {
    expect(inferKvVersion(rest, op, version)).toBe(expected);
  });
});

describe('mount lookup', () => {
  const mounts = new Map([
    ['secret', 2],
    ['apps/kv', 1],
    ['team-a/secret', 2],
  ] as const);
  it.each([
    ['', 'secret/data/x', { mount: 'secret', kvVersion: 2 }],
    ['', 'apps/kv/x/y', { mount: 'apps/kv', kvVersion: 1 }],
    ['team-a', 'secret/data/x', { mount: 'secret', kvVersion: 2 }],
    ['team-b', 'secret/data/x', undefined],
    ['', 'other/x', undefined],
  ] as const)('ns %j path %s', (ns, path, expected) => {
    expect(findMount(mounts, ns, path)).toEqual(expected);
  });
  it('finds nothing in an empty table', () => expect(findMount(new Map(), '', 'secret/x')).toBeUndefined());
  it('splits paths under a mount', () => {
    expect(underMount('secret/data/x', 'secret')).toBe('data/x');
    expect(underMount('secret', 'secret')).toBe('');
    expect(underMount('secretive/x', 'secret')).toBeUndefined();
  });
});
