/** The small pieces on their own: line splitting, batching, the spool's files, backoff, the sender's answers, logs. */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { abortableSleep, backoffDelayMs } from '../../../lib/kernel/backoff.ts';
import { Batcher } from '../../../lib/relay/batcher.ts';
import { RelayCounters } from '../../../lib/relay/counters.ts';
import { Deliverer } from '../../../lib/relay/delivery.ts';
import { HttpBatchSender, parseRetryAfter } from '../../../lib/relay/http-sender.ts';
import { LineSplitter } from '../../../lib/kernel/line-splitter.ts';
import { OffsetStore } from '../../../lib/relay/offset-store.ts';
import { jsonLinesLog, memoryLog } from '../../../lib/kernel/log.ts';
import { Spool, spoolFileName } from '../../../lib/relay/spool.ts';
import { SqsBatchSender } from '../../../lib/relay/sqs-sender.ts';
import { QueueUnavailableError } from '../../../lib/queue/rollout-message.ts';
import { loadRoutingTable } from '../../../lib/routing/routing-table.ts';
import { SECRET, startFunctionServer, temporaryDir, waitFor } from './helpers.ts';

let tmp: ReturnType<typeof temporaryDir>;
beforeEach(() => {
  tmp = temporaryDir();
});
afterEach(() => tmp.remove());

describe('LineSplitter', () => {
  it('splits across chunks, strips CR, skips blank lines, reports end positions, and bounds line length', () => {
    const lines: Array<[string, number]> = [];
    let overlong = 0;
    const splitter = new LineSplitter({
      maxLineBytes: 10,
      startPosition: 100,
      onLine: (l, end) => lines.push([l, end]),
      onOverlong: () => (overlong += 1),
    });
    splitter.push(Buffer.from('ab'));
    expect(splitter.pendingBytes).toBe(2);
    splitter.push(Buffer.from('c\r\n\n  \nde'));
    splitter.push(Buffer.from('f\n0123456789'));
    splitter.push(Buffer.from('X and more\nok\n'));
    expect(lines).toEqual([
      ['abc', 105],
      ['def', 113],
      ['ok', 137],
    ]);
    expect(overlong).toBe(1);
    // Multi-byte characters split across chunks come out whole.
    const euro = Buffer.from('€\n');
    const out: string[] = [];
    const s2 = new LineSplitter({ maxLineBytes: 10, onLine: (l) => out.push(l), onOverlong: () => undefined });
    s2.push(euro.subarray(0, 1));
    s2.push(euro.subarray(1));
    expect(out).toEqual(['€']);
  });

  it('gives the last line at the end of the stream even without its newline, unless it was too long', () => {
    const out: Array<[string, number]> = [];
    const splitter = new LineSplitter({
      maxLineBytes: 5,
      onLine: (l, end) => out.push([l, end]),
      onOverlong: () => undefined,
    });
    splitter.push(Buffer.from('one\ntwo'));
    splitter.end();
    splitter.push(Buffer.from('toolong'));
    splitter.end();
    expect(out).toEqual([
      ['one', 4],
      ['two', 7],
    ]);
  });
});

describe('Batcher', () => {
  it('keeps one batch per kind, sends an oversized line alone, and flushes on demand', () => {
    const batches: Array<[string, string[], number]> = [];
    const batcher = new Batcher({ maxBytes: 10, maxRecords: 3, maxDelayMs: 60_000 }, (kind, lines, acks) =>
      batches.push([kind, lines, acks.length]),
    );
    batcher.add('audit', 'a', () => undefined);
    batcher.add('events', 'e');
    batcher.add('audit', 'this is larger than ten bytes');
    batcher.add('audit', 'b');
    batcher.flush();
    expect(batches).toEqual([
      ['audit', ['a'], 1],
      ['audit', ['this is larger than ten bytes'], 0],
      ['events', ['e'], 0],
      ['audit', ['b'], 0],
    ]);
    batcher.flush();
    expect(batches).toHaveLength(4);
  });
});

