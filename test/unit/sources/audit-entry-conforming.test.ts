/**
 * The hand-built audit entry (conformingAuditEntry, the fast path of parseAuditEntry) against AuditEntrySchema, the
 * contract: whenever it returns an entry, the schema accepts the value and returns exactly that entry; when it returns
 * nothing, the schema judges (and words the error). On the real samples it must return the entry: that is the point.
 */
import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AuditEntrySchema, conformingAuditEntry } from '../../../lib/sources/audit-entry.ts';
import { vaultSamples } from '../../helpers.ts';

const EVENTS = new URL('../../events/', import.meta.url);

/** Every audit entry among the fixtures: whole JSON files, NDJSON lines, arrays, prefixed lines. */
function auditSamples(): Record<string, unknown>[] {
  const values: unknown[] = [];
  const dirs = [vaultSamples, ...['audit', 'openbao-http', 'malformed'].map((d) => new URL(`${d}/`, EVENTS).pathname)];
  for (const dir of dirs) {
    for (const file of readdirSync(dir)) {
      const text = readFileSync(`${dir}${file}`, 'utf8');
      const docs = [text, ...text.split('\n')].map((t) => t.slice(Math.max(0, t.search(/[{[]/))));
      for (const doc of docs) {
        try {
          const v = JSON.parse(doc) as unknown;
          values.push(...(Array.isArray(v) ? v : [v]));
        } catch {
          // not JSON on its own
        }
      }
    }
  }
  const isEntry = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' &&
    v !== null &&
    !Array.isArray(v) &&
    ['request', 'response'].includes((v as { type?: unknown }).type as string);
  return values.filter(isEntry);
}

const samples = auditSamples();

function agrees(value: unknown): void {
  const fast = conformingAuditEntry(value);
  if (fast === undefined) return;
  const schema = AuditEntrySchema.safeParse(value);
  expect(schema.success).toBe(true);
  expect(fast).toStrictEqual(schema.data);
}

/** Values the schema is picky about: wrong types, null, arrays, non-finite numbers, objects without a prototype. */
const ODD_VALUES: readonly unknown[] = [
  undefined,
  null,
  [],
  {},
  Number.NaN,
  Number.POSITIVE_INFINITY,
  -0,
  1.5,
  '',
  'request',
  'response',
  'update',
  'kv',
  Object.create(null),
  { version: 3 },
  JSON.parse('{"__proto__":{"version":9},"version":2}'),
];
const oddValue = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(...ODD_VALUES));

const FIELDS = [
  'type',
  'time',
  'date',
  'error',
  'request',
  'response',
  'data',
  'id',
  'operation',
  'path',
  'mount_type',
  'mount_point',
  'namespace',
  'version',
  'metadata',
] as const;

/**
 * A fresh copy of an edit's value for each place it goes. The values are shared (ODD_VALUES are constants, and
 * fast-check hands the same object to every shrink): writing one into the tree and then editing the tree would edit
 * the constant, and a value written inside itself (replace `request` by `{ version: 3 }`, then `version` by the same
 * object) makes a cycle. The copy keeps what the schema is picky about: a null prototype and an own `__proto__` key.
 */
function freshValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(freshValue);
  const copy: object = Object.getPrototypeOf(value) === null ? Object.create(null) : {};
  for (const k of Object.keys(value))
    Object.defineProperty(copy, k, {
      value: freshValue((value as Record<string, unknown>)[k]),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return copy;
}

type Edit =
  | { kind: 'replace' | 'remove'; field: string; value: unknown }
  | { kind: 'set'; at: readonly string[]; field: string; value: unknown };

/** The objects an entry is made of, where a field may be added. */
const PLACES = [[], ['request'], ['request', 'namespace'], ['response'], ['response', 'data']] as const;

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('replace' as const, 'remove' as const),
    field: fc.constantFrom(...FIELDS),
    value: oddValue,
  }),
  fc.record({
    kind: fc.constant('set' as const),
    at: fc.constantFrom(...PLACES),
    field: fc.constantFrom(...FIELDS, '__proto__'),
    value: oddValue,
  }),
);

/** A sample with up to 3 edits: a field (at any depth) replaced by an odd value or removed, or one added. */
const variant = fc.tuple(fc.constantFrom(...samples), fc.array(edit, { maxLength: 3 })).map(([sample, edits]) => {
  const copy = structuredClone(sample);
  for (const e of edits) {
    if (e.kind === 'set') {
      const target = e.at.reduce<unknown>(
        (o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined),
        copy,
      );
      // defineProperty: an own `__proto__` key, as JSON.parse makes one.
      if (typeof target === 'object' && target !== null)
        Object.defineProperty(target, e.field, {
          value: freshValue(e.value),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      continue;
    }
    const visit = (o: unknown): void => {
      if (typeof o !== 'object' || o === null) return;
      for (const k of Object.keys(o)) {
        if (k === e.field) {
          if (e.kind === 'remove') delete (o as Record<string, unknown>)[k];
          else (o as Record<string, unknown>)[k] = freshValue(e.value);
        } else visit((o as Record<string, unknown>)[k]);
      }
    };
    visit(copy);
  }
  return copy;
});

describe('conformingAuditEntry', () => {
  it('reads the fixtures', () => {
    expect(samples.length).toBeGreaterThan(40);
  });

  it('builds exactly what the schema returns for every real sample (and takes them all)', () => {
    for (const sample of samples) {
      if (!AuditEntrySchema.safeParse(sample).success) continue;
      expect(conformingAuditEntry(sample)).toBeDefined();
      agrees(sample);
    }
  });

  it('agrees on every single odd field, added or replaced, in every place of a request, a read and a write entry', () => {
    const kinds = [
      samples.find((v) => v.type === 'request'),
      samples.find((v) => JSON.stringify(v).includes('"operation":"read"') && v.type === 'response'),
      samples.find((v) => JSON.stringify(v).includes('"operation":"update"') && v.type === 'response'),
    ];
    for (const sample of kinds) {
      expect(sample).toBeDefined();
      for (const at of PLACES) {
        for (const field of [...FIELDS, '__proto__']) {
          for (const value of ODD_VALUES) {
            const copy = structuredClone(sample) as Record<string, unknown>;
            const target = at.reduce<unknown>(
              (o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined),
              copy,
            );
            if (typeof target !== 'object' || target === null) continue;
            Object.defineProperty(target, field, { value, enumerable: true, writable: true, configurable: true });
            agrees(copy);
          }
        }
      }
    }
  });

  it('never accepts what the schema refuses, and never builds anything else, on generated variants', () => {
    fc.assert(fc.property(variant, agrees), { numRuns: 3000 });
  });

  it('on arbitrary values', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything(),
          oddValue,
          fc.record(
            {
              type: fc.constantFrom('request', 'response', 'x'),
              request: fc.oneof(oddValue, fc.dictionary(fc.constantFrom(...FIELDS), oddValue)),
              response: oddValue,
            },
            { requiredKeys: [] },
          ),
        ),
        agrees,
      ),
      { numRuns: 3000 },
    );
  });

  it('leaves the refusals, and their messages, to the schema', () => {
    const bad = { ...samples[0], request: { ...(samples[0]?.request as object), operation: 7 } };
    expect(conformingAuditEntry(bad)).toBeUndefined();
    expect(AuditEntrySchema.safeParse(bad).success).toBe(false);
  });
});
