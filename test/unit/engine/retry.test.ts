import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { classifyKubeError, parseRetryAfter } from '../../../lib/workloads/kube-errors.ts';
import { ConcurrencyLimiter } from '../../../lib/kernel/limiter.ts';
import { backoffDelay, DEFAULT_RETRY, withRetries, type RetryEnv } from '../../../lib/engine/retry.ts';

const api = (code: number, headers: Record<string, string> = {}, message = 'nope') =>
  new ApiException(code, 'Unsuccessful HTTP Request', { message }, headers);
const socket = (code: string) =>
  Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(code), { code }) });

describe('classifyKubeError', () => {
  it.each([
    [api(401), 'unauthorized', false],
    [api(403), 'forbidden', false],
    [api(404), 'not found', false],
    [api(409), 'conflict', false],
    [api(422), 'invalid', false],
    [api(429), 'throttled', true],
    [api(500), 'server error', true],
    [api(503), 'server error', true],
    [api(418), 'error', false],
    [socket('ECONNREFUSED'), 'unreachable', true],
    [socket('ECONNRESET'), 'unreachable', true],
    [socket('UND_ERR_CONNECT_TIMEOUT'), 'timeout', true],
    [Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }), 'timeout', true],
    [socket('SELF_SIGNED_CERT_IN_CHAIN'), 'tls', false],
    [socket('UNABLE_TO_VERIFY_LEAF_SIGNATURE'), 'tls', false],
    [socket('ERR_TLS_CERT_ALTNAME_INVALID'), 'tls', false],
    [new Error('something else'), 'error', false],
    ['a string', 'error', false],
  ])('%s -> %s', (error, reason, retryable) => {
    expect(classifyKubeError(error)).toMatchObject({ reason, retryable });
  });

  it('reads Retry-After in seconds or as a date', () => {
    expect(classifyKubeError(api(429, { 'retry-after': '3' })).retryAfterMs).toBe(3000);
    expect(parseRetryAfter('Fri, 20 Nov 2026 10:00:05 GMT', Date.parse('2026-11-20T10:00:00Z'))).toBe(5000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(undefined, 0)).toBeUndefined();
  });

  it('keeps the server message but nothing of the request', () => {
    expect(
      classifyKubeError(api(403, {}, 'deployments.apps "x" is forbidden: User "vault-rollout" cannot patch')).detail,
    ).toContain('forbidden');
  });
});

function fakeEnv(): RetryEnv & { slept: number[] } {
  const slept: number[] = [];
  return { slept, sleep: async (ms) => void slept.push(ms), random: () => 0.5, now: () => 0 };
}

describe('withRetries', () => {
  it('retries retryable failures with growing jittered backoff, then gives up', async () => {
    const env = fakeEnv();
    let calls = 0;
    const r = await withRetries(
      async () => {
        calls++;
        throw api(503);
      },
      DEFAULT_RETRY,
      env,
    );
    expect(r).toMatchObject({ ok: false, attempts: 5, failure: { reason: 'server error' } });
    expect(calls).toBe(5);
    expect(env.slept).toEqual([100, 200, 400, 800]);
  });

  it('honours Retry-After, bounded', async () => {
    const env = fakeEnv();
    let calls = 0;
    const r = await withRetries(
      async () => {
        if (++calls < 3) throw api(429, { 'retry-after': calls === 1 ? '2' : '600' });
        return 'ok';
      },
      DEFAULT_RETRY,
      env,
    );
    expect(r).toEqual({ ok: true, value: 'ok', attempts: 3 });
    expect(env.slept).toEqual([2000, 30000]);
  });

  it('does not retry what cannot succeed', async () => {
    const env = fakeEnv();
    const r = await withRetries(
      async () => {
        throw api(403);
      },
      DEFAULT_RETRY,
      env,
    );
    expect(r).toMatchObject({ ok: false, attempts: 1, failure: { reason: 'forbidden' } });
    expect(env.slept).toEqual([]);
  });

  it('caps the backoff', () => {
    expect(
      backoffDelay(30, { reason: 'timeout', retryable: true, detail: '' }, DEFAULT_RETRY, () => 0.999),
    ).toBeLessThan(DEFAULT_RETRY.maxDelayMs);
  });
});

describe('ConcurrencyLimiter', () => {
  it('never runs more than its limit at once, and runs everything in order', async () => {
    const limiter = new ConcurrencyLimiter(3);
    let active = 0;
    let peak = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        limiter.run(async () => {
          active++;
          peak = Math.max(peak, active);
          await new Promise((r) => setTimeout(r, (i * 7) % 5));
          order.push(i);
          active--;
        }),
      ),
    );
    expect(peak).toBe(3);
    expect(order).toHaveLength(20);
  });

  it('frees the slot when a task fails', async () => {
    const limiter = new ConcurrencyLimiter(1);
    await expect(
      limiter.run(async () => {
        throw new Error('x');
      }),
    ).rejects.toThrow('x');
    expect(await limiter.run(async () => 'next')).toBe('next');
  });
});
