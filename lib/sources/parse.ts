/**
 * The trust boundary: untrusted bytes in, SecretChange / ignored / rejected out. Every record of the input
 * lands in exactly one of the three lists, and a bad record never stops the others.
 */
import { parseAuditEntry, isAuditEntry } from './audit-entry.ts';
import {
  decodeCloudWatchEnvelope,
  isCloudWatchData,
  MAX_CLOUDWATCH_INFLATED_BYTES,
  isCloudWatchEnvelope,
  parseCloudWatchData,
  type CloudWatchLogsData,
} from './cloudwatch-logs.ts';
import { isEventNotification, parseEventNotification } from './event-notification.ts';
import { JsonRecordSplitter, parseLine, type RawRecord } from './json-records.ts';
import type { KvMounts } from './kv-mounts.ts';
import { isObject, type RecordContext, type RecordOutcome } from './record.ts';
import { emptyParseResult, type ParseResult, type Transport } from './secret-change.ts';

export const InputFormats = ['auto', 'audit', 'event', 'cloudwatch', 'fluent-bit', 'vector'] as const;
export type InputFormat = (typeof InputFormats)[number];

export interface ParseOptions {
  format?: InputFormat;
  mounts?: KvMounts;
  /** The most all of this input's CloudWatch envelopes may inflate to, together (default 16 MiB). */
  maxInflatedBytes?: number;
}

type Kind = 'audit' | 'event' | 'cloudwatch' | 'fluent-bit' | 'vector';

/** Which record kinds each --format admits at the top level (`auto` admits all). */
const ADMITS: Readonly<Record<InputFormat, ReadonlySet<Kind>>> = {
  auto: new Set(['audit', 'event', 'cloudwatch', 'fluent-bit', 'vector']),
  audit: new Set(['audit']),
  event: new Set(['event']),
  cloudwatch: new Set(['cloudwatch']),
  'fluent-bit': new Set(['fluent-bit', 'audit', 'event']),
  vector: new Set(['vector', 'audit', 'event']),
};

function kindOf(value: unknown): Kind | undefined {
  if (isAuditEntry(value)) return 'audit';
  if (isEventNotification(value)) return 'event';
  if (isCloudWatchEnvelope(value) || isCloudWatchData(value)) return 'cloudwatch';
  if (isObject(value) && typeof value.log === 'string') return 'fluent-bit';
  if (isObject(value) && typeof value.message === 'string') return 'vector';
  return undefined;
}

/** Collects outcomes; one instance per input, so callers can stream records through it. */
export class ChangeCollector {
  readonly result: ParseResult = emptyParseResult();
  readonly #admits: ReadonlySet<Kind>;
  readonly #mounts: KvMounts;
  /** What CloudWatch envelopes may still inflate to: one budget per input, so many envelopes cannot add up. */
  #inflateBudget: number;
  readonly #inflateLimit: number;

  constructor(options: ParseOptions = {}) {
    this.#admits = ADMITS[options.format ?? 'auto'];
    this.#mounts = options.mounts ?? new Map();
    this.#inflateLimit = options.maxInflatedBytes ?? MAX_CLOUDWATCH_INFLATED_BYTES;
    this.#inflateBudget = this.#inflateLimit;
  }

  add(raw: RawRecord): void {
    if ('error' in raw) this.#rejected(raw.record, raw.error);
    else this.#value(raw.value, raw.record, 'direct', this.#admits);
  }

  #value(value: unknown, record: string, via: Transport, admits: ReadonlySet<Kind>): void {
    const kind = kindOf(value);
    if (kind === undefined || !admits.has(kind)) {
      this.#rejected(
        record,
        kind === undefined
          ? 'not a Vault audit entry, event notification or log-shipper record'
          : `a ${kind} record, but the input format says otherwise`,
      );
      return;
    }
    const ctx: RecordContext = { record, via, mounts: this.#mounts };
    switch (kind) {
      case 'audit':
        return this.#outcome(parseAuditEntry(value, ctx), record);
      case 'event':
        return this.#outcome(parseEventNotification(value, ctx), record);
      case 'fluent-bit':
        return this.#rawLine((value as { log: string }).log, `${record} log`, 'fluent-bit');
      case 'vector':
        return this.#rawLine((value as { message: string }).message, `${record} message`, 'vector');
      case 'cloudwatch':
        return this.#cloudWatch(value, record);
    }
  }

  /** A log line carried by a shipper or CloudWatch: one audit entry or event, possibly behind a prefix. */
  #rawLine(line: string, record: string, via: Transport): void {
    const parsed = parseLine(line.trim());
    if ('error' in parsed) this.#rejected(record, parsed.error);
    else this.#value(parsed.value, record, via, INNER);
  }

  #cloudWatch(value: unknown, record: string): void {
    let data: CloudWatchLogsData | { error: string };
    if (isCloudWatchEnvelope(value)) {
      const decoded = decodeCloudWatchEnvelope(value, this.#inflateBudget, this.#inflateLimit);
      if (!('error' in decoded)) this.#inflateBudget -= decoded.inflatedBytes;
      data = decoded;
    } else data = parseCloudWatchData(value);
    if ('error' in data) return this.#rejected(record, data.error);
    if (data.messageType === 'CONTROL_MESSAGE') {
      this.result.ignored.push({ record, reason: 'control-message', detail: 'CloudWatch Logs reachability check' });
      return;
    }
    data.logEvents.forEach((event, i) => this.#rawLine(event.message, `${record} logEvents[${i}]`, 'cloudwatch'));
  }

  #outcome(outcome: RecordOutcome, record: string): void {
    if (outcome.kind === 'change') this.result.changes.push(outcome.change);
    else if (outcome.kind === 'ignored')
      this.result.ignored.push({ record, reason: outcome.reason, detail: outcome.detail });
    else this.#rejected(record, outcome.error);
  }

  #rejected(record: string, error: string): void {
    this.result.rejected.push({ record, error });
  }
}

const INNER: ReadonlySet<Kind> = new Set(['audit', 'event']);

/** Parses a whole input held in memory (an HTTP body, a Lambda event). */
export function parseInput(text: string, options: ParseOptions = {}): ParseResult {
  const collector = new ChangeCollector(options);
  const splitter = new JsonRecordSplitter();
  for (const raw of splitter.push(text)) collector.add(raw);
  for (const raw of splitter.end()) collector.add(raw);
  return collector.result;
}

/** Parses a stream record by record, holding only the current line and the results. */
export async function parseStream(
  chunks: AsyncIterable<string | Buffer>,
  options: ParseOptions = {},
): Promise<ParseResult> {
  const collector = new ChangeCollector(options);
  const splitter = new JsonRecordSplitter();
  const decoder = new TextDecoder();
  for await (const chunk of chunks) {
    const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    for (const raw of splitter.push(text)) collector.add(raw);
  }
  for (const raw of splitter.push(decoder.decode())) collector.add(raw);
  for (const raw of splitter.end()) collector.add(raw);
  return collector.result;
}
