/**
 * Delivery end to end: lines into the relay's socket source, batches out to a real local HTTP server that checks
 * the signature with the function's own authenticate(). Retries use a recorded, near-instant sleep.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HttpBatchSender } from '../../../lib/relay/http-sender.ts';
import { startRelay, type RelayOptions } from '../../../lib/relay/relay.ts';
import { memoryLog } from '../../../lib/kernel/log.ts';
import {
  auditLine,
  fastSleep,
  linesOf,
  SECRET,
  sendLines,
  startFunctionServer,
  temporaryDir,
  waitFor,
  type Reply,
} from './helpers.ts';

let tmp: ReturnType<typeof temporaryDir>;
const cleanups: Array<() => Promise<void> | void> = [];
beforeEach(() => {
  tmp = temporaryDir();
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  tmp.remove();
});

async function setup(
  reply?: (request: Parameters<NonNullable<Parameters<typeof startFunctionServer>[0]>>[0], index: number) => Reply,
  options: Partial<RelayOptions> = {},
  senderOptions: { bearerToken?: string } = {},
) {
  const server = await startFunctionServer(reply);
  cleanups.push(() => server.close());
  const log = memoryLog();
  const sleep = fastSleep();
  const relay = await startRelay({
    spoolDir: tmp.dir,
    auditListen: 'tcp://127.0.0.1:0',
    sender: new HttpBatchSender({ baseUrl: `${server.url}/`, hmacSecret: SECRET, ...senderOptions }),
    log,
    sleep: sleep.sleep,
    retryBaseMs: 1,
    batch: { maxRecords: 500, maxBytes: 1024 * 1024, maxDelayMs: 20 },
    ...options,
  });
  cleanups.push(() => relay.stop(0));
  return { server, relay, log, sleep, address: relay.listenAddress as string };
}

const lines = (n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => auditLine(from + i));

describe('relay delivery', () => {
  it('POSTs NDJSON batches to /v1/vault/audit, signed so that the function authenticates them (HMAC and bearer)', async () => {
    const { server, relay, address } = await setup(undefined, {}, { bearerToken: 'bearer-token' });
    await sendLines(address, lines(3));
    await waitFor(() => relay.counters.delivered === 3);
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request?.path).toBe('/v1/vault/audit');
    expect(request?.auth).toEqual({ ok: true, method: 'hmac' });
    expect(request?.headers.authorization).toBe('Bearer bearer-token');
    expect(request?.headers['content-type']).toBe('application/x-ndjson');
    expect(request?.body).toBe(`${lines(3).join('\n')}\n`);
    expect(relay.counters.snapshot()).toMatchObject({ received: 3, spooled: 3, delivered: 3, dropped: {} });
    // Delivered batches leave the spool.
    await waitFor(() => relay.spool.entries().length === 0);
  });

  it('closes batches at the record limit, at the byte limit, and after the delay', async () => {
    const { server, relay, address } = await setup(undefined, {
      batch: { maxRecords: 3, maxBytes: 1024 * 1024, maxDelayMs: 30 },
    });
    await sendLines(address, lines(7));
    await waitFor(() => relay.counters.delivered === 7);
    expect(server.requests.map((r) => r.body.split('\n').filter(Boolean).length)).toEqual([3, 3, 1]);

    const bySize = await setup(undefined, {
      spoolDir: `${tmp.dir}/by-size`,
      batch: { maxRecords: 500, maxBytes: 2 * (auditLine(10).length + 1), maxDelayMs: 30 },
    });
    await sendLines(bySize.address, lines(5, 10));
    await waitFor(() => bySize.relay.counters.delivered === 5);
    expect(bySize.server.requests.map((r) => r.body.split('\n').filter(Boolean).length)).toEqual([2, 2, 1]);
  });

  it('retries 503 and network errors with backoff, and honours Retry-After on 429', async () => {
    const replies: Reply[] = [
      { status: 503, body: { error: 'the queue is unavailable' } },
      'hang-up',
      { status: 429, headers: { 'retry-after': '2' } },
      { status: 202, body: { accepted: 2 } },
    ];
    const { server, relay, address, sleep, log } = await setup((_r, i) => replies[i] ?? { status: 202 });
    await sendLines(address, lines(2));
    await waitFor(() => relay.counters.delivered === 2);
    expect(server.requests).toHaveLength(4);
    expect(linesOf(server.requests.slice(3))).toEqual(lines(2));
    expect(server.requests.every((r) => r.auth.ok)).toBe(true); // a retry in the same second is signed anew
    expect(sleep.asked).toHaveLength(3);
    expect(sleep.asked[2]).toBe(2000);
    const retries = log.lines.filter((l) => l.message === 'delivery failed: retrying').map((l) => l.fields?.reason);
    expect(retries).toEqual(['HTTP 503: the queue is unavailable', expect.stringMatching(/^network: /), 'HTTP 429']);
  });

  it('splits a batch the function finds too large (413) and sends the halves in order', async () => {
    const { server, relay, address } = await setup((r) =>
      r.body.split('\n').filter(Boolean).length > 2 ? { status: 413, body: { error: 'too large' } } : { status: 202 },
    );
    await sendLines(address, lines(7));
    await waitFor(() => relay.counters.delivered === 7);
    const accepted = server.requests.filter((r) => r.body.split('\n').filter(Boolean).length <= 2);
    expect(linesOf(accepted)).toEqual(lines(7));
  });

  it('drops a single record that is still too large, with reason too-large', async () => {
    const { relay, address } = await setup(() => ({ status: 413 }));
    await sendLines(address, lines(1));
    await waitFor(() => relay.counters.dropped('too-large') === 1);
    expect(relay.counters.delivered).toBe(0);
  });

  it("drops a batch the function rejects (400) with reason rejected, logging the function's error, and goes on", async () => {
    const { server, relay, address, log } = await setup((_r, i) =>
      i === 0 ? { status: 400, body: { error: 'the body is not UTF-8 text' } } : { status: 202 },
    );
    await sendLines(address, lines(2));
    await waitFor(() => relay.counters.dropped('rejected') === 2);
    await sendLines(address, lines(1, 2));
    await waitFor(() => relay.counters.delivered === 1);
    expect(linesOf(server.requests.slice(1))).toEqual(lines(1, 2));
    expect(log.lines.find((l) => l.message.startsWith('the receiver rejected'))?.fields).toMatchObject({
      reason: 'rejected',
      error: 'HTTP 400: the body is not UTF-8 text',
      records: 2,
    });
  });

  it('keeps retrying on 401 (a configuration error), logging loudly, and drops nothing', async () => {
    const { relay, address, log } = await setup((_r, i) =>
      i < 3 ? { status: 401, body: { error: 'the signature does not match the body' } } : { status: 202 },
    );
    await sendLines(address, lines(1));
    await waitFor(() => relay.counters.delivered === 1);
    expect(log.lines.filter((l) => l.level === 'error' && l.message.startsWith('DELIVERY BLOCKED'))).toHaveLength(3);
    expect(relay.counters.snapshot().dropped).toEqual({});
  });

  it('preserves order across many batches and intermittent failures', async () => {
    const { server, relay, address } = await setup((_r, i) => (i % 3 === 1 ? { status: 503 } : { status: 202 }), {
      batch: { maxRecords: 7, maxBytes: 1024 * 1024, maxDelayMs: 10 },
    });
    await sendLines(address, lines(60));
    await waitFor(() => relay.counters.delivered === 60);
    const accepted = server.requests.filter((_r, i) => i % 3 !== 1);
    expect(linesOf(accepted)).toEqual(lines(60));
  });

  it('replays the spool after a restart, in order, before new lines', async () => {
    const down = await setup(() => ({ status: 503 }));
    await sendLines(down.address, lines(3));
    await waitFor(() => down.relay.counters.spooled === 3);
    await sendLines(down.address, lines(2, 3));
    await waitFor(() => down.relay.counters.spooled === 5);
    await down.relay.stop(0);
    expect(readdirSync(tmp.dir).filter((f) => f.endsWith('.ndjson'))).toHaveLength(2);

    const up = await setup();
    await sendLines(up.address, lines(1, 5));
    await waitFor(() => up.relay.counters.delivered === 6 && up.relay.spool.entries().length === 0);
    expect(linesOf(up.server.requests)).toEqual(lines(6));
    expect(up.log.lines.some((l) => l.message.startsWith('replaying the spool'))).toBe(true);
  });

  it('drops new lines with reason spool-full when the spool is full, and says so', async () => {
    const one = auditLine(0).length + 1;
    const { relay, address, log } = await setup(() => ({ status: 503 }), {
      spoolMaxBytes: 3 * one + 10,
      batch: { maxRecords: 1, maxBytes: 1024 * 1024, maxDelayMs: 10 },
    });
    await sendLines(address, lines(5));
    await waitFor(() => relay.counters.spooled + relay.counters.dropped('spool-full') === 5);
    expect(relay.counters.spooled).toBe(3);
    expect(relay.counters.dropped('spool-full')).toBe(2);
    expect(log.lines.filter((l) => l.message.startsWith('THE SPOOL IS FULL'))).toHaveLength(1);
  });

  it('on stop, flushes the open batch into the spool, tries to deliver for the grace period, and keeps the rest', async () => {
    const { relay, address } = await setup(() => ({ status: 503 }), {
      batch: { maxRecords: 500, maxBytes: 1024 * 1024, maxDelayMs: 60_000 },
    });
    await sendLines(address, lines(4));
    await waitFor(() => relay.counters.received === 4);
    expect(relay.counters.spooled).toBe(0); // still in the open batch
    const started = Date.now();
    await relay.stop(100);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(relay.counters.spooled).toBe(4);
    const files = readdirSync(tmp.dir).filter((f) => f.endsWith('.ndjson'));
    expect(files).toEqual(['0000000000000001.audit.ndjson']);
    expect(readFileSync(`${tmp.dir}/${files[0]}`, 'utf8')).toBe(`${lines(4).join('\n')}\n`);
  });
});
