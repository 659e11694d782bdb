import { describe, expect, it } from 'vitest';
import { compilePattern } from '../../../lib/routing/path-pattern.ts';
import { expandPattern, type ListFolder } from '../../../lib/vault/expand-pattern.ts';

/** A fake KV v2 mount: keys as Vault lists them, folder by folder. */
function mount(keys: readonly string[]): { list: ListFolder; lists: string[] } {
  const lists: string[] = [];
  const list: ListFolder = (_ns, _mount, folder) => {
    lists.push(folder);
    const prefix = folder ? `${folder}/` : '';
    const entries = new Set<string>();
    for (const key of keys) {
      if (!key.startsWith(prefix)) continue;
      const rest = key.slice(prefix.length);
      const slash = rest.indexOf('/');
      entries.add(slash < 0 ? rest : `${rest.slice(0, slash)}/`);
    }
    return Promise.resolve({ keys: [...entries].sort(), truncated: false, total: entries.size });
  };
  return { list, lists };
}

const KEYS = [
  'apps/a/db',
  'apps/a/api',
  'apps/b/db',
  'apps/b/deep/db',
  'apps/c',
  'other/x',
  'team-a/pay/db',
  'team-b/pay/db',
];
const mounts = new Map([
  ['secret', 2 as const],
  ['legacy', 1 as const],
]);

describe('expandPattern', () => {
  it.each([
    ['secret/apps/{app}/db', ['apps/a/db', 'apps/b/db'], ['apps']],
    // Literal segments after a wild one are not listed: apps/b/api is a candidate whose metadata read finds nothing.
    ['secret/apps/*/api', ['apps/a/api', 'apps/b/api'], ['apps']],
    [
      'secret/apps/**',
      ['apps/a/api', 'apps/a/db', 'apps/b/db', 'apps/b/deep/db', 'apps/c'],
      ['apps', 'apps/a', 'apps/b', 'apps/b/deep'],
    ],
    ['secret/**/db', ['apps/a/db', 'apps/b/db', 'apps/b/deep/db', 'team-a/pay/db', 'team-b/pay/db'], null],
    ['secret/team-*/pay/db', ['team-a/pay/db', 'team-b/pay/db'], ['']],
    // A literal path costs no LIST: its metadata read says whether it exists.
    ['secret/apps/a/db', ['apps/a/db'], []],
  ])('%s', async (pattern, keys, lists) => {
    const fake = mount(KEYS);
    const out = await expandPattern(compilePattern(pattern), '', mounts, fake.list);
    expect(out).toMatchObject({ kind: 'kv2', mount: 'secret', keys });
    if (lists) expect(fake.lists).toEqual(lists);
  });

  it('reports KV v1 mounts and wildcard mounts instead of expanding them', async () => {
    expect(await expandPattern(compilePattern('legacy/{app}'), '', mounts, mount([]).list)).toEqual({
      kind: 'kv1',
      mount: 'legacy',
    });
    expect((await expandPattern(compilePattern('*/{app}'), '', mounts, mount([]).list)).kind).toBe('unexpandable');
  });

  it('is bounded in keys and LISTs, and says so', async () => {
    const many = Array.from({ length: 50 }, (_, i) => `bulk/k${i}`);
    expect(
      await expandPattern(compilePattern('secret/bulk/*'), '', mounts, mount(many).list, {
        maxKeys: 10,
        maxLists: 100,
      }),
    ).toMatchObject({ keys: expect.any(Array), truncated: 'more than 10 keys' });
    expect(
      await expandPattern(compilePattern('secret/**'), '', mounts, mount(KEYS).list, { maxKeys: 100, maxLists: 2 }),
    ).toMatchObject({ truncated: 'more than 2 LIST requests' });
  });
});
