/**
 * Bounded retries with full-jitter exponential backoff (kernel/backoff.ts), honouring Retry-After. Clock, sleep and
 * randomness are
 * injected so tests run instantly and deterministically.
 */
import { backoffDelayMs } from '../kernel/backoff.ts';
import { classifyKubeError, type KubeFailure } from '../workloads/kube-errors.ts';

export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Upper bound for a server's Retry-After. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 5,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 30_000,
};

export interface RetryEnv {
  sleep(ms: number): Promise<void>;
  random(): number;
  now(): number;
}

export const realRetryEnv: RetryEnv = {
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  random: Math.random,
  now: Date.now,
};

export function backoffDelay(attempt: number, failure: KubeFailure, policy: RetryPolicy, random: () => number): number {
  if (failure.retryAfterMs !== undefined) return Math.min(failure.retryAfterMs, policy.maxRetryAfterMs);
  return backoffDelayMs(attempt, policy.baseDelayMs, policy.maxDelayMs, random, 0);
}

export type Attempt<T> =
  { ok: true; value: T; attempts: number } | { ok: false; failure: KubeFailure; attempts: number };

/** Runs `fn` until it succeeds, fails for good, or attempt `policy.maxAttempts` has failed. */
export async function withRetries<T>(
  fn: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  env: RetryEnv,
  startAttempt = 1,
): Promise<Attempt<T>> {
  let attempt = startAttempt;
  for (;;) {
    try {
      return { ok: true, value: await fn(attempt), attempts: attempt };
    } catch (e) {
      const failure = classifyKubeError(e, env.now());
      if (!failure.retryable || attempt >= policy.maxAttempts) return { ok: false, failure, attempts: attempt };
      await env.sleep(backoffDelay(attempt, failure, policy, env.random));
      attempt++;
    }
  }
}