describe('Spool', () => {
  it('finds the batches of a previous run in order, removes half-written ones and ignores foreign files', async () => {
    const dir = join(tmp.dir, 'spool');
    mkdirSync(dir);
    writeFileSync(join(dir, spoolFileName(10, 'events')), 'e\n');
    writeFileSync(join(dir, spoolFileName(2, 'audit')), 'a\n');
    writeFileSync(join(dir, `${spoolFileName(11, 'audit')}.tmp`), 'half');
    writeFileSync(join(dir, 'audit-file-offset.json'), '{}');
    const spool = await Spool.open(dir, { maxBytes: 1000, log: memoryLog() });
    expect(spool.entries().map((e) => [e.seq, e.kind])).toEqual([
      [2, 'audit'],
      [10, 'events'],
    ]);
    expect(spool.usedBytes).toBe(4);
    expect(readdirSync(dir).some((f) => f.endsWith('.tmp'))).toBe(false);
    expect(await spool.append('audit', ['x'])).toBe('spooled');
    expect(spool.entries().at(-1)?.seq).toBe(11);
    const first = spool.entries()[0];
    if (first) await spool.remove(first);
    await spool.remove(first as never); // removing twice is harmless
    expect(spool.entries()).toHaveLength(2);
  });

  it('reports a failed write (the directory is gone) as failed', async () => {
    const dir = join(tmp.dir, 'gone');
    const log = memoryLog();
    const spool = await Spool.open(dir, { maxBytes: 1000, log });
    tmp.remove();
    expect(await spool.append('audit', ['x'])).toBe('failed');
    expect(log.lines[0]?.message).toBe('cannot write to the spool');
  });
});

describe('Deliverer', () => {
  it('skips a spooled batch that cannot be read', async () => {
    const spool = await Spool.open(tmp.dir, { maxBytes: 1000, log: memoryLog() });
    await spool.append('audit', ['x']);
    await spool.append('audit', ['y']);
    const [first] = spool.entries();
    const { rmSync } = await import('node:fs');
    rmSync(first?.file as string);
    const counters = new RelayCounters();
    const log = memoryLog();
    const sent: string[] = [];
    const stop = new AbortController();
    const running = new Deliverer({
      spool,
      counters,
      log,
      sender: { target: 't', send: (_k, body) => (sent.push(body), Promise.resolve({ type: 'delivered' })) },
    }).run(stop.signal);
    await waitFor(() => sent.length === 1);
    stop.abort();
    await running;
    expect(sent).toEqual(['y\n']);
    expect(log.lines.some((l) => l.message.startsWith('cannot read a spooled batch'))).toBe(true);
  });
});

describe('OffsetStore', () => {
  it('ignores a missing or malformed file', async () => {
    const file = join(tmp.dir, 'offset.json');
    expect(await new OffsetStore(file).load()).toBeUndefined();
    writeFileSync(file, '{"path":1}');
    expect(await new OffsetStore(file).load()).toBeUndefined();
    const store = new OffsetStore(file);
    store.save({ path: '/p', inode: 1, offset: 2 });
    store.save({ path: '/p', inode: 1, offset: 3 });
    await store.flush();
    expect(await store.load()).toEqual({ path: '/p', inode: 1, offset: 3 });
    const broken = new OffsetStore(join(tmp.dir, 'missing-dir', 'offset.json'));
    broken.save({ path: '/p', inode: 1, offset: 2 });
    await broken.flush();
  });
});

