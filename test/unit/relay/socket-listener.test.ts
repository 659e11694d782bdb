import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BatchSender } from '../../../lib/relay/batch-sender.ts';
import { startRelay } from '../../../lib/relay/relay.ts';
import { memoryLog } from '../../../lib/kernel/log.ts';
import { AuditSocketListener, parseListenAddress } from '../../../lib/relay/socket-listener.ts';
import { auditLine, sendLines, temporaryDir, waitFor } from './helpers.ts';

let tmp: ReturnType<typeof temporaryDir>;
beforeEach(() => {
  tmp = temporaryDir();
});
afterEach(() => tmp.remove());

/** A receiver that never answers until the relay gives up on it (a hung function). */
const hungSender = (): BatchSender & { calls: number } => {
  const sender = {
    target: 'hung',
    calls: 0,
    send: (_kind: string, _body: string, signal: AbortSignal) => {
      sender.calls += 1;
      return new Promise<never>((_resolve, reject) =>
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
      );
    },
  };
  return sender as BatchSender & { calls: number };
};

describe('parseListenAddress', () => {
  it('reads tcp and unix addresses and refuses the rest', () => {
    expect(parseListenAddress('tcp://127.0.0.1:9090')).toEqual({ type: 'tcp', host: '127.0.0.1', port: 9090 });
    expect(parseListenAddress('tcp://[::1]:0')).toEqual({ type: 'tcp', host: '::1', port: 0 });
    expect(parseListenAddress('unix:///run/audit.sock')).toEqual({ type: 'unix', path: '/run/audit.sock' });
    expect(() => parseListenAddress('unix://relative.sock')).toThrow(/absolute path/);
    expect(parseListenAddress('/run/vault-rollout/audit.sock')).toEqual({
      type: 'unix',
      path: '/run/vault-rollout/audit.sock',
    });
    expect(() => parseListenAddress('udp://127.0.0.1:1')).toThrow(
      /unix:\/\/\/PATH \(or an absolute path\), or tcp:\/\/HOST:PORT/,
    );
    expect(() => parseListenAddress('tcp://127.0.0.1:70000')).toThrow();
  });
});

