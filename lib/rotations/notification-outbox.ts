/**
 * Notifications' outbox, kept in the rotation store: one row per rotation event, written once — the
 * conditional insert IS the deduplication, so a redelivered message, a gate worked twice or a `serve` restart that
 * emits the same event again finds its id and sends nothing — and one delivery per sink, which a poller (serve's
 * loop, never a step of the worker) takes, sends and marks. Rows live for a TTL, then go.
 *
 * Also a rotation's small facts (`note`): which clusters finished, whether a rollout failed, so "rotation complete"
 * is sent once every cluster of it has finished and none failed.
 */

export interface OutboxDelivery {
  eventId: string;
  sink: string;
  /** The event as JSON (lib/notify/event.ts): rendered for its sink when it is sent. */
  body: string;
  /** Attempts already made. */
  attempts: number;
}

export type TakeResult = { delivery: OutboxDelivery } | { notBefore: number } | 'done';

export interface NotificationOutbox {
  /** Records the event and a delivery per sink, once: false when the id is already recorded (and not expired). */
  enqueueOnce(eventId: string, sinks: readonly string[], body: string, nowMs: number, ttlMs: number): Promise<boolean>;
  /**
   * Up to `limit` deliveries due at `nowMs`, each leased until `nowMs + leaseMs` (another poller, or this one after a
   * restart, takes it again only then).
   */
  takeDue(nowMs: number, limit: number, leaseMs: number): Promise<OutboxDelivery[]>;
  /**
   * Takes one named delivery (a DynamoDB stream record names it: lib/notify/delivery.ts deliverNamed), leased as
   * takeDue leases: `done` when it was sent, given up or is unknown; `notBefore` when it is pending but not due yet
   * (a backoff, or another sender's lease).
   */
  take(eventId: string, sink: string, nowMs: number, leaseMs: number): Promise<TakeResult>;
  /** Sent: never sent again. */
  sent(eventId: string, sink: string): Promise<void>;
  /** Not sent: try again at `retryAtMs` with `attempts` counted, or give up when it is undefined. */
  failed(eventId: string, sink: string, attempts: number, retryAtMs: number | undefined): Promise<void>;
  /** Records a fact about a rotation (idempotent), kept for the TTL. */
  note(rotation: string, fact: string, nowMs: number, ttlMs: number): Promise<void>;
  /** The rotation's facts not yet expired. */
  notes(rotation: string, nowMs: number): Promise<string[]>;
}

export const isNotificationOutbox = (v: unknown): v is NotificationOutbox =>
  typeof v === 'object' && v !== null && 'enqueueOnce' in v && 'takeDue' in v;

/**
 * How long an event id (and a rotation's facts) is remembered: longer than any redelivery, continuation or gate (25 h).
 */
export const NOTIFICATION_TTL_MS = 7 * 24 * 3_600_000;

type DeliveryState = OutboxDelivery & { dueAt: number; state: 'pending' | 'sent' | 'gave-up'; expiresAt: number };

/** One process's memory: tests, dry runs. */
export class MemoryNotificationOutbox implements NotificationOutbox {
  readonly #events = new Map<string, number>();
  readonly #deliveries = new Map<string, DeliveryState>();
  readonly #notes = new Map<string, Map<string, number>>();

  enqueueOnce(eventId: string, sinks: readonly string[], body: string, nowMs: number, ttlMs: number): Promise<boolean> {
    const until = this.#events.get(eventId);
    if (until !== undefined && until > nowMs) return Promise.resolve(false);
    this.#events.set(eventId, nowMs + ttlMs);
    for (const sink of sinks)
      this.#deliveries.set(`${eventId}\u0000${sink}`, {
        eventId,
        sink,
        body,
        attempts: 0,
        dueAt: nowMs,
        state: 'pending',
        expiresAt: nowMs + ttlMs,
      });
    return Promise.resolve(true);
  }

  takeDue(nowMs: number, limit: number, leaseMs: number): Promise<OutboxDelivery[]> {
    const due = [...this.#deliveries.values()]
      .filter((d) => d.state === 'pending' && d.dueAt <= nowMs)
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, limit);
    for (const d of due) d.dueAt = nowMs + leaseMs;
    return Promise.resolve(due.map(({ eventId, sink, body, attempts }) => ({ eventId, sink, body, attempts })));
  }

  take(eventId: string, sink: string, nowMs: number, leaseMs: number): Promise<TakeResult> {
    const d = this.#deliveries.get(`${eventId}\u0000${sink}`);
    if (!d || d.state !== 'pending') return Promise.resolve('done');
    if (d.dueAt > nowMs) return Promise.resolve({ notBefore: d.dueAt });
    d.dueAt = nowMs + leaseMs;
    return Promise.resolve({ delivery: { eventId, sink, body: d.body, attempts: d.attempts } });
  }

  sent(eventId: string, sink: string): Promise<void> {
    const d = this.#deliveries.get(`${eventId}\u0000${sink}`);
    if (d) d.state = 'sent';
    return Promise.resolve();
  }

  failed(eventId: string, sink: string, attempts: number, retryAtMs: number | undefined): Promise<void> {
    const d = this.#deliveries.get(`${eventId}\u0000${sink}`);
    if (d) Object.assign(d, retryAtMs === undefined ? { attempts, state: 'gave-up' } : { attempts, dueAt: retryAtMs });
    return Promise.resolve();
  }

  note(rotation: string, fact: string, nowMs: number, ttlMs: number): Promise<void> {
    const facts = this.#notes.get(rotation) ?? new Map<string, number>();
    facts.set(fact, nowMs + ttlMs);
    this.#notes.set(rotation, facts);
    return Promise.resolve();
  }

  notes(rotation: string, nowMs: number): Promise<string[]> {
    return Promise.resolve(
      [...(this.#notes.get(rotation) ?? new Map<string, number>())]
        .filter(([, until]) => until > nowMs)
        .map(([fact]) => fact)
        .sort(),
    );
  }

  /** For tests: every delivery's state. */
  deliveries(): Array<{ eventId: string; sink: string; state: string; attempts: number }> {
    return [...this.#deliveries.values()].map(({ eventId, sink, state, attempts }) => ({
      eventId,
      sink,
      state,
      attempts,
    }));
  }
}
