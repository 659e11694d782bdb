/**
 * serve's secrets at start-up: each at least 32 characters, and the status page's read-only credential its own —
 * never one of the intake's, and required with --status-page (unless the whole listener runs --insecure-no-auth).
 */
import { describe, expect, it } from 'vitest';
import { localSecrets, statusAccess } from '../../../lib/cli/serve-command.ts';
import { BEARER_TOKEN, STATUS_TOKEN, WEBHOOK_SECRET } from '../../secrets.ts';

describe("serve's intake secrets", () => {
  it.each([
    ['VAULT_ROLLOUT_WEBHOOK_TOKEN', { VAULT_ROLLOUT_WEBHOOK_TOKEN: 'x'.repeat(31) }],
    ['VAULT_ROLLOUT_WEBHOOK_SECRET', { VAULT_ROLLOUT_WEBHOOK_SECRET: 'k9-hmac-q7' }],
    [
      'VAULT_ROLLOUT_STATUS_TOKEN',
      { VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN, VAULT_ROLLOUT_STATUS_TOKEN: 'guessable' },
    ],
  ])('refuse %s shorter than 32 characters, naming it and never its value', (name, env) => {
    const secrets = localSecrets(env, false);
    expect(secrets).toEqual({
      error: expect.stringMatching(new RegExp(`^${name} is \\d+ characters, fewer than 32`)) as unknown,
    });
    for (const value of Object.values(env)) expect(JSON.stringify(secrets)).not.toContain(value);
  });

  it('take 32 characters and more', () => {
    expect(
      localSecrets(
        { VAULT_ROLLOUT_WEBHOOK_TOKEN: 'x'.repeat(32), VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET },
        false,
      ),
    ).toEqual({ bearerToken: 'x'.repeat(32), hmacSecret: WEBHOOK_SECRET });
  });
});

describe("the status page's credential", () => {
  it('is required with --status-page', () => {
    expect(statusAccess({}, { bearerToken: BEARER_TOKEN }, false)).toEqual({
      error: expect.stringContaining("set VAULT_ROLLOUT_STATUS_TOKEN, the page's own read-only credential") as unknown,
    });
  });

  it.each([
    ['bearer token', BEARER_TOKEN],
    ['HMAC key', WEBHOOK_SECRET],
  ])("is refused when it is the intake's %s", (_name, value) => {
    expect(
      localSecrets(
        {
          VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
          VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET,
          VAULT_ROLLOUT_STATUS_TOKEN: value,
        },
        false,
      ),
    ).toEqual({ error: expect.stringContaining("VAULT_ROLLOUT_STATUS_TOKEN is the intake's secret") as unknown });
  });

  it('is taken, with the proxy flag, or left out under --insecure-no-auth', () => {
    expect(statusAccess({ VAULT_ROLLOUT_STATUS_TOKEN: STATUS_TOKEN }, { bearerToken: BEARER_TOKEN }, true)).toEqual({
      token: STATUS_TOKEN,
      behindTlsProxy: true,
    });
    expect(statusAccess({}, { insecureNoAuth: true }, false)).toEqual({ insecureNoAuth: true, behindTlsProxy: false });
  });
});
