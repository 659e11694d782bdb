/**
 * The relay, wired: sources (audit file, audit socket, event subscriptions) -> batcher -> spool (on disk before
 * any delivery) -> deliverer (in order, to the function or the queue). Sources never wait for delivery: a slow
 * receiver only grows the spool, up to its limit, beyond which new lines are dropped and counted.
 *
 * Stopping: sources first (nothing new comes in), open batches into the spool, then the deliverer keeps going for
 * the grace period and is stopped; whatever is left stays spooled for the next start.
 */
import { join } from 'node:path';
import type { Sleep } from '../kernel/backoff.ts';
import { DEFAULT_BATCH_LIMITS, Batcher, type Ack, type BatchLimits } from './batcher.ts';
import type { BatchSender } from './batch-sender.ts';
import { DROP_REASONS, RelayCounters, type DropReason } from './counters.ts';
import { Deliverer } from './delivery.ts';
import { EventSubscriber } from './event-subscriber.ts';
import type { VaultRedirectPolicy } from '../vault/vault-redirect.ts';
import { FileTail } from './file-tail.ts';
import { OffsetStore } from './offset-store.ts';
import type { RecordKind } from './record-kind.ts';
import type { RelayLog } from '../kernel/log.ts';
import { AuditSocketListener, parseListenAddress } from './socket-listener.ts';
import { Spool } from './spool.ts';
import type { VaultTokenSource } from '../vault/vault-auth.ts';
import type { VaultTls } from '../vault/vault-tls.ts';

export const DEFAULT_SPOOL_MAX_BYTES = 512 * 1024 * 1024;
export const OFFSET_FILE = 'audit-file-offset.json';

export interface RelayOptions {
  spoolDir: string;
  spoolMaxBytes?: number;
  /** Batches waiting for the disk, in memory, at most (default 16 MiB). */
  spoolMaxPendingBytes?: number;
  auditFile?: { path: string; startAt?: 'end' | 'start'; pollMs?: number };
  auditListen?: string;
  /** The unix socket's permissions (default 0o600). */
  auditListenMode?: 0o600 | 0o660;
  events?: {
    vaultAddr: string;
    eventTypes: readonly string[];
    namespaces?: readonly string[];
    filter?: string;
    auth: VaultTokenSource;
    vaultNamespace?: string;
    pingIntervalMs?: number;
    reconnectBaseMs?: number;
    /** Where Vault may redirect the subscription (same host by default; never wss to ws). */
    redirects?: VaultRedirectPolicy;
    /** TLS to Vault from VAULT_CACERT, VAULT_CAPATH, VAULT_CLIENT_CERT/KEY, VAULT_SKIP_VERIFY. */
    tls?: VaultTls;
  };
  sender: BatchSender;
  log: RelayLog;
  batch?: Partial<BatchLimits>;
  maxLineBytes?: number;
  retryBaseMs?: number;
  retryCapMs?: number;
  sleep?: Sleep;
  random?: () => number;
  /** How often the counters are logged (default 60 s; 0: never). */
  statsIntervalMs?: number;
}

export interface RunningRelay {
  /** The audit socket's bound address, when listening. */
  listenAddress?: string;
  counters: RelayCounters;
  spool: Spool;
  /** Stops the sources, spools what is held, delivers for up to graceMs, stops. */
  stop(graceMs?: number): Promise<void>;
}

