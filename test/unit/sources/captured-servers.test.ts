/**
 * What vault-rollout sees of each real server's audit log (test/vault/captured: the same operations recorded from
 * OpenBao 2.7.2, Vault 1.15.3 and Vault 1.21.1 by test/vault/capture.ts). Vault 1.21 adds `request.headers` and, for
 * deletes, undeletes, destroys and KV v1 writes, leaves the `response` object out of the response entry; none of that
 * may change a single change the parser finds.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseStream } from '../../../lib/sources/parse.ts';

const captured = new URL('../../vault/captured/', import.meta.url);

async function changesOf(server: string) {
  const text = readFileSync(new URL(`${server}/audit-file.ndjson`, captured), 'utf8');
  const parsed = await parseStream(
    (async function* () {
      yield text;
    })(),
    { format: 'audit' },
  );
  return {
    changes: parsed.changes.map(
      (c) => `${c.operation} ${c.path}${c.version === null ? '' : ` v${c.version}`} (kv v${c.kvVersion})`,
    ),
    rejected: parsed.rejected,
  };
}

describe('the captured audit logs of every server', () => {
  it.each(['openbao-2.7.2', 'vault-1.15.3', 'vault-1.21.1'])(
    '%s: the same changes, in order, and nothing rejected',
    async (server) => {
      const { changes, rejected } = await changesOf(server);
      expect(rejected).toEqual([]);
      expect(changes).toEqual((await changesOf('vault-1.15.3')).changes);
      expect(changes.length).toBeGreaterThanOrEqual(10);
    },
  );
});
