/**
 * Event notifications' `vault_index`: Vault Enterprise 1.16+ puts its storage index on every KV event
 * (docs: concepts/events, "in the same format as the X-Vault-Index header"); the change keeps it when it is bounded
 * base64, so a metadata read made for the change can send it as `X-Vault-Index`. It is untrusted: anything else is
 * left out, and the change still counts.
 */
import { describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';
import { isVaultIndex, MAX_VAULT_INDEX_LENGTH } from '../../../lib/sources/vault-index.ts';

/** The example of the Events page (Vault 1.21 docs, developer.hashicorp.com/vault/docs/concepts/events). */
const DOCS_INDEX =
  'djE6MDAwYjdlMWMtZmU2Yy05NWU1LTExYzMtOGIzNjJmZjRmNDg3Ojc0NDkwNTo3NDQ5MDU6N2Q4NGFhN2NmYzc5ZWMzMjEzOGMxYTc4ZDI1YzdjYTMxN2IxOWFmZTA3NjFiZWYyMzA5NDFjOTA4Zjk4YzM0Mw==';

/** The current (1.16+) `kv-v2/data-write` shape, with `vault_index` set to `index` (absent when undefined). */
function dataWrite(index?: unknown, extra: Record<string, unknown> = {}): string {
  const metadata = {
    current_version: '7',
    data_path: 'secret/data/web/db',
    modified: 'true',
    oldest_version: '0',
    operation: 'data-write',
    path: 'secret/data/web/db',
    ...(index === undefined ? {} : { vault_index: index }),
  };
  return JSON.stringify({
    id: 'a3be9fb1-b514-519f-5b25-b6f144a8c1ce',
    source: 'vault://vault-node-1',
    specversion: '1.0',
    type: '*',
    data: {
      event: { id: 'a3be9fb1-b514-519f-5b25-b6f144a8c1ce', metadata },
      event_type: 'kv-v2/data-write',
      plugin_info: {
        mount_class: 'secret',
        mount_accessor: 'kv_5dc4d18e',
        mount_path: 'secret/',
        plugin: 'kv',
        version: 'v0.25.0+builtin',
      },
      ...extra,
    },
    datacontentype: 'application/cloudevents',
    time: '2026-10-14T09:12:03.551872Z',
  });
}

describe('an event notification keeps its vault_index when it is bounded base64', () => {
  it.each([
    ['the docs example', DOCS_INDEX, DOCS_INDEX],
    ['base64 with one = of padding', 'djE6YWJjOjE6MTpmZmY=', 'djE6YWJjOjE6MTpmZmY='],
    ['base64 without padding', 'djE6YWJjOjE6MTpm', 'djE6YWJjOjE6MTpm'],
    ['absent (a 1.15 event)', undefined, undefined],
    ['empty', '', undefined],
    ['a number', 744905, undefined],
    ['an object', { v: 1 }, undefined],
    ['a header break', `${DOCS_INDEX.slice(0, 20)}\r\nX-Vault-Inconsistent: forward-active-node`, undefined],
    ['a space', 'djE6 YWJj', undefined],
    ['the decoded text (":" is not base64)', 'v1:000b7e1c:744905:744905:7d84', undefined],
    ['URL-safe base64 (Vault uses the standard alphabet)', 'djE6-_Jj', undefined],
    ['a length that is no multiple of 4', 'djE6YWJ', undefined],
    ['padding in the middle', 'dj==YWJj', undefined],
    [`${MAX_VAULT_INDEX_LENGTH} characters`, 'A'.repeat(MAX_VAULT_INDEX_LENGTH), 'A'.repeat(MAX_VAULT_INDEX_LENGTH)],
    [`${MAX_VAULT_INDEX_LENGTH + 4} characters`, 'A'.repeat(MAX_VAULT_INDEX_LENGTH + 4), undefined],
  ])('%s', (_name, index, kept) => {
    const result = parseInput(dataWrite(index));
    expect(result.rejected).toEqual([]);
    expect(result.changes).toHaveLength(1);
    expect(result.changes[0]).toMatchObject({
      mount: 'secret',
      key: 'web/db',
      operation: 'write',
      version: 7,
      source: 'event',
    });
    expect(result.changes[0]?.vaultIndex).toBe(kept);
    expect(isVaultIndex(index)).toBe(kept !== undefined);
  });

  it('reads the current shape in a namespace: data.namespace, namespace-relative path, plugin_info.version', () => {
    const result = parseInput(dataWrite(DOCS_INDEX, { namespace: 'team-a/' }));
    expect(result.changes[0]).toMatchObject({
      namespace: 'team-a',
      mount: 'secret',
      key: 'web/db',
      path: 'secret/web/db',
      version: 7,
      vaultIndex: DOCS_INDEX,
    });
  });

  it('keeps it on every KV event type that carries one, not only data writes', () => {
    const deleted = dataWrite(DOCS_INDEX)
      .replace('"event_type":"kv-v2/data-write"', '"event_type":"kv-v2/destroy"')
      .replaceAll('secret/data/web/db', 'secret/destroy/web/db');
    expect(parseInput(deleted).changes[0]).toMatchObject({
      operation: 'destroy',
      key: 'web/db',
      vaultIndex: DOCS_INDEX,
    });
  });

  it('never carries an audit entry a vault index (audit entries have none)', () => {
    const audit = JSON.stringify({
      type: 'response',
      time: '2026-10-14T09:12:03Z',
      request: { id: 'r1', operation: 'create', path: 'secret/data/web/db', mount_type: 'kv', vault_index: DOCS_INDEX },
      response: { data: { version: 7 } },
    });
    const change = parseInput(audit, { mounts: new Map([['secret', 2]]) }).changes[0];
    expect(change).toMatchObject({ source: 'audit', version: 7 });
    expect(change).not.toHaveProperty('vaultIndex');
  });
});
