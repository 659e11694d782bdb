/**
 * `serve` notifies the dead letters its queue makes itself: a message received maxReceiveCount times
 * without being worked, dead-lettered while no serve ran (the queue file of a serve that stopped), is notified once by
 * message id when serve starts on that file again — and not again by the sweeps that follow.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { serveCommand } from '../../../lib/cli/serve-command.ts';
import { SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { rolloutMessages } from '../../../lib/queue/rollout-message.ts';
import { memoryIo } from '../../helpers.ts';
import { BEARER_TOKEN } from '../../secrets.ts';

const dir = mkdtempSync(join(tmpdir(), 'vr-serve-dead-'));
const servers: Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('serve: dead letters of its own queue', () => {
  it('a message dead-lettered after its redrive limit gives one dead-letter notification, once by message id', async () => {
    const received: Array<{ kind: string; rotation: string; reason: string }> = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const event = JSON.parse(Buffer.concat(chunks).toString()) as {
          kind: string;
          rotation: string;
          reason: string;
        };
        received.push({ kind: event.kind, rotation: event.rotation, reason: event.reason });
        res.writeHead(200).end();
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const queueFile = join(dir, 'queue.sqlite');
    // A message that failed its 5 receives (the default redrive limit) while an earlier serve ran.
    const queue = new SqliteRolloutQueue({ file: queueFile });
    await queue.send(
      rolloutMessages(
        'alpha',
        [
          {
            namespace: '',
            mount: 'secret',
            key: 'app/db',
            path: 'secret/app/db',
            operation: 'write',
            version: 3,
            kvVersion: 2,
            kvVersionFrom: 'routes',
            source: 'audit',
            via: 'direct',
            id: 'id-3',
            time: '2026-11-20T10:00:00Z',
          },
        ],
        '2026-11-20T10:00:01Z',
      ),
    );
    for (let i = 0; i < 5; i++) {
      const [m] = await queue.receive({ max: 1 });
      await queue.release(m?.receiptHandle ?? '');
    }
    const [letter] = queue.deadLetters();
    expect(letter?.receiveCount).toBe(5);
    queue.close();

    const routes = `clusters:
  alpha: { kubeconfig: { env: KUBECONFIG_ALPHA } }
notifications:
  sinks:
    hook: { type: webhook, urlFromEnv: HOOK_URL, secretFromEnv: HOOK_KEY }
  events: [dead-letter]
routes:
  - name: app
    match: { path: "secret/app/db" }
    targets: [{ clusters: [alpha], namespace: app, kind: Deployment, name: api }]
`;
    const io = memoryIo(
      { 'routes.yaml': routes },
      {
        HOME: dir,
        VAULT_ROLLOUT_STATE_DB: join(dir, 'rotations.sqlite'),
        VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
        VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1',
        HOOK_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
        HOOK_KEY: 'serve-dead-letters-test-key',
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
      },
    );
    const stop = new AbortController();
    const running = serveCommand(
      ['--routes', 'routes.yaml', '--queue-file', queueFile, '--port', '0'],
      io,
      stop.signal,
    );
    try {
      for (let i = 0; i < 1000 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      // Past the next sweep (every 5 s): still one.
      await new Promise((r) => setTimeout(r, 6000));
    } finally {
      stop.abort();
    }
    expect(await running).toBe(0);
    expect(received).toEqual([
      {
        kind: 'dead-letter',
        rotation: letter?.messageId,
        reason: "group alpha: received 5 times without being worked (the queue's redrive limit)",
      },
    ]);
  });
});
