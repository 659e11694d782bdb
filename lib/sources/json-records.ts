/**
 * Splits raw input into JSON records, whatever the framing: one JSON document (object or array, pretty-printed
 * or not), NDJSON, or lines with raw text before the JSON (the audit device's `prefix` option). A line that is
 * not JSON becomes one rejected record; the lines around it still count.
 */
import { isAuditRequestEntryLine, RECOGNISED_REQUEST_ENTRY } from './audit-entry.ts';

export type RawRecord = { record: string; value: unknown } | { record: string; error: string };

/** JSON.parse's message quotes the input; keep only where it failed, never the text (it may hold a secret). */
function jsonError(e: unknown): string {
  const at = /position (\d+)/.exec(e instanceof Error ? e.message : '');
  return at ? `invalid JSON at character ${at[1]}` : 'invalid JSON';
}

/**
 * Parses one line; raw text before the first `{` is an audit prefix and is skipped. Only an object follows a prefix
 * (the audit device writes one entry per line): `[vault] {...}` is a prefixed entry, and `x[]` is a bad line, not
 * an empty batch that would vanish without a trace.
 */
export function parseLine(line: string): { value: unknown } | { error: string } {
  try {
    return { value: JSON.parse(line) };
  } catch (e) {
    const start = line.indexOf('{');
    if (start > 0) {
      try {
        return { value: JSON.parse(line.slice(start)) };
      } catch {
        // report the error of the whole line
      }
    }
    return { error: jsonError(e) };
  }
}

function* expand(value: unknown, record: string): Generator<RawRecord> {
  if (!Array.isArray(value)) {
    yield { record, value };
    return;
  }
  for (let i = 0; i < value.length; i++) yield { record: `${record}[${i}]`, value: value[i] };
}

/**
 * Incremental splitter: feed text chunks, take records as they complete. It stays line by line (bounded memory)
 * unless the first non-blank line is not JSON on its own, which means one pretty-printed document: then it
 * buffers up to `maxDocumentBytes` and parses the whole, falling back to lines if that fails.
 */
export class JsonRecordSplitter {
  #partial = '';
  #lineNo = 0;
  #mode: 'undecided' | 'lines' | 'document' = 'undecided';
  #document: string[] = [];
  #documentBytes = 0;
  #documentStart = 0;
  readonly #maxDocumentBytes: number;

  constructor(maxDocumentBytes = 64 * 1024 * 1024) {
    this.#maxDocumentBytes = maxDocumentBytes;
  }

  *push(chunk: string): Generator<RawRecord> {
    const text = this.#partial + chunk;
    let from = 0;
    for (let nl = text.indexOf('\n', from); nl >= 0; nl = text.indexOf('\n', from)) {
      yield* this.#line(text.slice(from, nl));
      from = nl + 1;
    }
    this.#partial = text.slice(from);
  }

  *end(): Generator<RawRecord> {
    if (this.#partial !== '') yield* this.#line(this.#partial);
    this.#partial = '';
    if (this.#mode === 'document') yield* this.#flushDocument();
  }

  *#line(raw: string): Generator<RawRecord> {
    this.#lineNo++;
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (this.#mode === 'document') {
      this.#document.push(line);
      this.#documentBytes += line.length + 1;
      if (this.#documentBytes > this.#maxDocumentBytes) yield* this.#flushDocument();
      return;
    }
    if (line.trim() === '') return;
    if (isAuditRequestEntryLine(line)) {
      this.#mode = 'lines';
      yield { record: `line ${this.#lineNo}`, value: RECOGNISED_REQUEST_ENTRY };
      return;
    }
    const parsed = parseLine(line);
    if (this.#mode === 'undecided') {
      const opensDocument = /^\s*[{[]/.test(line) && 'error' in parsed;
      this.#mode = opensDocument ? 'document' : 'lines';
      if (opensDocument) {
        this.#documentStart = this.#lineNo;
        this.#document.push(line);
        this.#documentBytes = line.length + 1;
        return;
      }
    }
    const record = `line ${this.#lineNo}`;
    if ('error' in parsed) yield { record, error: parsed.error };
    else yield* expand(parsed.value, record);
  }

  *#flushDocument(): Generator<RawRecord> {
    const lines = this.#document;
    this.#document = [];
    this.#documentBytes = 0;
    this.#mode = 'lines';
    const whole = lines.join('\n');
    let value: unknown;
    try {
      value = JSON.parse(whole);
    } catch {
      // Not one document after all: judge each line on its own.
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i] ?? '';
        if (line.trim() === '') continue;
        const parsed = parseLine(line);
        const record = `line ${this.#documentStart + i}`;
        if ('error' in parsed) yield { record, error: parsed.error };
        else yield* expand(parsed.value, record);
      }
      return;
    }
    yield* expand(value, Array.isArray(value) ? 'document' : `document (line ${this.#documentStart})`);
  }
}
