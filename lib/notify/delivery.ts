/**
 * Delivering the outbox (issue #26), out of line: a pass takes the deliveries that are due, sends each to its sink
 * (concurrently, each bounded by the sink's timeout), and marks it sent, due again after a backoff, or dropped after
 * MAX_ATTEMPTS. Nothing here runs inside a rotation's step: the worker only writes the outbox, so a sink that fails or
 * hangs delays no restart. Every outcome is counted (`Notifications` by outcome) and a failure is logged with the
 * sink's name and the error's kind — never its URL or secret.
 */
import { backoffDelayMs } from '../kernel/backoff.ts';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import type { NotificationOutbox } from '../rotations/notification-outbox.ts';
import { parseEvent } from './event.ts';
import { SinkError, type Sink } from './sinks.ts';

/** Attempts per delivery, and the backoff between them: 2 s, 4 s, 8 s … at most 5 min (equal jitter). */
export const MAX_ATTEMPTS = 6;
export const RETRY_BASE_MS = 2000;
export const RETRY_CAP_MS = 300_000;
/** How long a taken delivery is leased: past the sink's timeout, so a pass never races itself; a restart retakes it after. */
export const LEASE_MS = 30_000;
export const BATCH = 20;

export interface DeliveryDeps {
  outbox: NotificationOutbox;
  sinks: ReadonlyMap<string, Sink>;
  telemetry: Telemetry;
  now?: () => number;
  random?: () => number;
  maxAttempts?: number;
}

/** One pass over what is due: how many were sent, retried, dropped. */
export async function deliverDue(deps: DeliveryDeps): Promise<{ sent: number; retry: number; dropped: number }> {
  const now = deps.now ?? Date.now;
  const max = deps.maxAttempts ?? MAX_ATTEMPTS;
  const counts = { sent: 0, retry: 0, dropped: 0 };
  const due = await deps.outbox.takeDue(now(), BATCH, LEASE_MS);
  await Promise.all(
    due.map(async (d) => {
      const event = parseEvent(d.body);
      const sink = deps.sinks.get(d.sink);
      const count = (outcome: keyof typeof counts) => {
        counts[outcome] += 1;
        deps.telemetry.metric(METRICS.notifications, 1, 'Count', { outcome });
      };
      if (!event || !sink) {
        await deps.outbox.failed(d.eventId, d.sink, d.attempts, undefined);
        deps.telemetry.error('notification dropped: ' + (event ? 'its sink is not configured (or its variables are missing)' : 'unreadable outbox row'), { eventId: d.eventId, sink: d.sink });
        count('dropped');
        return;
      }
      const attempts = d.attempts + 1;
      try {
        await sink.send(event);
      } catch (e) {
        const why = e instanceof SinkError ? e.message : e instanceof Error ? e.name : 'error';
        if (attempts >= max) {
          await deps.outbox.failed(d.eventId, d.sink, attempts, undefined);
          deps.telemetry.error('notification dropped after its last attempt', { eventId: d.eventId, kind: event.kind, sink: d.sink, attempts, why });
          count('dropped');
        } else {
          const delayMs = backoffDelayMs(attempts, RETRY_BASE_MS, RETRY_CAP_MS, deps.random);
          await deps.outbox.failed(d.eventId, d.sink, attempts, now() + delayMs);
          deps.telemetry.warn('notification not delivered; trying again later', { eventId: d.eventId, kind: event.kind, sink: d.sink, attempts, delayMs, why });
          count('retry');
        }
        return;
      }
      await deps.outbox.sent(d.eventId, d.sink);
      deps.telemetry.info('notification sent', { eventId: d.eventId, kind: event.kind, sink: d.sink, attempts });
      count('sent');
    }),
  );
  return counts;
}

/**
 * serve's notification loop: a pass every `everyMs`, never two at once, beside the worker's loops (never in them).
 * `stop` waits for the pass under way (each send is bounded by its timeout).
 */
export function startNotificationLoop(deps: DeliveryDeps, everyMs = 1000): { stop: () => Promise<void>; kick: () => void } {
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const pass = () => {
    if (running || stopped) return;
    running = deliverDue(deps)
      .catch((e: unknown) => deps.telemetry.warn('notification pass failed; the next pass tries again', { error: e instanceof Error ? e.name : String(e) }))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(pass, everyMs);
  timer.unref();
  return {
    kick: pass,
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
