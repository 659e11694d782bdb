import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BatchSender } from '../../../lib/relay/batch-sender.ts';
import { startRelay } from '../../../lib/relay/relay.ts';
import { memoryLog } from '../../../lib/relay/relay-log.ts';
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
      return new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
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
    expect(() => parseListenAddress('udp://127.0.0.1:1')).toThrow(/tcp:\/\/HOST:PORT/);
    expect(() => parseListenAddress('tcp://127.0.0.1:70000')).toThrow();
  });
});

describe('audit socket listener', () => {
  it('over TCP, takes many lines fast while the receiver hangs: nothing blocks, everything goes to the spool, memory stays bounded', async () => {
    const sender = hungSender();
    const relay = await startRelay({ spoolDir: tmp.dir, auditListen: 'tcp://127.0.0.1:0', sender, log: memoryLog(), batch: { maxRecords: 500, maxBytes: 256 * 1024, maxDelayMs: 20 } });
    const count = 20_000;
    const lines = Array.from({ length: count }, (_, i) => auditLine(i));
    const heapBefore = process.memoryUsage().heapUsed;
    const started = Date.now();
    // Vault's side: the whole write completes and the connection closes without waiting for any delivery.
    await sendLines(relay.listenAddress as string, lines);
    expect(Date.now() - started).toBeLessThan(3000);
    await waitFor(() => relay.counters.received === count, 3000, 'all lines received');
    await waitFor(() => relay.counters.spooled === count, 3000, 'all lines spooled');
    const spooled = readdirSync(tmp.dir).filter((f) => f.endsWith('.ndjson')).sort();
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
    const first = new AuditSocketListener({ address: { type: 'unix', path }, onLine: (l) => lines.push(l), onDropped: (r) => dropped.push(r), log, maxLineBytes: 64 });
    expect(await first.start()).toBe(`unix://${path}`);
    await first.stop();
    // A crash leaves the socket file behind; the next start must not fail on it.
    const listener = new AuditSocketListener({ address: { type: 'unix', path }, onLine: (l) => lines.push(l), onDropped: (r) => dropped.push(r), log, maxLineBytes: 64 });
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
    expect(log.lines.some((l) => l.level === 'warn' && l.message.includes("must not be Vault's only audit device"))).toBe(true);
    await listener.stop();
  });

  it('refuses to replace a path that is not a socket', async () => {
    const path = join(tmp.dir, 'not-a-socket');
    writeFileSync(path, 'data');
    const listener = new AuditSocketListener({ address: { type: 'unix', path }, onLine: () => undefined, onDropped: () => undefined, log: memoryLog() });
    await expect(listener.start()).rejects.toThrow(/not a socket/);
    expect(existsSync(path)).toBe(true);
  });

  it('drops batches as overload when the disk falls behind by more than the memory bound', async () => {
    const relay = await startRelay({ spoolDir: tmp.dir, auditListen: 'tcp://127.0.0.1:0', sender: hungSender(), log: memoryLog(), spoolMaxPendingBytes: 1, batch: { maxRecords: 1, maxBytes: 1024, maxDelayMs: 10 } });
    await sendLines(relay.listenAddress as string, [auditLine(1)]);
    await waitFor(() => relay.counters.dropped('overload') === 1);
    await relay.stop(0);
  });
});