describe('backoff', () => {
  it('grows exponentially with jitter up to the cap, and the sleep ends early on abort', async () => {
    expect(backoffDelayMs(1, 100, 1000, () => 0)).toBe(50);
    expect(backoffDelayMs(3, 100, 1000, () => 1)).toBe(400);
    expect(backoffDelayMs(10, 100, 1000, () => 1)).toBe(1000);
    const stop = new AbortController();
    const started = Date.now();
    const sleeping = abortableSleep(10_000, stop.signal);
    stop.abort();
    await sleeping;
    await abortableSleep(10_000, stop.signal);
    await abortableSleep(1);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe('HttpBatchSender', () => {
  it.each([
    ['http://127.0.0.1:8787', 'http://127.0.0.1:8787'],
    ['http://127.0.0.1:8787/', 'http://127.0.0.1:8787'],
    ['http://127.0.0.1:8787/v1/vault/audit', 'http://127.0.0.1:8787'],
    ['http://127.0.0.1:8787/v1/vault/events/', 'http://127.0.0.1:8787'],
    ['https://api.example.com/stage/v1/vault/audit', 'https://api.example.com/stage'],
    ['https://api.example.com/stage', 'https://api.example.com/stage'],
  ])('takes --to %s as the base %s', (to, base) => {
    expect(new HttpBatchSender({ baseUrl: to }).target).toBe(base);
  });

  it('posts to the intake route when --to is the full endpoint URL (not /v1/vault/audit/v1/vault/audit)', async () => {
    const fn = await startFunctionServer();
    try {
      const sender = new HttpBatchSender({ baseUrl: `${fn.url}/v1/vault/audit`, bearerToken: 'b' });
      const signal = new AbortController().signal;
      expect(await sender.send('audit', 'x\n', signal)).toMatchObject({ type: 'delivered' });
      expect(await sender.send('events', 'x\n', signal)).toMatchObject({ type: 'delivered' });
      expect(fn.requests.map((r) => r.path)).toEqual(['/v1/vault/audit', '/v1/vault/events']);
    } finally {
      await fn.close();
    }
  });

  it('reads Retry-After as seconds or a date', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(null, 0)).toBeUndefined();
  });

  it('maps answers: 404 and 403 retried loudly, other 4xx rejected, non-JSON errors tolerated; bearer only when no secret', async () => {
    const statuses = [404, 403, 418, 500];
    const fn = await startFunctionServer((_r, i) => ({ status: statuses[i] ?? 200 }));
    try {
      const sender = new HttpBatchSender({ baseUrl: fn.url, bearerToken: 'only-bearer' });
      const signal = new AbortController().signal;
      expect(await sender.send('events', 'x\n', signal)).toMatchObject({
        type: 'retry',
        loud: true,
        reason: expect.stringMatching(/^HTTP 404: ; check --to|^HTTP 404; check --to/),
      });
      expect(await sender.send('events', 'x\n', signal)).toMatchObject({ type: 'retry', loud: true });
      expect(await sender.send('events', 'x\n', signal)).toEqual({ type: 'rejected', error: 'HTTP 418' });
      expect(await sender.send('events', 'x\n', signal)).toEqual({ type: 'retry', reason: 'HTTP 500' });
      expect(await sender.send('events', 'x\n', signal)).toEqual({ type: 'delivered', summary: undefined });
      expect(fn.requests[0]?.headers[SECRET]).toBeUndefined();
      expect(fn.requests[0]?.headers['x-vault-rollout-signature']).toBeUndefined();
      expect(fn.requests[0]?.headers.authorization).toBe('Bearer only-bearer');
    } finally {
      await fn.close();
    }
  });
});

describe('SqsBatchSender', () => {
  const table = loadRoutingTable('clusters:\n  a:\n    kubeconfig: { inline: "x" }\nroutes: []\n', 'inline.yaml');
  it('retries when the queue is unavailable, loudly on anything unexpected', async () => {
    const down = new SqsBatchSender({
      table,
      queueUrl: 'q',
      queue: { send: () => Promise.reject(new QueueUnavailableError('throttled')) },
    });
    const line =
      '{"type":"response","request":{"id":"1","operation":"update","mount_type":"kv","path":"secret/data/a"},"response":{"data":{"version":1}}}\n';
    const broken = new SqsBatchSender({
      table: { ...table, routes: [] },
      queueUrl: 'q',
      queue: { send: () => Promise.reject(new TypeError('bug')) },
    });
    // No route matches: nothing to queue, so delivered.
    expect(await down.send('audit', line)).toMatchObject({ type: 'delivered' });
    const routed = loadRoutingTable(
      'clusters:\n  a:\n    kubeconfig: { inline: "x" }\nroutes:\n  - name: r\n    match: { path: "secret/**" }\n    targets:\n      - { clusters: [a], namespace: n, kind: Deployment, name: w }\n',
      'inline.yaml',
    );
    expect(
      await new SqsBatchSender({
        table: routed,
        queueUrl: 'q',
        queue: { send: () => Promise.reject(new QueueUnavailableError('throttled')) },
      }).send('audit', line),
    ).toEqual({ type: 'retry', reason: 'throttled' });
    expect(
      await new SqsBatchSender({
        table: routed,
        queueUrl: 'q',
        queue: { send: () => Promise.reject(new TypeError('bug')) },
      }).send('audit', line),
    ).toEqual({ type: 'retry', reason: 'unexpected: TypeError', loud: true });
    expect(broken.target).toBe('q');
  });

  it('keeps key baselines when given a store: the second write queues the keys it changed', async () => {
    const { MemoryKeyBaselineStore } = await import('../../../lib/rotations/key-baselines.ts');
    const routed = loadRoutingTable(
      'clusters:\n  a:\n    kubeconfig: { inline: "x" }\nvault: { mounts: { secret: 2 } }\nroutes:\n  - name: r\n    match: { path: "secret/**" }\n    targets:\n      - { clusters: [a], namespace: n, kind: Deployment, name: w, keys: [api_key] }\n',
      'inline.yaml',
    );
    const sent: unknown[] = [];
    const sender = new SqsBatchSender({
      table: routed,
      queueUrl: 'q',
      queue: { send: (m) => Promise.resolve(void sent.push(...m)) },
      baselines: new MemoryKeyBaselineStore(),
    });
    const hmac = (c: string) => `hmac-sha256:${c.repeat(64)}`;
    const write = (version: number, password: string) =>
      `${JSON.stringify({ time: '2026-11-27T10:00:00Z', type: 'response', request: { id: `r${version}`, operation: 'update', mount_type: 'kv', mount_point: 'secret/', path: 'secret/data/a', data: { data: { password: hmac(password), api_key: hmac('a') } } }, response: { data: { version, deletion_time: hmac('d') } } })}\n`;
    expect(await sender.send('audit', write(1, 'b'))).toMatchObject({ type: 'delivered' });
    expect(await sender.send('audit', write(2, 'c'))).toMatchObject({ type: 'delivered' });
    const changes = sent.flatMap((m) => (m as { changes: Array<{ version: number; changedKeys?: string[] }> }).changes);
    expect(changes.map((c) => [c.version, c.changedKeys])).toEqual([
      [1, undefined],
      [2, ['password']],
    ]);
  });
});

describe('logs and counters', () => {
  it('writes JSON lines and counts drops by reason', () => {
    const out: string[] = [];
    const log = jsonLinesLog(
      (t) => out.push(t),
      () => 0,
    );
    log.info('hello', { n: 1 });
    log.error('bad');
    expect(JSON.parse(out[0] as string)).toEqual({
      time: '1970-01-01T00:00:00.000Z',
      level: 'info',
      component: 'relay',
      message: 'hello',
      n: 1,
    });
    expect(JSON.parse(out[1] as string)).toMatchObject({ level: 'error' });
    const counters = new RelayCounters();
    counters.drop('spool-full', 2);
    counters.drop('spool-full');
    expect(counters.snapshot()).toEqual({ received: 0, spooled: 0, delivered: 0, dropped: { 'spool-full': 3 } });
  });
});
