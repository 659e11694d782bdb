/**
 * The schema's issues in the words of the table's author, the way kubectl reports a manifest: one problem per
 * mistake, at the line and column of the key or value that is wrong, with the nearest known word when one is close.
 * `unknown field "lables" (did you mean "labels"?)`, `required field "path" is missing`, `unsupported value
 * "Deployement" (did you mean "Deployment"?)`. A misspelt required key is one problem (the unknown key), not two.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import { nearest } from '../kernel/nearest.ts';
import type { ConfigProblem } from './table-model.ts';

export type FieldPath = ReadonlyArray<PropertyKey>;

export const fieldName = (path: FieldPath): string =>
  path.reduce<string>((s, k) => (typeof k === 'number' ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), '');

/** A problem before it is placed: its field, its words, and whether it is about the key itself (an unknown field). */
export interface FieldProblem {
  path: PropertyKey[];
  message: string;
  atKey?: boolean;
}

/** The YAML document of a table, and where in its text a field is. */
export interface Locator {
  doc: Document;
  at: (p: FieldProblem) => ConfigProblem;
  yamlProblems: () => ConfigProblem[];
}

export function locator(text: string, file: string): Locator {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const position = (offset: number): { line: number; column: number } => {
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  const at = ({ path, message, atKey }: FieldProblem): ConfigProblem => {
    // The deepest node that exists on the path: a missing field is reported where its parent is.
    let node: unknown = doc.contents;
    let offset = (doc.contents as YamlNode | null)?.range?.[0] ?? 0;
    for (const [i, key] of path.entries()) {
      if (atKey === true && i === path.length - 1 && isMap(node)) {
        const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === key);
        offset = (pair?.key as YamlNode | undefined)?.range?.[0] ?? offset;
        break;
      }
      const next: unknown = isMap(node) || (isSeq(node) && typeof key === 'number') ? node.get(key, true) : undefined;
      if (next === undefined || next === null) break;
      node = next;
      offset = (node as YamlNode).range?.[0] ?? offset;
    }
    return { file, ...position(offset), field: fieldName(path), message };
  };
  // Each syntax error where it is (`pos` is an offset in the text), its first line only: the rest repeats the source.
  const yamlProblems = (): ConfigProblem[] =>
    doc.errors.map((e) => ({
      file,
      ...position(e.pos[0]),
      field: '',
      message: `YAML syntax: ${firstLine(e.message)}`,
    }));
  return { doc, at, yamlProblems };
}

const firstLine = (message: string): string => (message.split('\n')[0] ?? '').replace(/:$/, '');

/** What this file needs of a zod issue (zod 4's issue shapes). */
export interface SchemaIssue {
  code: string;
  path: PropertyKey[];
  message: string;
  keys?: string[];
  values?: unknown[];
  expected?: string;
  errors?: SchemaIssue[][];
}

/** What this file reads of a zod 4 schema: its definition (the kind, and the parts an object, list or union has). */
interface SchemaLike {
  _zod: {
    def: {
      type: string;
      shape?: Record<string, SchemaLike>;
      element?: SchemaLike;
      valueType?: SchemaLike;
      options?: SchemaLike[];
      innerType?: SchemaLike;
      in?: SchemaLike;
    };
  };
}

/** The schema under its wrappers (optional, default, pipe...). */
function unwrap(schema: SchemaLike): SchemaLike {
  let s = schema;
  for (let i = 0; i < 10; i++) {
    const def = s._zod.def;
    const inner = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
    if (inner === undefined) return s;
    s = inner;
  }
  return s;
}

/** The schemas that may describe the value at `path` (a union's every option, where no option was chosen). */
function schemasAt(schema: SchemaLike, path: readonly PropertyKey[]): SchemaLike[] {
  const s = unwrap(schema);
  const def = s._zod.def;
  if (def.type === 'union') return (def.options ?? []).flatMap((o) => schemasAt(o, path));
  if (path.length === 0) return [s];
  const [key, ...rest] = path;
  const next =
    def.type === 'object'
      ? def.shape?.[String(key)]
      : def.type === 'array'
        ? def.element
        : def.type === 'record'
          ? def.valueType
          : undefined;
  return next === undefined ? [] : schemasAt(next, rest);
}

/** The field names an object at `path` may have. */
function knownFields(schema: SchemaLike, path: readonly PropertyKey[]): string[] {
  const fields = (s: SchemaLike): string[] => Object.keys(s._zod.def.type === 'object' ? (s._zod.def.shape ?? {}) : {});
  return [...new Set(schemasAt(schema, path).flatMap(fields))];
}

interface PlacedIssue {
  issue: SchemaIssue;
  path: PropertyKey[];
  /** The schema the issue's path starts from: the root, or the option of a union that came closest. */
  schema: SchemaLike;
  /** The path from that schema to the issue. */
  relative: PropertyKey[];
}

