/**
 * vault-rollout's HMAC signatures: `sha256=<hex HMAC-SHA256(secret, message)>` with the timestamp (unix seconds) in
 * its own header. The webhook checks `sign` on what it receives (lib/http/webhook-auth.ts): the message is
 * "<timestamp>.<raw body>". Notifications sign what they send with `signNotification` (lib/notify): the message
 * starts with NOTIFICATION_CONTEXT, so a notification's signature is never one the intake accepts (or the other way
 * round), even should the two keys be the same: a receiver cannot replay a notification as a change.
 */
import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'x-vault-rollout-signature';
export const TIMESTAMP_HEADER = 'x-vault-rollout-timestamp';

export function sign(secret: string, timestamp: string, body: Uint8Array | string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

/** What a notification's signed message starts with: no intake message can (it starts with digits). */
export const NOTIFICATION_CONTEXT = 'vault-rollout.notification.v1';

export function signNotification(secret: string, timestamp: string, body: Uint8Array | string): string {
  const hmac = createHmac('sha256', secret).update(`${NOTIFICATION_CONTEXT}:${timestamp}.`).update(body);
  return `sha256=${hmac.digest('hex')}`;
}
