/** The changes unit tests hand the planner and the pipeline: what the intake makes of a KV v2 write in the audit log. */
import type { SecretChange } from '../lib/sources/secret-change.ts';

/** A KV v2 write of `key` under the `secret` mount at `version`, seen on line 1 of an audit log; `over` sets the rest. */
export const kvWrite = (key: string, version: number, over: Partial<SecretChange> = {}): SecretChange => ({
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
  id: `id-${key}-${version}`,
  time: '2026-11-20T10:00:00Z',
  record: 'line 1',
  ...over,
});

/** What a benchmark's change carries: its own request id, stamped now, from no input line. */
export const benchChange = (id: string): Partial<SecretChange> => ({
  id,
  time: new Date().toISOString(),
  record: 'bench',
});