describe('audit socket listener', () => {
  it('over TCP, takes many lines fast while the receiver hangs: nothing blocks, everything goes to the spool, memory stays bounded', async () => {
    const sender = hungSender();
    const relay = await startRelay({
      spoolDir: tmp.dir,
      auditListen: 'tcp://127.0.0.1:0',
      sender,
      log: memoryLog(),
      batch: { maxRecords: 500, maxBytes: 256 * 1024, maxDelayMs: 20 },
    });
    const count = 20_000;
    const lines = Array.from({ length: count }, (_, i) => auditLine(i));
    const heapBefore = process.memoryUsage().heapUsed;
    const started = Date.now();
    // Vault's side: the whole write completes and the connection closes without waiting for any delivery.
    await sendLines(relay.listenAddress as string, lines);
    expect(Date.now() - started).toBeLessThan(3000);
    await waitFor(() => relay.counters.received === count, 3000, 'all lines received');
    await waitFor(() => relay.counters.spooled === count, 3000, 'all lines spooled');
    const spooled = readdirSync(tmp.dir)
      .filter((f) => f.endsWith('.ndjson'))
      .sort();
    expect(spooled.length).toBeGreaterThanOrEqual(count / 500);
    expect(spooled.flatMap((f) => readFileSync(join(tmp.dir, f), 'utf8').split('\n').filter(Boolean))).toEqual(lines);
    expect(sender.calls).toBe(1); // the first batch, still in flight
    // ~3 MB went through; what stays in memory is bounded by a batch, not by what was received.
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(64 * 1024 * 1024);
    await relay.stop(0);
  });

  it('over a unix socket, replacing a stale socket file, and drops overlong and unfinished lines', async () => {
    const path = join(tmp.dir, 'audit.sock');
    const lines: string[] = [];
    const dropped: string[] = [];
    const log = memoryLog();
    const first = new AuditSocketListener({
      address: { type: 'unix', path },
      onLine: (l) => lines.push(l),
      onDropped: (r) => dropped.push(r),
      log,
      maxLineBytes: 64,
    });
    expect(await first.start()).toBe(`unix://${path}`);
    await first.stop();
    // A crash leaves the socket file behind; the next start must not fail on it.
    const listener = new AuditSocketListener({
      address: { type: 'unix', path },
      onLine: (l) => lines.push(l),
      onDropped: (r) => dropped.push(r),
      log,
      maxLineBytes: 64,
    });
    await listener.start();
    await sendLines(`unix://${path}`, ['vault-audit: {"a":1}', 'x'.repeat(100), '{"b":2}']);
    await waitFor(() => lines.length === 2);
    expect(lines).toEqual(['vault-audit: {"a":1}', '{"b":2}']);
    expect(dropped).toEqual(['line-too-long']);
    // An unfinished line when the connection closes is dropped and counted.
    const { connect } = await import('node:net');
    const socket = connect(path);
    await new Promise<void>((resolve) => socket.once('connect', () => socket.end('{"unfinished":', () => resolve())));
    await waitFor(() => dropped.length === 2);
    expect(dropped[1]).toBe('partial-line');
    expect(
      log.lines.some((l) => l.level === 'warn' && l.message.includes("must not be Vault's only audit device")),
    ).toBe(true);
    await listener.stop();
  });

  it('creates the unix socket owner-only (0600) whatever the umask, so no other local user can inject lines', async () => {
    chmodSync(tmp.dir, 0o755); // the directory does not protect it: the socket's own mode must
    const path = join(tmp.dir, 'audit.sock');
    const lines: string[] = [];
    const listener = new AuditSocketListener({
      address: { type: 'unix', path },
      onLine: (l) => lines.push(l),
      onDropped: () => undefined,
      log: memoryLog(),
    });
    const umask = process.umask(0); // a careless service manager: everything it creates would be world-writable
    try {
      await listener.start();
    } finally {
      process.umask(umask);
    }
    try {
      expect(statSync(path).mode & 0o777).toBe(0o600);
      // Another user (nobody) is refused by the kernel; this test runs as root, which may switch users.
      expect(process.getuid?.()).toBe(0);
      // Any Node that user can execute will do: this checkout's own may sit in a directory only root can enter
      // (a clone in a mktemp -d directory), so fall back to the system's.
      const script = `require('node:net').connect(${JSON.stringify(path)}).on('connect', () => process.exit(0)).on('error', (e) => { console.log(e.code); process.exit(3); }).end('{"forged":1}\\n')`;
      const other = [process.execPath, '/usr/bin/node', '/usr/local/bin/node']
        .map((node) => spawnSync(node, ['-e', script], { uid: 65534, gid: 65534, encoding: 'utf8' }))
        .find((r) => r.error === undefined) ?? { stdout: 'no Node executable by uid 65534', status: null };
      expect(other.stdout.trim()).toBe('EACCES');
      expect(other.status).toBe(3);
      // The owner still connects.
      await sendLines(`unix://${path}`, ['{"real":1}']);
      await waitFor(() => lines.length === 1);
      expect(lines).toEqual(['{"real":1}']);
    } finally {
      await listener.stop();
    }
  });

  it("admits the socket's group with mode 0660, and warns loudly when asked for TCP", async () => {
    const path = join(tmp.dir, 'group.sock');
    const listener = new AuditSocketListener({
      address: { type: 'unix', path },
      onLine: () => undefined,
      onDropped: () => undefined,
      log: memoryLog(),
      socketMode: 0o660,
    });
    await listener.start();
    expect(statSync(path).mode & 0o777).toBe(0o660);
    await listener.stop();
    const log = memoryLog();
    const tcp = new AuditSocketListener({
      address: { type: 'tcp', host: '127.0.0.1', port: 0 },
      onLine: () => undefined,
      onDropped: () => undefined,
      log,
    });
    await tcp.start();
    expect(
      log.lines.some(
        (l) =>
          l.level === 'warn' &&
          l.message.startsWith('the audit socket listens on TCP: any process that can reach this port'),
      ),
    ).toBe(true);
    await tcp.stop();
  });

  it('refuses to replace a path that is not a socket', async () => {
    const path = join(tmp.dir, 'not-a-socket');
    writeFileSync(path, 'data');
    const listener = new AuditSocketListener({
      address: { type: 'unix', path },
      onLine: () => undefined,
      onDropped: () => undefined,
      log: memoryLog(),
    });
    await expect(listener.start()).rejects.toThrow(/not a socket/);
    expect(existsSync(path)).toBe(true);
  });

  it('drops batches as overload when the disk falls behind by more than the memory bound', async () => {
    const relay = await startRelay({
      spoolDir: tmp.dir,
      auditListen: 'tcp://127.0.0.1:0',
      sender: hungSender(),
      log: memoryLog(),
      spoolMaxPendingBytes: 1,
      batch: { maxRecords: 1, maxBytes: 1024, maxDelayMs: 10 },
    });
    await sendLines(relay.listenAddress as string, [auditLine(1)]);
    await waitFor(() => relay.counters.dropped('overload') === 1);
    await relay.stop(0);
  });
});
