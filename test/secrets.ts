/**
 * Every secret the test suites hand to vault-rollout, in one place: the hygiene check (test/global-setup-hygiene.ts)
 * looks for each of them, and for key and token material, in everything the suites printed.
 */
export const WEBHOOK_SECRET = 'vr-test-webhook-secret-7f3a9c1e5b2d4068';
export const BEARER_TOKEN = 'vr-test-bearer-token-4d8e2b6f0a1c3957';

/** serve's status page credential: read-only, never one of the intake's. */
export const STATUS_TOKEN = 'vr-test-status-token-9c2e7a41b5d80f36';

export const TEST_SECRETS: readonly string[] = [WEBHOOK_SECRET, BEARER_TOKEN, STATUS_TOKEN];
