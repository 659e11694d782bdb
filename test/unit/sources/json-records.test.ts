import { readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isAuditRequestEntryLine } from '../../../lib/sources/audit-entry.ts';
import { JsonRecordSplitter, parseLine, type RawRecord } from '../../../lib/sources/json-records.ts';
import { parseInput } from '../../../lib/sources/parse.ts';

function split(text: string, chunk = text.length || 1, maxDocumentBytes?: number): RawRecord[] {
  const s = new JsonRecordSplitter(maxDocumentBytes);
  const out: RawRecord[] = [];
  for (let i = 0; i < text.length; i += chunk) out.push(...s.push(text.slice(i, i + chunk)));
  out.push(...s.end());
  return out;
}

describe('JsonRecordSplitter: every framing Vault and the shippers use', () => {
  it.each([
    ['one object', '{"a":1}', ['line 1']],
    ['one object with a trailing newline', '{"a":1}\n', ['line 1']],
    ['NDJSON', '{"a":1}\n{"a":2}\n\n{"a":3}', ['line 1', 'line 2', 'line 4']],
    ['CRLF NDJSON', '{"a":1}\r\n{"a":2}\r\n', ['line 1', 'line 2']],
    ['a JSON array on one line', '[{"a":1},{"a":2}]', ['line 1[0]', 'line 1[1]']],
    ['NDJSON of arrays', '[{"a":1}]\n[{"a":2},{"a":3}]', ['line 1[0]', 'line 2[0]', 'line 2[1]']],
    ['a pretty-printed object', '{\n  "a": 1\n}\n', ['document (line 1)']],
    ['a pretty-printed array', '[\n  {"a": 1},\n  {"a": 2}\n]', ['document[0]', 'document[1]']],
    ['prefixed lines', 'vault-audit: {"a":1}\nvault-audit: {"a":2}', ['line 1', 'line 2']],
    ['blank input', '', []],
    ['whitespace only', '  \n\t\n', []],
  ])('%s', (_name, text, records) => {
    const out = split(text);
    expect(out.map((r) => r.record)).toEqual(records);
    expect(out.every((r) => 'value' in r)).toBe(true);
    // The same records whatever the chunking of a stream.
    for (const chunk of [1, 3, 8]) expect(split(text, chunk)).toEqual(out);
  });

  it('rejects a bad line and keeps the others', () => {
    const out = split('{"a":1}\n{"a":\nnot json at all\n{"a":3}');
    expect(out.map((r) => [r.record, 'error' in r])).toEqual([
      ['line 1', false],
      ['line 2', true],
      ['line 3', true],
      ['line 4', false],
    ]);
  });

  it('falls back to lines when a document opener was not one document', () => {
    const out = split('{"a":\n{"b":2}\n');
    expect(out.map((r) => [r.record, 'error' in r])).toEqual([
      ['line 1', true],
      ['line 2', false],
    ]);
  });

  it('bounds a document it buffers and judges it by lines past the bound', () => {
    const out = split('{\n"a": 1,\n"b": 2\n}\n', 100, 8);
    expect(out.every((r) => 'error' in r)).toBe(true);
  });

  it('never quotes the input in an error (it may hold a secret)', () => {
    const r = parseLine('{"password":"hunter2", oops}');
    expect('error' in r && r.error).toMatch(/^invalid JSON/);
    expect(JSON.stringify(r)).not.toContain('hunter2');
    expect(parseLine('hunter2')).toEqual({ error: 'invalid JSON' });
  });

  it('reads a prefix before the JSON object', () => {
    expect(parseLine('audit-prefix {"a":1}')).toEqual({ value: { a: 1 } });
    expect(parseLine('x {"a":')).toHaveProperty('error');
    expect(parseLine('[vault-audit] {"a":1}')).toEqual({ value: { a: 1 } });
  });

  it('takes only an object after a prefix: a prefixed array is a bad line, not records that vanish or multiply', () => {
    expect(parseLine('x[]')).toHaveProperty('error');
    expect(parseLine('x[1,2]')).toHaveProperty('error');
    expect(split('x[]\n{"a":1}\n').map((r) => ('error' in r ? 'error' : r.value))).toEqual(['error', { a: 1 }]);
  });
});

const captured = new URL('../../vault/captured/', import.meta.url);

describe('audit request entries recognised without JSON.parse', () => {
  const request = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      time: '2026-11-23T22:00:00.123456789Z',
      type: 'request',
      auth: { metadata: { type: 'response' } },
      request: { id: 'r1', operation: 'update', path: 'secret/data/a' },
      ...extra,
    });
  it.each([
    ['a request entry as Vault writes it', request(), true],
    ['one with an offset in its time', request().replace('123456789Z', '123+02:00'), true],
    [
      'a request entry as Vault 1.21 writes it',
      '{"request":{"path":"a"},"time":"2026-11-27T17:14:43.9617Z","type":"request"}',
      true,
    ],
    ['a response entry', request().replace('"type":"request"', '"type":"response"'), false],
    [
      'a nested object that ends the line',
      '{"type":"response","x":{"time":"2026-11-27T17:14:43Z","type":"request"}}',
      false,
    ],
    [
      'a response whose nested data says "type":"request"',
      JSON.stringify({ time: 't', type: 'response', request: { type: 'request' } }),
      false,
    ],
    ['another field order', JSON.stringify({ type: 'request', time: '2026-11-23T22:00:00Z', request: {} }), false],
    ['a time that holds a quote', '{"time":"2026\\"x","type":"request","a":1}', false],
    ['spaces after the colons', '{"time": "2026-11-23T22:00:00Z", "type": "request", "a": 1}', false],
    ['a prefix before the entry', `vault: ${request()}`, false],
    ['a cut line', request().slice(0, -5), false],
  ])('%s: %s', (_what, line, recognised) => {
    expect(isAuditRequestEntryLine(line)).toBe(recognised);
  });

  const servers = readdirSync(captured).filter((d) => statSync(new URL(d, captured)).isDirectory());
  it.each(servers)('recognises every request entry %s wrote, and parses to the same result', (server) => {
    const lines = readFileSync(new URL(`${server}/audit-file.ndjson`, captured), 'utf8')
      .split('\n')
      .filter(Boolean);
    const requests = lines.filter((l) => (JSON.parse(l) as { type?: string }).type === 'request');
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.filter((l) => !isAuditRequestEntryLine(l))).toEqual([]);
    expect(lines.filter((l) => isAuditRequestEntryLine(l))).toHaveLength(requests.length);
    expect(parseInput(lines.join('\n'))).toEqual(parseInput(lines.map((l) => ` ${l}`).join('\n')));
  });

  it('gives what parsing the whole entry gives, beside lines that are parsed', () => {
    const lines = [
      request(),
      request({ error: 'permission denied' }),
      request().replace('"type":"request"', '"type":"response"'),
    ];
    // A leading space keeps a line off the recognised layout: the same entries, parsed the whole way.
    const parsedWhole = parseInput(lines.map((l) => ` ${l}`).join('\n'));
    expect(parseInput(lines.join('\n'))).toEqual(parsedWhole);
    expect(parsedWhole.ignored.filter((i) => i.reason === 'request-entry').map((i) => i.record)).toEqual([
      'line 1',
      'line 2',
    ]);
  });
});
