/**
 * Delivering the outbox, out of line: a pass takes the deliveries that are due, sends each to its sink
 * (concurrently, each bounded by the sink's timeout), and marks it sent, due again after a backoff, or dropped after
 * MAX_ATTEMPTS. Nothing here runs inside a rotation's step: the worker only writes the outbox, so a sink that fails or
 * hangs delays no restart. Every outcome is counted (`Notifications` by outcome) and a failure is logged with the
 * sink's name and the error's kind — never its URL or secret.
 */
import { backoffDelayMs } from '../kernel/backoff.ts';
import { METRICS, type Telemetry } from '../kernel/telemetry.ts';
import type { NotificationOutbox, OutboxDelivery } from '../rotations/notification-outbox.ts';
import { parseEvent } from './event.ts';
import { SinkError, type Sink } from './sinks.ts';

/** Attempts per delivery, and the backoff between them: 2 s, 4 s, 8 s … at most 5 min (equal jitter). */
export const MAX_ATTEMPTS = 6;
export const RETRY_BASE_MS = 2000;
export const RETRY_CAP_MS = 300_000;
/**
 * How long a taken delivery is leased: past the sink's timeout, so a pass never races itself; a restart retakes it
 * after.
 */
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

type Outcome = 'sent' | 'retry' | 'dropped';

/**
 * Sends one taken delivery and marks it: sent, due again after a backoff, or dropped after the last attempt. Counted
 * and logged.
 */
export async function deliverOne(deps: DeliveryDeps, d: OutboxDelivery): Promise<Outcome> {
  const now = deps.now ?? Date.now;
  const max = deps.maxAttempts ?? MAX_ATTEMPTS;
  const event = parseEvent(d.body);
  const sink = deps.sinks.get(d.sink);
  const count = (outcome: Outcome): Outcome => {
    deps.telemetry.metric(METRICS.notifications, 1, 'Count', { outcome });
    return outcome;
  };
  if (!event || !sink) {
    await deps.outbox.failed(d.eventId, d.sink, d.attempts, undefined);
    deps.telemetry.error(
      'notification dropped: ' +
        (event ? 'its sink is not configured (or its variables are missing)' : 'unreadable outbox row'),
      { eventId: d.eventId, sink: d.sink },
    );
    return count('dropped');
  }
  const attempts = d.attempts + 1;
  try {
    await sink.send(event);
  } catch (e) {
    const why = e instanceof SinkError ? e.message : e instanceof Error ? e.name : 'error';
    if (attempts >= max) {
      await deps.outbox.failed(d.eventId, d.sink, attempts, undefined);
      deps.telemetry.error('notification dropped after its last attempt', {
        eventId: d.eventId,
        kind: event.kind,
        sink: d.sink,
        attempts,
        why,
      });
      return count('dropped');
    }
    const delayMs = backoffDelayMs(attempts, RETRY_BASE_MS, RETRY_CAP_MS, deps.random);
    await deps.outbox.failed(d.eventId, d.sink, attempts, now() + delayMs);
    deps.telemetry.warn('notification not delivered; trying again later', {
      eventId: d.eventId,
      kind: event.kind,
      sink: d.sink,
      attempts,
      delayMs,
      why,
    });
    return count('retry');
  }
  await deps.outbox.sent(d.eventId, d.sink);
  deps.telemetry.info('notification sent', { eventId: d.eventId, kind: event.kind, sink: d.sink, attempts });
  return count('sent');
}

/** One pass over what is due: how many were sent, retried, dropped. */
export async function deliverDue(deps: DeliveryDeps): Promise<{ sent: number; retry: number; dropped: number }> {
  const counts = { sent: 0, retry: 0, dropped: 0 };
  const due = await deps.outbox.takeDue((deps.now ?? Date.now)(), BATCH, LEASE_MS);
  for (const outcome of await Promise.all(due.map((d) => deliverOne(deps, d)))) counts[outcome] += 1;
  return counts;
}

/**
 * Lambda's sender (functions/notify.ts): the deliveries a DynamoDB stream batch names, each taken (leased) by key and
 * sent. The answer lists the ones to hand back to the event source mapping, which invokes again with them: a retry
 * (its backoff is waited out at the next invocation, when it ends within `waitBudgetMs`) or one not due yet. One
 * sent, given up or unknown (another sender had it) is done. Concurrent, each bounded by its sink's timeout.
 */
export async function deliverNamed(
  deps: DeliveryDeps & { sleep?: (ms: number) => Promise<void> },
  named: ReadonlyArray<{ eventId: string; sink: string }>,
  waitBudgetMs: number,
): Promise<{ again: number[]; outcomes: Outcome[] }> {
  const now = deps.now ?? Date.now;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const outcomes: Outcome[] = [];
  const again: number[] = [];
  await Promise.all(
    named.map(async ({ eventId, sink }, index) => {
      let taken = await deps.outbox.take(eventId, sink, now(), LEASE_MS);
      if (taken !== 'done' && 'notBefore' in taken) {
        const wait = taken.notBefore - now();
        if (wait > waitBudgetMs) {
          again.push(index);
          return;
        }
        await sleep(Math.max(0, wait));
        taken = await deps.outbox.take(eventId, sink, now(), LEASE_MS);
      }
      if (taken === 'done') return;
      if ('notBefore' in taken) {
        again.push(index);
        return;
      }
      const outcome = await deliverOne(deps, taken.delivery);
      outcomes.push(outcome);
      if (outcome === 'retry') again.push(index);
    }),
  );
  return { again: again.sort((a, b) => a - b), outcomes };
}

/**
 * serve's notification loop: a pass every `everyMs`, never two at once, beside the worker's loops (never in them).
 * `stop` waits for the pass under way (each send is bounded by its timeout).
 */
export function startNotificationLoop(
  deps: DeliveryDeps,
  everyMs = 1000,
): { stop: () => Promise<void>; kick: () => void } {
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const pass = () => {
    if (running || stopped) return;
    running = deliverDue(deps)
      .catch((e: unknown) =>
        deps.telemetry.warn('notification pass failed; the next pass tries again', {
          error: e instanceof Error ? e.name : String(e),
        }),
      )
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
