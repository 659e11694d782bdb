/**
 * Words put into a command a person may paste into a shell (the status page's and `status`'s suggestions): each
 * value is one word the shell takes literally, whatever it holds, as POSIX single quotes make it. Record keys and
 * rotation ids come from objects tenants write, so `$(…)`, backticks, `;` or a newline must never reach a shell as
 * syntax.
 */

/** Characters no POSIX shell gives a meaning to in a word: left unquoted, so plain paths stay readable. */
const PLAIN_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** `word` as one literal shell word: as is when plain, else in single quotes (a quote inside becomes '\''). */
export function shellQuote(word: string): string {
  if (PLAIN_WORD.test(word)) return word;
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** `NAME=value` as a shell assignment with the value quoted. */
export const shellAssignment = (name: string, value: string): string => `${name}=${shellQuote(value)}`;
