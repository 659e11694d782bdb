import { Document, visit } from 'yaml';

/**
 * Text a terminal shows as it is. Much of what a report prints was written by someone else: annotation values and
 * record keys (anyone who may edit the workload), Event messages, conditions of a custom resource. A control
 * character in them would move the cursor, rewrite earlier lines, retitle the window or (a newline) forge a row; a
 * bidirectional override would reorder what is read. Each such character is shown as an escape instead.
 */

/**
 * C0 and C1 controls and DEL (`\p{Cc}`), the Unicode line and paragraph separators, the bidirectional marks and
 * overrides.
 */
const UNSAFE = /[\p{Cc}\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

const hex = (c: string, width: number): string => (c.codePointAt(0) ?? 0).toString(16).padStart(width, '0');

/** `s` with every unsafe character shown as `\xNN` (up to U+00FF) or `\uNNNN`. */
export const printable = (s: string): string =>
  s.replace(UNSAFE, (c) => ((c.codePointAt(0) ?? 0) < 0x100 ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));

/**
 * JSON whose text is as safe to print as `printable`'s and parses to the same value: JSON.stringify escapes C0
 * controls inside strings itself (the only C0 left are the newlines of its indentation, kept) but leaves DEL, C1
 * controls and the other unsafe characters raw; they become `\uNNNN` escapes (only strings can hold them).
 */
export const printableJson = (value: unknown, indent?: number): string =>
  JSON.stringify(value, null, indent).replace(UNSAFE, (c) => (c === '\n' ? c : `\\u${hex(c, 4)}`));

/**
 * YAML as safe to print as printableJson, and plain as a person writes it: no anchors or aliases (an object met twice
 * is written twice), a string quoted only when YAML needs it. A string holding an unsafe character is double-quoted,
 * where `\uNNNN` is an escape, so each one left raw becomes one and the document parses to the same value.
 */
export const printableYaml = (value: unknown): string => {
  const doc = new Document(value, { aliasDuplicateObjects: false });
  visit(doc, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && new RegExp(UNSAFE.source, 'u').test(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc.toString({ lineWidth: 0 }).replace(UNSAFE, (c) => (c === '\n' ? c : `\\u${hex(c, 4)}`));
};
