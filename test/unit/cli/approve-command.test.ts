/** `vault-rollout approve`: the errors a person meets, and what it records, on a SQLite rotation store. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../../lib/cli/main.ts';
import { SqliteRotationStore } from '../../../lib/rotations/sqlite-rotation-store.ts';
import { memoryIo } from '../../helpers.ts';

const R = '3f9a1c2b7d4e5f60';
const request = (wave: number, rotation = R) => ({
  rotation,
  route: 'app',
  secrets: ['secret/app/db version 2'],
  wave,
  waves: 3,
  since: `2026-11-20T10:00:0${wave}.000Z`,
});

async function withStore(requests: ReturnType<typeof request>[]) {
  const file = join(mkdtempSync(join(tmpdir(), 'vr-approve-cli-')), 'rotations.sqlite');
  const store = new SqliteRotationStore(file);
  for (const r of requests) await store.approvals.request(r);
  store.close();
  const run = async (args: string[]) => {
    const io = memoryIo({}, { VAULT_ROLLOUT_STATE_DB: file, USER: 'tester' });
    const code = await main(['approve', ...args], io);
    return { code, out: io.out, err: io.err };
  };
  const read = async (wave: number) => {
    const s = new SqliteRotationStore(file);
    try {
      return await s.approvals.get(R, wave);
    } finally {
      s.close();
    }
  };
  return { run, read };
}

describe('vault-rollout approve', () => {
  it.each([
    ['neither a rotation nor --list', []],
    ['both a rotation and --list', [R, '--list']],
    ['a rotation that is no key', ['../etc']],
    ['a --by that is no name', [R, '--by', 'a\u001b[31mb']],
    ['a wave below 2 (the first wave never waits)', [R, '--wave', '1']],
  ])('a usage error: %s', async (_, args) => {
    const { run } = await withStore([]);
    expect((await run(args)).code).toBe(64);
  });

  it('lists the waves waiting, with the command that approves each', async () => {
    const { run } = await withStore([request(2), request(3, 'abcdef0123456789')]);
    const { code, out } = await run(['--list']);
    expect(code).toBe(0);
    expect(out).toContain(`vault-rollout approve ${R} --wave 2`);
    expect(out).toContain('vault-rollout approve abcdef0123456789 --wave 3');
  });

  it('refuses an unknown rotation, a wave that does not wait, and a choice it cannot make alone', async () => {
    const { run } = await withStore([request(2), request(3)]);
    expect(await run(['0123456789abcdef'])).toMatchObject({
      code: 1,
      err: expect.stringContaining('no wave of rotation 0123456789abcdef waits for approval'),
    });
    expect(await run([R, '--wave', '4'])).toMatchObject({
      code: 1,
      err: expect.stringContaining('wave 4 of rotation 3f9a1c2b7d4e5f60 does not wait for approval (waiting: 2, 3)'),
    });
    expect(await run([R])).toMatchObject({
      code: 1,
      err: expect.stringContaining('2 waves waiting (2, 3): give --wave N'),
    });
  });

  it('records who approved and when; the first approval stays', async () => {
    const { run, read } = await withStore([request(2)]);
    const approved = await run([R, '--by', 'alice@example.com']);
    expect(approved).toMatchObject({ code: 0, out: expect.stringContaining(`Approved wave 2 of 3 of rotation ${R}`) });
    expect(await read(2)).toMatchObject({ approvedBy: 'alice@example.com', approvedAt: expect.any(String) });
    const again = await run([R, '--wave', '2', '--by', 'bob']);
    expect(again).toMatchObject({
      code: 0,
      out: expect.stringContaining('already approved (wave 2 by alice@example.com'),
    });
    expect((await read(2))?.approvedBy).toBe('alice@example.com');
    expect((await run(['--list'])).out).toContain('No wave waits for approval');
  });
});
