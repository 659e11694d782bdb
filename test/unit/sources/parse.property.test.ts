/** Property tests: no input crashes the parsers, and every record is counted exactly once. */
import { readdirSync, readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePattern, PatternError, PatternIndex } from '../../../lib/routing/path-pattern.ts';
import { parseInput, parseStream } from '../../../lib/sources/parse.ts';
import { vaultSamples } from '../../helpers.ts';

const samples = readdirSync(vaultSamples)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(`${vaultSamples}${f}`, 'utf8')) as unknown);

const total = (r: ReturnType<typeof parseInput>) => r.changes.length + r.ignored.length + r.rejected.length;

/** A sample with one field replaced by an arbitrary JSON value, or removed. */
const mutatedSample = fc
  .tuple(
    fc.constantFrom(...samples),
    fc.array(
      fc.constantFrom(
        'type',
        'time',
        'request',
        'response',
        'data',
        'path',
        'operation',
        'mount_point',
        'namespace',
        'version',
        'metadata',
        'event_type',
        'error',
        'modified',
        'id',
      ),
      { maxLength: 3 },
    ),
    fc.jsonValue({ maxDepth: 2 }),
    fc.boolean(),
  )
  .map(([sample, keys, value, remove]) => {
    const copy = structuredClone(sample) as Record<string, unknown>;
    const visit = (o: unknown): void => {
      if (typeof o !== 'object' || o === null) return;
      for (const k of Object.keys(o)) {
        if ((keys as string[]).includes(k)) {
          if (remove) delete (o as Record<string, unknown>)[k];
          else (o as Record<string, unknown>)[k] = value;
        } else visit((o as Record<string, unknown>)[k]);
      }
    };
    visit(copy);
    return copy;
  });

/** One record as a line: a (mutated) sample, plain or wrapped the way a shipper sends it, or any JSON. */
const recordLine = fc.oneof(
  mutatedSample.map((v) => JSON.stringify(v)),
  mutatedSample.map((v) => `vault-audit: ${JSON.stringify(v)}`),
  mutatedSample.map((v) => JSON.stringify({ date: 1700000000.5, log: JSON.stringify(v) })),
  mutatedSample.map((v) => JSON.stringify({ message: JSON.stringify(v), host: 'h', source_type: 'file' })),
  fc
    .jsonValue({ maxDepth: 3 })
    .filter((v) => !Array.isArray(v))
    .map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 40 }).map((s) => `x${s.replace(/[\r\n]/g, ' ')}`),
);

describe('parsers never crash and count every record once', () => {
  it('for NDJSON batches of mutated samples and noise', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordLine, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 64 }),
        async (lines, chunk) => {
          const text = lines.join('\n');
          const whole = parseInput(text);
          expect(total(whole)).toBe(lines.length);
          const streamed = await parseStream(
            (async function* () {
              for (let i = 0; i < text.length; i += chunk) yield text.slice(i, i + chunk);
            })(),
          );
          expect(streamed).toEqual(whole);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('for arbitrary text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        const r = parseInput(text);
        expect(total(r)).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 500 },
    );
  });

  it('for CloudWatch envelopes of any log events', () => {
    fc.assert(
      fc.property(fc.array(recordLine, { maxLength: 6 }), (lines) => {
        const data = gzipSync(
          JSON.stringify({
            messageType: 'DATA_MESSAGE',
            logGroup: 'g',
            logStream: 's',
            logEvents: lines.map((message, i) => ({ id: String(i), timestamp: i, message })),
          }),
        ).toString('base64');
        const r = parseInput(JSON.stringify({ awslogs: { data } }));
        expect(total(r)).toBe(lines.length);
      }),
      { numRuns: 200 },
    );
  });
});

describe('path matcher properties', () => {
  const segment = fc.stringMatching(/^[a-z0-9._-]{1,6}$/);
  it('a literal pattern matches exactly its own path', () => {
    fc.assert(
      fc.property(
        fc.array(segment, { minLength: 1, maxLength: 6 }),
        fc.array(segment, { minLength: 1, maxLength: 6 }),
        (a, b) => {
          const index = new PatternIndex();
          index.add(0, compilePattern(a.join('/')));
          expect(index.match(b.join('/')).has(0)).toBe(a.join('/') === b.join('/'));
        },
      ),
    );
  });

  it('"**" matches every path below its prefix, and captures take whole segments', () => {
    fc.assert(
      fc.property(segment, fc.array(segment, { maxLength: 6 }), (first, rest) => {
        const index = new PatternIndex();
        index.add(0, compilePattern('m/{x}/**'));
        const m = index.match(['m', first, ...rest].join('/'));
        expect(m.get(0)).toEqual({ x: first });
      }),
    );
  });

  it('any pattern text either compiles or throws PatternError, and matching never throws', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), fc.string({ maxLength: 30 }), (pattern, path) => {
        let compiled;
        try {
          compiled = compilePattern(pattern);
        } catch (e) {
          expect(e).toBeInstanceOf(PatternError);
          return;
        }
        const index = new PatternIndex();
        index.add(0, compiled);
        index.match(path);
      }),
      { numRuns: 1000 },
    );
  });
});
