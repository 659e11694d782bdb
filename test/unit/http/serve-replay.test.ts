/**
 * `serve`'s HMAC replay window lives in its queue file: a signed request accepted before serve is killed (SIGKILL)
 * and started again on the same file is refused as a replay after, within the signature's window. Before, the window
 * was in memory and a restart forgot it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../../lib/http/webhook-auth.ts';
import { repoRoot } from '../../helpers.ts';
import { WEBHOOK_SECRET } from '../../secrets.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-serve-replay-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A `serve` child on the queue file; resolves its port. */
async function startServe(queueFile: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    [
      join(repoRoot, 'lib/cli/main.ts'),
      'serve',
      '--port',
      '0',
      '--routes',
      join(repoRoot, 'infra/routes/example.yaml'),
      '--allow-example-routes',
      '--queue-file',
      queueFile,
    ],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH,
        VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let err = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
  return { child, port };
}

describe('serve: the replay window survives a restart', () => {
  it('refuses, after a kill -9 and a restart on the same queue file, a signature it accepted before', async () => {
    const queueFile = join(dir, 'queue.sqlite');
    // A read: authenticated and accepted (202), ignored by the intake, so nothing is queued for the worker.
    const body = `${JSON.stringify({ type: 'response', request: { id: 'r1', operation: 'read', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/payments/api/db' } })}\n`;
    const at = String(Math.floor(Date.now() / 1000));
    const headers = { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, at, body) };
    const post = (port: number) => fetch(`http://127.0.0.1:${port}/v1/vault/audit`, { method: 'POST', body, headers });

    const first = await startServe(queueFile);
    expect((await post(first.port)).status).toBe(202);
    const refusedAtOnce = await post(first.port);
    expect(refusedAtOnce.status).toBe(401);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    const second = await startServe(queueFile);
    const replay = await post(second.port);
    expect(replay.status).toBe(401);
    expect(await replay.json()).toEqual({ error: 'this signature was already used (replay)' });
  }, 60_000);
});
