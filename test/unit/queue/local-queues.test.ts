/**
 * One table of queue semantics, run against SqliteRolloutQueue on a file (what `serve` uses) and in memory (what
 * `reconcile` and the tests use). Then what only the file can do: survive the process.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { LocalQueueOptions, LocalRolloutQueue, ReceivedRolloutMessage } from '../../../lib/queue/local-queue.ts';
import { defaultQueueFile, memoryRolloutQueue, SqliteRolloutQueue } from '../../../lib/queue/sqlite-queue.ts';
import { parseRolloutMessage, type RolloutMessage } from '../../../lib/queue/rollout-message.ts';
import { messageName, rolloutMessage } from '../../sqs/fixtures.ts';

function fakeClock(start = Date.parse('2026-11-20T10:00:00Z')): { now: () => number; advance(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

const names = (received: readonly ReceivedRolloutMessage[]): string[] =>
  received.map((r) => {
    const message = parseRolloutMessage(r.body) as RolloutMessage;
    return messageName(message);
  });

const dir = mkdtempSync(join(tmpdir(), 'vr-queue-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const sqliteFile = (): string => join(dir, `q${++files}`, 'queue.sqlite');

const QUEUES: Array<[string, (options?: LocalQueueOptions) => LocalRolloutQueue]> = [
  ['SqliteRolloutQueue', (options = {}) => new SqliteRolloutQueue({ ...options, file: sqliteFile() })],
  ['SqliteRolloutQueue in memory', (options = {}) => memoryRolloutQueue(options)],
];

describe.each(QUEUES)('%s', (_name, makeQueue) => {
  it('delivers the messages of one group in order and groups side by side', async () => {
    const queue = makeQueue();
    await queue.send([
      rolloutMessage('alpha', 'a1'),
      rolloutMessage('beta', 'b1'),
      rolloutMessage('alpha', 'a2'),
      rolloutMessage('alpha', 'a3'),
    ]);

    const received = await queue.receive();
    expect(names(received)).toEqual(['alpha/a1', 'alpha/a2', 'alpha/a3', 'beta/b1']);
    expect(received.map((r) => r.groupId)).toEqual(['alpha', 'alpha', 'alpha', 'beta']);
    expect(received.every((r) => r.receiveCount === 1)).toBe(true);
    expect(parseRolloutMessage(received[0]?.body ?? '')).toEqual(rolloutMessage('alpha', 'a1'));
  });

  it('blocks a group while one of its messages is in flight, but not the other groups', async () => {
    const queue = makeQueue();
    await queue.send([
      rolloutMessage('alpha', 'a1'),
      rolloutMessage('alpha', 'a2'),
      rolloutMessage('beta', 'b1'),
      rolloutMessage('beta', 'b2'),
    ]);

    const first = await queue.receive({ max: 1 });
    expect(names(first)).toEqual(['alpha/a1']);
    // alpha is blocked by a1; beta proceeds.
    const second = await queue.receive({ max: 1 });
    expect(names(second)).toEqual(['beta/b1']);
    expect(await queue.receive()).toEqual([]);
    expect(queue.counts()).toEqual({ available: 2, inFlight: 2, deadLetters: 0 });

    expect(await queue.delete(first[0]?.receiptHandle ?? '')).toBe(true);
    expect(names(await queue.receive())).toEqual(['alpha/a2']);
    expect(await queue.delete(second[0]?.receiptHandle ?? '')).toBe(true);
    expect(names(await queue.receive())).toEqual(['beta/b2']);
  });

  it('redelivers a released message first in its group, with a new receipt handle', async () => {
    const queue = makeQueue();
    await queue.send([rolloutMessage('alpha', 'a1'), rolloutMessage('alpha', 'a2')]);
    const [first] = await queue.receive({ max: 1 });
    expect(await queue.release(first?.receiptHandle ?? '')).toBe(true);

    const [again] = await queue.receive({ max: 1 });
    expect(names(again ? [again] : [])).toEqual(['alpha/a1']);
    expect(again?.messageId).toBe(first?.messageId);
    expect(again?.receiptHandle).not.toBe(first?.receiptHandle);
    expect(again?.receiveCount).toBe(2);
    // The first handle is stale now.
    expect(await queue.delete(first?.receiptHandle ?? '')).toBe(false);
    expect(await queue.release('no-such-handle')).toBe(false);
  });

  it('makes an unacknowledged message visible again after the visibility timeout', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ visibilityTimeoutMs: 30_000, now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1')]);
    const [first] = await queue.receive();
    clock.advance(29_999);
    expect(await queue.receive()).toEqual([]);
    clock.advance(1);
    const [again] = await queue.receive();
    expect(again?.messageId).toBe(first?.messageId);
    expect(await queue.delete(first?.receiptHandle ?? '')).toBe(false);
    expect(await queue.delete(again?.receiptHandle ?? '')).toBe(true);
    expect(queue.counts()).toEqual({ available: 0, inFlight: 0, deadLetters: 0 });
  });

  it('queues a re-sent payload once within the deduplication window, and again after it', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1')]);
    await queue.send([rolloutMessage('alpha', 'a1')]);
    const received = await queue.receive();
    expect(received).toHaveLength(1);
    await queue.delete(received[0]?.receiptHandle ?? '');

    // Still deduplicated after the first copy was worked and deleted, as on SQS.
    clock.advance(5 * 60_000 - 1);
    await queue.send([rolloutMessage('alpha', 'a1')]);
    expect(await queue.receive()).toEqual([]);

    clock.advance(1);
    await queue.send([rolloutMessage('alpha', 'a1')]);
    expect(names(await queue.receive())).toEqual(['alpha/a1']);
  });

  it('does not deduplicate a new secret version of the same workload', async () => {
    const queue = makeQueue();
    await queue.send([rolloutMessage('alpha', 'a1', 1), rolloutMessage('alpha', 'a1', 2)]);
    expect(await queue.receive()).toHaveLength(2);
  });

  it('moves a message released maxReceiveCount times to the dead letters, unblocking its group', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ maxReceiveCount: 3, now: clock.now });
    await queue.send([rolloutMessage('alpha', 'poison'), rolloutMessage('alpha', 'a2')]);

    for (let receive = 1; receive <= 3; receive++) {
      const [message] = await queue.receive({ max: 1 });
      expect(names(message ? [message] : [])).toEqual(['alpha/poison']);
      expect(message?.receiveCount).toBe(receive);
      await queue.release(message?.receiptHandle ?? '');
    }

    const deadLetters = queue.deadLetters();
    expect(deadLetters).toHaveLength(1);
    expect(deadLetters[0]).toMatchObject({ groupId: 'alpha', receiveCount: 3, deadLetteredAt: clock.now() });
    expect(parseRolloutMessage(deadLetters[0]?.body ?? '')).toEqual(rolloutMessage('alpha', 'poison'));
    expect(names(await queue.receive())).toEqual(['alpha/a2']);
  });

  it('keeps a message in flight while its visibility is extended (the heartbeat), under the same handle; a stale handle cannot extend', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ visibilityTimeoutMs: 30_000, maxReceiveCount: 1, now: clock.now });
    expect(queue.visibilityTimeoutMs).toBe(30_000);
    await queue.send([rolloutMessage('alpha', 'a1')]);
    const [first] = await queue.receive();
    // Ten visibility timeouts of work, extended every third of one: never visible, never dead-lettered.
    for (let i = 0; i < 30; i++) {
      clock.advance(10_000);
      expect(await queue.extendVisibility(first?.receiptHandle ?? '', 30_000)).toBe(true);
    }
    expect(queue.counts()).toEqual({ available: 0, inFlight: 1, deadLetters: 0 });
    expect(await queue.delete(first?.receiptHandle ?? '')).toBe(true);

    await queue.send([rolloutMessage('alpha', 'a2')]);
    const [second] = await queue.receive();
    clock.advance(30_000);
    // Too late: the queue has taken it back (here: to the dead letters, its one receive spent).
    expect(await queue.extendVisibility(second?.receiptHandle ?? '', 30_000)).toBe(false);
    expect(await queue.extendVisibility('no-such-handle', 30_000)).toBe(false);
    expect(queue.counts()).toEqual({ available: 0, inFlight: 0, deadLetters: 1 });
  });

  it('dead-letters a message whose last visibility timeout expired', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ maxReceiveCount: 1, visibilityTimeoutMs: 1000, now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1')]);
    await queue.receive();
    clock.advance(1000);
    expect(queue.deadLetters()).toHaveLength(1);
    expect(queue.counts()).toEqual({ available: 0, inFlight: 0, deadLetters: 1 });
  });

  it('releases with a backoff: the message and its group wait until the delay has passed', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1'), rolloutMessage('alpha', 'a2'), rolloutMessage('beta', 'b1')]);
    const [a1] = await queue.receive({ max: 1 });
    expect(await queue.release(a1?.receiptHandle ?? '', 2000)).toBe(true);
    expect(names(await queue.receive())).toEqual(['beta/b1']);
    clock.advance(1999);
    expect(await queue.receive()).toEqual([]);
    clock.advance(1);
    const again = await queue.receive({ max: 1 });
    expect(names(again)).toEqual(['alpha/a1']);
    expect(again[0]?.receiveCount).toBe(2);
  });

  it('defers a received message (a gate waiting in the queue): redelivered after the delay, its group held meanwhile', async () => {
    const clock = fakeClock();
    const queue = makeQueue({ now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1'), rolloutMessage('alpha', 'a2')]);
    const [a1] = await queue.receive({ max: 1 });
    expect(await queue.defer(a1?.receiptHandle ?? '', 0)).toBe(true);
    expect(await queue.receive()).toEqual([]);
    clock.advance(60_000);
    expect(names(await queue.receive({ max: 1 }))).toEqual(['alpha/a1']);
    expect(await queue.defer('no-such-handle', 10)).toBe(false);
  });

  it('long-polls: a receive waiting for messages returns as soon as one is sent', async () => {
    const queue = makeQueue();
    const started = performance.now();
    const waiting = queue.receive({ waitMs: 10_000 });
    setTimeout(() => void queue.send([rolloutMessage('alpha', 'a1')]), 20);
    expect(names(await waiting)).toEqual(['alpha/a1']);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('long-polls: an empty queue answers nothing after the wait', async () => {
    const queue = makeQueue();
    expect(await queue.receive({ waitMs: 20 })).toEqual([]);
  });
});

describe('SqliteRolloutQueue on disk', () => {
  it('keeps accepted messages, dead letters and the deduplication window across a close and reopen', async () => {
    const clock = fakeClock();
    const file = sqliteFile();
    const first = new SqliteRolloutQueue({ file, now: clock.now, maxReceiveCount: 1 });
    await first.send([rolloutMessage('alpha', 'poison'), rolloutMessage('alpha', 'a2'), rolloutMessage('beta', 'b1')]);
    const [poison] = await first.receive({ max: 1 });
    await first.release(poison?.receiptHandle ?? '');
    first.close();

    const second = new SqliteRolloutQueue({ file, now: clock.now, maxReceiveCount: 1 });
    expect(second.deadLetters().map((d) => d.groupId)).toEqual(['alpha']);
    await second.send([rolloutMessage('alpha', 'a2')]);
    expect(names(await second.receive())).toEqual(['alpha/a2', 'beta/b1']);
    second.close();
  });

  it('redelivers at once, on reopen, what was in flight when its process stopped (no visibility timeout to wait out)', async () => {
    const file = sqliteFile();
    const first = new SqliteRolloutQueue({ file, visibilityTimeoutMs: 3_600_000 });
    await first.send([rolloutMessage('alpha', 'a1')]);
    const [taken] = await first.receive();
    first.close();

    const second = new SqliteRolloutQueue({ file, visibilityTimeoutMs: 3_600_000 });
    const [again] = await second.receive();
    expect(again?.messageId).toBe(taken?.messageId);
    expect(again?.receiveCount).toBe(2);
    second.close();
  });

  it("remembers seen keys (serve's replay window) until their time, across a reopen", () => {
    const file = sqliteFile();
    const first = new SqliteRolloutQueue({ file });
    expect(first.firstSeen('sig-1', 1000, 1600)).toBe(true);
    expect(first.firstSeen('sig-1', 1001, 1601)).toBe(false);
    expect(first.firstSeen('sig-2', 1001, 1601)).toBe(true);
    first.close();

    const second = new SqliteRolloutQueue({ file });
    expect(second.firstSeen('sig-1', 1600, 2200)).toBe(false);
    // Past its time the key is forgotten (the HMAC timestamp window refuses such a request anyway).
    expect(second.firstSeen('sig-1', 1601, 2201)).toBe(true);
    second.close();
  });

  it('belongs to one process: a second open of the same file is refused, naming why', async () => {
    const file = sqliteFile();
    const owner = new SqliteRolloutQueue({ file });
    await owner.send([rolloutMessage('alpha', 'a1')]);
    expect(() => new SqliteRolloutQueue({ file })).toThrow(/in use by another process/);
    owner.close();
    new SqliteRolloutQueue({ file }).close();
  });

  it('creates the file readable by its owner only', () => {
    const file = sqliteFile();
    new SqliteRolloutQueue({ file }).close();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(file, '..')).mode & 0o777).toBe(0o700);
  });

  it('refuses every operation once closed, as an unavailable queue (serve answers 503)', async () => {
    const queue = new SqliteRolloutQueue({ file: sqliteFile() });
    queue.close();
    await expect(queue.send([rolloutMessage('alpha', 'a1')])).rejects.toThrow(/closed/);
  });

  it('lives under the per-user state directory unless told otherwise', () => {
    expect(defaultQueueFile({}, '/home/u')).toBe('/home/u/.local/state/vault-rollout/serve-queue.sqlite');
    expect(defaultQueueFile({ XDG_STATE_HOME: '/s' }, '/home/u')).toBe('/s/vault-rollout/serve-queue.sqlite');
    expect(defaultQueueFile({ VAULT_ROLLOUT_QUEUE_FILE: '/q.sqlite' }, '/home/u')).toBe('/q.sqlite');
  });
});
