/**
 * How a command prints its data (-o table|json|yaml: one document, two notations, or the table a person reads), the
 * colours of the table, and the wait indicator of the long commands.
 */
import { printableJson, printableYaml } from '../report/printable.ts';
import type { CliIo } from './io.ts';

/** `1 problem`, `2 problems`: a count with its noun, singular or plural, never `problem(s)`. */
export const counted = (n: number, noun: string, plural = `${noun}s`): string => `${n} ${n === 1 ? noun : plural}`;

/** The words that must stand out in a table: red for what failed or stopped, yellow for what lags. */
const STAND_OUT: ReadonlyArray<readonly [RegExp, string]> = [
  [/\b(FAILED|HALTED|POISONED)\b/g, '\x1b[31m'],
  [/\b(BEHIND)\b/g, '\x1b[33m'],
];

/** Colour only for a person: stdout a terminal, NO_COLOR unset (any non-empty value turns it off), TERM not dumb. */
export function colourOn(io: CliIo): boolean {
  return io.stdoutIsTTY === true && !io.env.NO_COLOR && io.env.TERM !== 'dumb';
}

export function colourize(text: string): string {
  let out = text;
  for (const [word, colour] of STAND_OUT) out = out.replace(word, `${colour}$1\x1b[0m`);
  return out;
}

/**
 * Prints a command's data: the JSON document, the same document as YAML, or the table (coloured on a terminal). JSON
 * and YAML escape what a terminal would obey (printable.ts): the data holds names and messages others wrote.
 */
export function printData(io: CliIo, output: string, data: () => unknown, table: () => string): void {
  if (output === 'json') return io.stdout(`${printableJson(data(), 2)}\n`);
  if (output === 'yaml') return io.stdout(printableYaml(data()));
  const text = table();
  io.stdout(colourOn(io) ? colourize(text) : text);
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * A spinner on stderr while a long command waits (import, reconcile, doctor): only on a terminal and without
 * --quiet. stop() clears its line and its timer, so nothing keeps the process alive.
 */
export function waitIndicator(io: CliIo, quiet: boolean, label: string): { stop(): void } {
  if (io.stderrIsTTY !== true || quiet) return { stop: () => undefined };
  let frame = 0;
  const draw = (): void => io.stderr(`\r${FRAMES[frame++ % FRAMES.length] as string} ${label}`);
  draw();
  const timer = setInterval(draw, 100);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      io.stderr('\r\x1b[K');
    },
  };
}

/** Runs `work` with the wait indicator shown. */
export async function withWaitIndicator<T>(
  io: CliIo,
  quiet: boolean,
  label: string,
  work: () => Promise<T>,
): Promise<T> {
  const indicator = waitIndicator(io, quiet, label);
  try {
    return await work();
  } finally {
    indicator.stop();
  }
}