/** A union's issues are the issues of the option that came closest, re-pathed. */
function flattenIssues(
  issues: readonly SchemaIssue[],
  schema: SchemaLike,
  prefix: PropertyKey[],
  relativePrefix: PropertyKey[],
): PlacedIssue[] {
  return issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path];
    const relative = [...relativePrefix, ...issue.path];
    const unionOfOptions = issue.code === 'invalid_union' && issue.message === 'Invalid input';
    if (unionOfOptions && issue.errors && issue.errors.length > 0) {
      // Closest: the fewest keys the option does not know (a misspelt key is unknown to every option, a key of
      // another kind of target only to the others), then the fewest issues.
      const unknownKeys = (errors: SchemaIssue[]): number =>
        errors.reduce((n, e) => n + (e.code === 'unrecognized_keys' ? (e.keys?.length ?? 0) : 0), 0);
      const ranked = issue.errors
        .map((errors, option) => ({ errors, option, unknown: unknownKeys(errors) }))
        .sort((a, b) => a.unknown - b.unknown || a.errors.length - b.errors.length);
      const closest = ranked[0] ?? { errors: [], option: 0 };
      const union = unwrap(schemasAt(schema, relative)[0] ?? schema);
      const option = union._zod.def.options?.[closest.option];
      return option === undefined
        ? flattenIssues(closest.errors, schema, path, relative)
        : flattenIssues(closest.errors, option, path, []);
    }
    return [{ issue, path, schema, relative }];
  });
}

/** The value at `path` of the parsed YAML, and whether the last key is there at all. */
function valueAt(data: unknown, path: readonly PropertyKey[]): { present: boolean; value: unknown } {
  let value = data;
  for (const key of path) {
    const has = typeof value === 'object' && value !== null && Object.hasOwn(value, key as string);
    if (!has) return { present: false, value: undefined };
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return { present: true, value };
}

/** A YAML value's kind in the words of the YAML it came from. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a map';
  return `a ${typeof value}`;
}

const EXPECTED: Readonly<Record<string, string>> = {
  object: 'a map',
  record: 'a map',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
};

const quoted = (v: unknown): string => JSON.stringify(typeof v === 'string' ? v.slice(0, 80) : v) ?? String(v);

/** zod's own words are replaced; a message the schema wrote itself (a reason) is kept. */
const ZOD_WORDS = /^(Invalid input|Invalid option|Unrecognized key)/;

/**
 * The schema's issues on `data` as problems a person can act on. Unknown keys come with the nearest field the
 * object takes. A misspelt key is one problem: the required field reported missing because of it, and the object's
 * own checks (`give exactly one of name, selector...`) that failed for want of it, are left out.
 */
export function schemaProblems(issues: readonly SchemaIssue[], schema: unknown, data: unknown): FieldProblem[] {
  const found = flattenIssues(issues, schema as SchemaLike, [], []).map((placed) => ({
    placed,
    problem: problemOf(placed, data),
  }));
  const misspelt = found.flatMap(({ problem }) => problem.meant ?? []);
  const fieldsMeant = new Set(misspelt.map((m) => fieldName([...m.parent, m.field])));
  const objectsWithTypos = new Set(misspelt.map((m) => fieldName(m.parent)));
  return found
    .filter(({ placed: { issue, path } }) => {
      const aboutValue = issue.code === 'invalid_type' || issue.code === 'invalid_value';
      if (aboutValue && fieldsMeant.has(fieldName(path))) return valueAt(data, path).present;
      return !(issue.code === 'custom' && objectsWithTypos.has(fieldName(path)));
    })
    .flatMap(({ problem }) => problem.problems);
}

/** One issue's problems, and the fields its unknown keys were probably meant to be. */
interface IssueProblems {
  problems: FieldProblem[];
  /** For an unknown key near a known field: the field it was probably meant to be, in its object. */
  meant?: Array<{ parent: PropertyKey[]; field: string }>;
}

function problemOf({ issue, path, schema, relative }: PlacedIssue, data: unknown): IssueProblems {
  const { present, value } = valueAt(data, path);
  const one = (message: string): IssueProblems => ({ problems: [{ path, message }] });
  if (!ZOD_WORDS.test(issue.message)) return one(issue.message);
  if (issue.code === 'unrecognized_keys') {
    const absent = knownFields(schema, relative).filter((k) => !Object.hasOwn((value ?? {}) as object, k));
    const guesses = (issue.keys ?? []).map((key) => ({ key, guess: nearest(key, absent) }));
    return {
      problems: guesses.map(({ key, guess }) => ({
        path: [...path, key],
        atKey: true,
        message: `unknown field ${quoted(key)}${didYouMean(guess)}`,
      })),
      meant: guesses.flatMap(({ guess }) => (guess === undefined ? [] : [{ parent: path, field: guess }])),
    };
  }
  const missing = !present && (issue.code === 'invalid_type' || issue.code === 'invalid_value');
  if (missing) return one(`required field ${quoted(String(path.at(-1)))} is missing`);
  if (issue.code === 'invalid_type') {
    return one(`expected ${EXPECTED[issue.expected ?? ''] ?? issue.expected}, got ${kindOf(value)}`);
  }
  if (issue.code === 'invalid_value') {
    const values = (issue.values ?? []).map(String);
    const guess = typeof value === 'string' ? nearest(value, values) : undefined;
    const supported = values.map(quoted).join(', ');
    return one(`unsupported value ${quoted(value)}${didYouMean(guess)}; supported values: ${supported}`);
  }
  return one(issue.message);
}

const didYouMean = (guess: string | undefined): string =>
  guess === undefined ? '' : ` (did you mean ${quoted(guess)}?)`;
