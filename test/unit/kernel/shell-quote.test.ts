import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { shellAssignment, shellQuote } from '../../../lib/kernel/shell-quote.ts';

/** What a real shell makes of the words: printf's arguments, one per line (NUL-separated to keep newlines). */
const words = (line: string): string[] =>
  execFileSync('sh', ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' })
    .split('\0')
    .slice(0, -1);

describe('shellQuote', () => {
  const hostile = [
    'secret/payments/api/x$(touch /nonexistent/pwned)',
    'a`id`b',
    "it's",
    'a;b|c&d',
    'x\ny',
    '$HOME',
    '*',
    '~root',
    'a b',
    '',
    "''",
    '\\',
    '#c',
    '-n',
  ];
  it.each(hostile)('makes %j one literal word for a real shell', (value) => {
    expect(words(shellQuote(value))).toEqual([value]);
  });

  it('leaves plain paths as they are, so commands stay readable', () => {
    expect(shellQuote('secret/app/db-1.password')).toBe('secret/app/db-1.password');
    expect(shellQuote('x$(y)')).toBe("'x$(y)'");
  });

  it('quotes the value of an assignment', () => {
    expect(shellAssignment('VAULT_ROLLOUT_STATE_DB', '/tmp/a b;c')).toBe("VAULT_ROLLOUT_STATE_DB='/tmp/a b;c'");
  });
});