export async function startRelay(options: RelayOptions): Promise<RunningRelay> {
  const { log } = options;
  const counters = new RelayCounters();
  const spool = await openSpool(options);
  const intake = new RelayIntake(spool, counters, log, { ...DEFAULT_BATCH_LIMITS, ...options.batch });
  const delivering = new AbortController();
  const deliverer = new Deliverer({
    spool,
    sender: options.sender,
    counters,
    log,
    ...pick(options, 'sleep', 'random', 'retryBaseMs', 'retryCapMs'),
  });
  const delivery = deliverer
    .run(delivering.signal)
    .catch((error: unknown) => log.error('delivery stopped on an unexpected error', { error: String(error) }));
  const sources: Sources = { stops: [] };
  try {
    await startSources(options, intake, sources);
  } catch (error) {
    for (const stop of sources.stops) await stop();
    delivering.abort();
    await delivery;
    throw error;
  }
  const { listenAddress, offsets } = sources;
  log.info('relay started', {
    target: options.sender.target,
    spool: options.spoolDir,
    sources: [
      options.auditFile ? 'audit-file' : '',
      listenAddress ? 'audit-socket' : '',
      options.events ? 'events' : '',
    ].filter(Boolean),
  });
  const stats = startStatsLog(options.statsIntervalMs ?? 60_000, counters, spool, log);
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 10_000): Promise<void> =>
    (stopping ??= (async () => {
      clearInterval(stats);
      for (const stopSource of sources.stops) await stopSource();
      intake.batcher.flush();
      await spool.whenWritten();
      // The acknowledgements of the last batches run right after their writes; let them, then save the offset.
      await new Promise((resolve) => setImmediate(resolve));
      await offsets?.flush();
      const grace = AbortSignal.any([delivering.signal, AbortSignal.timeout(graceMs)]);
      await spool.drained(grace);
      delivering.abort();
      await delivery;
      log.info('relay stopped', { ...counters.snapshot(), leftInSpool: spool.entries().length });
    })());
  return { ...(listenAddress !== undefined ? { listenAddress } : {}), counters, spool, stop };
}

/** The spool, said when it holds batches of the previous run (they are delivered first, in order). */
async function openSpool(options: RelayOptions): Promise<Spool> {
  const { log } = options;
  const spool = await Spool.open(options.spoolDir, {
    maxBytes: options.spoolMaxBytes ?? DEFAULT_SPOOL_MAX_BYTES,
    ...(options.spoolMaxPendingBytes !== undefined ? { maxPendingBytes: options.spoolMaxPendingBytes } : {}),
    log,
  });
  const replay = spool.entries();
  if (replay.length > 0)
    log.info('replaying the spool left by the previous run, in order', {
      batches: replay.length,
      bytes: spool.usedBytes,
    });
  return spool;
}

/**
 * Where the sources' records go: counted, batched, and each batch appended to the spool. A full spool drops new
 * records (said once when it fills, once when it has room again); every drop is counted by its reason.
 */
class RelayIntake {
  readonly batcher: Batcher;
  readonly #counters: RelayCounters;
  readonly #log: RelayLog;
  readonly #spool: Spool;
  #spoolFull = false;

  constructor(spool: Spool, counters: RelayCounters, log: RelayLog, limits: BatchLimits) {
    this.#spool = spool;
    this.#counters = counters;
    this.#log = log;
    this.batcher = new Batcher(limits, (kind, lines, acks) => {
      void spool.append(kind, lines).then((result) => {
        this.#spooled(result, lines.length);
        // Acknowledged also when dropped: those lines are accounted for, re-reading them would not change that.
        for (const ack of acks) ack();
      });
    });
  }

  receive(kind: RecordKind, line: string, ack?: Ack): void {
    this.#counters.received += 1;
    this.batcher.add(kind, line, ack);
  }

  /** A record received but not taken (not JSON, say): counted as received, then as dropped. */
  refuse(reason: DropReason): void {
    this.#counters.received += 1;
    this.drop(reason, 1);
  }

  drop(reason: DropReason, records: number): void {
    this.#counters.drop(reason, records);
    if (reason !== DROP_REASONS.spoolFull) this.#log.warn('dropped records', { reason, records });
  }

