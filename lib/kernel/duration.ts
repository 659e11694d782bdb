/**
 * The one duration grammar, for the routing table and the command line alike: whole numbers with a unit, one or
 * more parts in any order (`500ms`, `90s`, `10m`, `1h`, `1m30s`), as a Go duration or a kubectl flag reads them,
 * without fractions or signs. A text the table takes is a text the CLI takes, and the other way round.
 */

/** The grammar as a pattern, for the JSON Schema editors read. */
export const DURATION_PATTERN = /^(\d{1,9}(ms|h|m|s))+$/;
const PART = /(\d{1,9})(ms|h|m|s)/g;
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** Longer than any sensible duration (`23h59m59s999ms` is 14): a bound on what is parsed. */
const MAX_LENGTH = 40;

/** `1m30s` -> 90000; undefined when the text is not a duration of this grammar. */
export function parseDuration(text: string): number | undefined {
  if (text.length > MAX_LENGTH || !DURATION_PATTERN.test(text)) return undefined;
  let total = 0;
  for (const m of text.matchAll(PART)) total += Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  return total;
}

/** A duration for messages: 90000 -> 1m30s, 1500 -> 1500ms, 0 -> 0s. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 1000 !== 0) return `${ms}ms`;
  let s = ms / 1000;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${s}s` : ''}`;
}

/**
 * Why `text` is not a duration from `minMs` to `maxMs`, in one sentence (a bare number is told which unit to add),
 * or undefined when it is one.
 */
export function durationProblem(text: string, minMs: number, maxMs: number): string | undefined {
  if (/^\d+(\.\d+)?$/.test(text)) return `use a unit: ${text}s`;
  const ms = parseDuration(text);
  if (ms === undefined) return 'must be a duration such as 500ms, 30s, 10m, 1h or 1m30s';
  if (ms < minMs || ms > maxMs) return `must be between ${formatDuration(minMs)} and ${formatDuration(maxMs)}`;
  return undefined;
}
