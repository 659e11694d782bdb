/** A figure is stale when the code it measured runs differently, not when a comment or the layout moved. */
import { describe, expect, it } from 'vitest';
import { runnableText } from '../../../bench/provenance.ts';

const code = 'const x = `a ${f({ b: 1 })} c`; // why\nconst r = /^\\/\\/}/g;\nexport const y = x.length / 2;\n';

describe('runnableText', () => {
  it('is the same for the same code with other comments and layout', () => {
    const rewrapped =
      '/**\n * a doc comment\n */\nconst x = `a ${f({b: 1})} c`;\nconst r =\n  /^\\/\\/}/g;\nexport const y = x.length / 2;';
    expect(runnableText('a.ts', rewrapped)).toBe(runnableText('a.ts', code));
  });

  it('differs when a token differs, inside a template, a regular expression or the code', () => {
    for (const changed of [code.replace('c`', 'd`'), code.replace('}/g', '{/g'), code.replace('/ 2', '/ 3')])
      expect(runnableText('a.ts', changed)).not.toBe(runnableText('a.ts', code));
  });

  it('keeps a file that is not source whole', () => {
    expect(runnableText('package-lock.json', '{ "a": 1 }')).toBe('{ "a": 1 }');
  });
});
