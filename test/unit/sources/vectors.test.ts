/** Table-driven: every vector under test/events/ (built from Vault's documented formats) with its expectation. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseInput } from '../../../lib/sources/parse.ts';
import type { KvVersion } from '../../../lib/sources/secret-change.ts';
import { readRepoFile, repoRoot } from '../../helpers.ts';

interface Case {
  file: string;
  mounts?: Record<string, KvVersion>;
  expect: { changes: Array<Record<string, unknown>>; ignored: string[]; rejected: number };
}

const cases = JSON.parse(readRepoFile('test/events/cases.json')) as Case[];

describe('test vectors', () => {
  it.each(cases.map((c) => [c.file, c] as const))('%s', (_file, c) => {
    const text = readFileSync(`${repoRoot}test/events/${c.file}`, 'latin1');
    const result = parseInput(text, { mounts: new Map(Object.entries(c.mounts ?? {})) });
    const fields = ['namespace', 'mount', 'key', 'path', 'operation', 'version', 'kvVersion', 'source'] as const;
    expect(result.changes.map((ch) => Object.fromEntries(fields.map((f) => [f, ch[f]])))).toEqual(
      c.expect.changes.map((ch) => Object.fromEntries(fields.map((f) => [f, ch[f]]))),
    );
    // A case that names `vaultIndex` (null: none) holds the event's index kept on the change, or left out.
    c.expect.changes.forEach((ch, i) => {
      if ('vaultIndex' in ch)
        expect(result.changes[i]?.vaultIndex ?? null, `change ${i} vaultIndex`).toEqual(ch.vaultIndex);
    });
    expect(result.ignored.map((i) => i.reason)).toEqual(c.expect.ignored);
    expect(result.rejected).toHaveLength(c.expect.rejected);
  });
});
