import { describe, expect, it } from 'vitest';
import { MemoryRolloutQueue, type ReceivedRolloutMessage } from '../../../lib/queue/memory-queue.ts';
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

describe('MemoryRolloutQueue', () => {
  it('delivers the messages of one group in order and groups side by side', async () => {
    const queue = new MemoryRolloutQueue();
    await queue.send([rolloutMessage('alpha', 'a1'), rolloutMessage('beta', 'b1'), rolloutMessage('alpha', 'a2'), rolloutMessage('alpha', 'a3')]);

    const received = await queue.receive();
    expect(names(received)).toEqual(['alpha/a1', 'alpha/a2', 'alpha/a3', 'beta/b1']);
    expect(received.map((r) => r.groupId)).toEqual(['alpha', 'alpha', 'alpha', 'beta']);
    expect(received.every((r) => r.receiveCount === 1)).toBe(true);
    expect(parseRolloutMessage(received[0]?.body ?? '')).toEqual(rolloutMessage('alpha', 'a1'));
  });

  it('blocks a group while one of its messages is in flight, but not the other groups', async () => {
    const queue = new MemoryRolloutQueue();
    await queue.send([rolloutMessage('alpha', 'a1'), rolloutMessage('alpha', 'a2'), rolloutMessage('beta', 'b1'), rolloutMessage('beta', 'b2')]);

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
    const queue = new MemoryRolloutQueue();
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
    const queue = new MemoryRolloutQueue({ visibilityTimeoutMs: 30_000, now: clock.now });
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
    const queue = new MemoryRolloutQueue({ now: clock.now });
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
    const queue = new MemoryRolloutQueue();
    await queue.send([rolloutMessage('alpha', 'a1', 1), rolloutMessage('alpha', 'a1', 2)]);
    expect(await queue.receive()).toHaveLength(2);
  });

  it('moves a message released maxReceiveCount times to the dead letters, unblocking its group', async () => {
    const clock = fakeClock();
    const queue = new MemoryRolloutQueue({ maxReceiveCount: 3, now: clock.now });
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

  it('dead-letters a message whose last visibility timeout expired', async () => {
    const clock = fakeClock();
    const queue = new MemoryRolloutQueue({ maxReceiveCount: 1, visibilityTimeoutMs: 1000, now: clock.now });
    await queue.send([rolloutMessage('alpha', 'a1')]);
    await queue.receive();
    clock.advance(1000);
    expect(queue.deadLetters()).toHaveLength(1);
    expect(queue.counts()).toEqual({ available: 0, inFlight: 0, deadLetters: 1 });
  });

  it('long-polls: a receive waiting for messages returns as soon as one is sent', async () => {
    const queue = new MemoryRolloutQueue();
    const started = performance.now();
    const waiting = queue.receive({ waitMs: 10_000 });
    setTimeout(() => void queue.send([rolloutMessage('alpha', 'a1')]), 20);
    expect(names(await waiting)).toEqual(['alpha/a1']);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('long-polls: an empty queue answers nothing after the wait', async () => {
    const queue = new MemoryRolloutQueue();
    expect(await queue.receive({ waitMs: 20 })).toEqual([]);
  });
});
