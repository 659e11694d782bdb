import { describe, expect, it } from 'vitest';
import { JsonRecordSplitter, parseLine, type RawRecord } from '../../../lib/sources/json-records.ts';

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
