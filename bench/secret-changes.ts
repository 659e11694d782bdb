/** The changes benchmarks hand the worker straight: what the intake makes of a KV v2 write seen in the audit log. */
import type { SecretChange } from '../lib/sources/secret-change.ts';

/** A KV v2 write of `key` under the `secret` mount, at `version`, with its request id. */
export const kvWrite = (key: string, version: number, id: string): SecretChange => ({
  namespace: '',
  mount: 'secret',
  key,
  path: `secret/${key}`,
  operation: 'write',
  version,
  kvVersion: 2,
  kvVersionFrom: 'routes',
  source: 'audit',
  via: 'direct',
  id,
  time: new Date().toISOString(),
  record: 'bench',
});
