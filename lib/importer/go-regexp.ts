/**
 * Go's regexp (RE2 syntax) as the operators import reads evaluate it: Stakater Reloader compiles each
 * `secret.reloader.stakater.com/reload` name as `^name$`, ESO each ClusterSecretStore `namespaceRegexes` entry as an
 * unanchored search. Both come from objects a tenant may write, and a JavaScript RegExp backtracks (`(a*)*b`,
 * `.*.*.*.*x` take exponential or polynomial time), so they are never handed to one: re2js, a port of RE2/J, matches
 * in time linear in the text whatever the pattern, parses Go's syntax (flags, `\pL`, POSIX classes) and refuses what
 * Go refuses (`a{1001}`, `(a{1000}){1000}`) with Go's own words. It replaced a hand-written Thompson NFA that took a
 * subset of the syntax: on the importer's inputs re2js answered the same three times faster.
 */
import { RE2JS } from 're2js';

export const GO_REGEXP_LIMITS = {
  /** Characters in a pattern: names are at most 253, and a namespace regex has no reason to be longer than this. */
  length: 1024,
} as const;

export interface GoRegexp {
  /** Go's `MatchString`: does the pattern match anywhere in the text? */
  test(text: string): boolean;
}

/** The pattern compiled, or why it cannot be (Go's error text, or the length bound). */
export function compileGoRegexp(source: string): GoRegexp | { error: string } {
  if (source.length > GO_REGEXP_LIMITS.length)
    return { error: `the pattern is longer than ${GO_REGEXP_LIMITS.length} characters` };
  let re: RE2JS;
  try {
    re = RE2JS.compile(source);
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
  return { test: (text) => re.matcher(text).find() };
}
