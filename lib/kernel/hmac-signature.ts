/**
 * The one HMAC signature of vault-rollout, inbound and outbound: `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw
 * body>")>` with the timestamp (unix seconds) in its own header. The webhook checks it on what it receives
 * (lib/http/webhook-auth.ts); notifications sign what they send with it (lib/notify), so a receiver checks both alike.
 */
import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-vault-rollout-signature';
export const TIMESTAMP_HEADER = 'x-vault-rollout-timestamp';

export function sign(secret: string, timestamp: string, body: Uint8Array | string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}
