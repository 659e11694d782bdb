import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../../lib/http/app.ts';
import { DEFAULT_STUCK_AFTER_MS, serveNotReady, stuckAfterMsFromEnv } from '../../../lib/cli/serve-readiness.ts';
import { SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { repoRoot } from '../../helpers.ts';
import { BEARER_TOKEN } from '../../secrets.ts';

const queueFile = () => join(mkdtempSync(join(tmpdir(), 'vr-ready-')), 'queue.sqlite');

describe('serve readiness', () => {
  it('is ready with a writable queue and a worker that iterates', () => {
    const queue = new SqliteRolloutQueue({ file: queueFile() });
    expect(
      serveNotReady({
        queue,
        worker: { lastIterationAt: () => Date.now() },
        stuckAfterMs: 1000,
        stopping: () => false,
      }),
    ).toEqual([]);
    queue.close();
  });

  it('is not ready when the queue cannot be written, when the loops are stuck, and while stopping, with each reason', () => {
    const queue = new SqliteRolloutQueue({ file: queueFile() });
    queue.close();
    const now = 1_000_000;
    expect(
      serveNotReady({
        queue,
        worker: { lastIterationAt: () => now - 400_000 },
        stuckAfterMs: DEFAULT_STUCK_AFTER_MS,
        stopping: () => true,
        now: () => now,
      }),
    ).toEqual([
      'serve is stopping',
      'the queue cannot be written: the queue is closed',
      'the worker loops are stuck: no iteration for 400 s (bound 300 s)',
    ]);
    const failing = {
      probeWrite: () => {
        throw new Error('database or disk is full');
      },
    };
    expect(
      serveNotReady({
        queue: failing,
        worker: { lastIterationAt: () => now },
        stuckAfterMs: 1000,
        stopping: () => false,
        now: () => now,
      }),
    ).toEqual(['the queue cannot be written: database or disk is full']);
  });

  it('reads its bound from VAULT_ROLLOUT_READY_STUCK_SECONDS', () => {
    expect(stuckAfterMsFromEnv({})).toBe(DEFAULT_STUCK_AFTER_MS);
    expect(stuckAfterMsFromEnv({ VAULT_ROLLOUT_READY_STUCK_SECONDS: '60' })).toBe(60_000);
    expect(() => stuckAfterMsFromEnv({ VAULT_ROLLOUT_READY_STUCK_SECONDS: '0' })).toThrow(/from 1 to 86400/);
  });

  it('/readyz answers 503 with the reasons, /healthz stays 200 and never runs the check', async () => {
    const table = loadRoutingTable(readFileSync(join(repoRoot, 'infra/routes/example.yaml'), 'utf8'));
    let checks = 0;
    let reasons: string[] = [];
    const app = buildApp({
      table,
      queue: new SqliteRolloutQueue({ file: ':memory:' }),
      secrets: async () => ({ bearerToken: BEARER_TOKEN }),
      telemetry: { info() {}, warn() {}, error() {}, metric() {} } as never,
      notReady: () => (checks++, reasons),
    });
    expect((await app.request('/readyz')).status).toBe(200);
    reasons = ['the queue cannot be written: disk full'];
    const res = await app.request('/readyz');
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ok: false, reasons });
    const before = checks;
    expect((await app.request('/healthz')).status).toBe(200);
    expect(checks).toBe(before);
  });

  it('a running serve is ready', async () => {
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
        queueFile(),
      ],
      {
        cwd: repoRoot,
        env: {
          PATH: process.env.PATH,
          VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
          POWERTOOLS_LOG_LEVEL: 'SILENT',
          POWERTOOLS_METRICS_DISABLED: 'true',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let err = '';
        child.stderr?.on('data', (d: Buffer) => {
          err += d.toString();
          const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
          if (m) resolve(Number(m[1]));
        });
        child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
      });
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ ok: true });
    } finally {
      child.kill('SIGTERM');
    }
  }, 60_000);
});