  #spooled(result: Awaited<ReturnType<Spool['append']>>, records: number): void {
    const log = this.#log;
    if (result === 'spooled') {
      this.#counters.spooled += records;
      if (this.#spoolFull)
        log.info('the spool has room again: spooling resumed', {
          dropped: this.#counters.dropped(DROP_REASONS.spoolFull),
        });
      this.#spoolFull = false;
    } else if (result === 'full') {
      if (!this.#spoolFull)
        log.error(
          'THE SPOOL IS FULL: new records are dropped (reason spool-full) until the receiver takes batches again',
          { dir: this.#spool.dir, usedBytes: this.#spool.usedBytes },
        );
      this.#spoolFull = true;
      this.drop(DROP_REASONS.spoolFull, records);
    } else {
      this.drop(result === 'overloaded' ? DROP_REASONS.overload : DROP_REASONS.spoolWriteFailed, records);
    }
  }
}

/** The sources started so far: how to stop each, the socket's bound address, the audit file's offsets. */
interface Sources {
  stops: Array<() => Promise<void>>;
  listenAddress?: string;
  offsets?: OffsetStore;
}

/** Starts each configured source, recording in `sources` what it started (so a failure stops those). */
async function startSources(options: RelayOptions, intake: RelayIntake, sources: Sources): Promise<void> {
  const { log } = options;
  if (options.auditListen) {
    const listener = new AuditSocketListener({
      address: parseListenAddress(options.auditListen),
      onLine: (line) => intake.receive('audit', line),
      onDropped: (reason) => intake.drop(reason, 1),
      log,
      ...pick(options, 'maxLineBytes'),
      ...(options.auditListenMode !== undefined ? { socketMode: options.auditListenMode } : {}),
    });
    sources.listenAddress = await listener.start();
    sources.stops.push(() => listener.stop());
  }
  if (options.auditFile) {
    const offsets = (sources.offsets = new OffsetStore(join(options.spoolDir, OFFSET_FILE)));
    const tail = new FileTail({
      path: options.auditFile.path,
      store: offsets,
      onLine: (line, ack) => intake.receive('audit', line, ack),
      onDropped: (reason) => intake.drop(reason, 1),
      log,
      ...pick(options.auditFile, 'startAt', 'pollMs'),
      ...pick(options, 'maxLineBytes'),
    });
    await tail.start();
    sources.stops.push(() => tail.stop());
  }
  if (options.events) startEventSubscribers(options, options.events, intake, sources);
}

/** One subscription per event type; each message re-serialized as one line, or dropped when it is not JSON. */
function startEventSubscribers(
  options: RelayOptions,
  events: NonNullable<RelayOptions['events']>,
  intake: RelayIntake,
  sources: Sources,
): void {
  for (const eventType of events.eventTypes) {
    const subscriber = new EventSubscriber({
      vaultAddr: events.vaultAddr,
      eventType,
      auth: events.auth,
      log: options.log,
      onMessage: (text) => {
        const line = compactJson(text);
        if (line === undefined) intake.refuse(DROP_REASONS.invalidEvent);
        else intake.receive('events', line);
      },
      ...pick(
        events,
        'namespaces',
        'filter',
        'vaultNamespace',
        'pingIntervalMs',
        'reconnectBaseMs',
        'redirects',
        'tls',
      ),
      ...pick(options, 'sleep', 'random'),
    });
    subscriber.start();
    sources.stops.push(() => subscriber.stop());
  }
  sources.stops.push(() => Promise.resolve(events.auth.stop()));
}

/** Logs the counters and the spool's size every intervalMs (0: never). */
function startStatsLog(
  intervalMs: number,
  counters: RelayCounters,
  spool: Spool,
  log: RelayLog,
): ReturnType<typeof setInterval> | undefined {
  if (intervalMs <= 0) return undefined;
  const stats = setInterval(
    () =>
      log.info('counters', {
        ...counters.snapshot(),
        spooledBatches: spool.entries().length,
        spoolBytes: spool.usedBytes,
      }),
    intervalMs,
  );
  stats.unref();
  return stats;
}

/** One event per line: the JSON re-serialized compactly (a pretty-printed message would break NDJSON). */
function compactJson(text: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** The listed properties that are defined (exactOptionalPropertyTypes-friendly spreading). */
function pick<T extends object, K extends keyof T>(from: T, ...keys: K[]): { [P in K]?: Exclude<T[P], undefined> } {
  const picked: { [P in K]?: Exclude<T[P], undefined> } = {};
  for (const key of keys) if (from[key] !== undefined) picked[key] = from[key] as Exclude<T[K], undefined>;
  return picked;
}
