/**
 * The functions, zips and roles the deploy page and infra/serverless/README.md list are the ones serverless.yml
 * declares: a function added to serverless.yml and not to the pages (reconcile and notify once were) fails here.
 */
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readRepoFile } from '../../helpers.ts';

const yml = parse(readRepoFile('serverless.yml'), { logLevel: 'silent' }) as {
  functions: Record<string, { handler: string; role: string }>;
};
const functions = Object.keys(yml.functions).sort();
const roles = functions.map((fn) => yml.functions[fn]?.role ?? '?').sort();
const page = readRepoFile('docs/how-to/deploy-to-lambda.md');
const readme = readRepoFile('infra/serverless/README.md');
const NUMBERS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

const found = (text: string, pattern: RegExp): string[] =>
  [...new Set([...text.matchAll(pattern)].map((m) => m[1] ?? ''))].sort();
const tableRows = (text: string, pattern: RegExp): string[] =>
  found(
    text
      .split('\n')
      .filter((l) => l.startsWith('| '))
      .map((l) => l.split(' | ')[0])
      .join('\n'),
    pattern,
  );

describe('the lists of Lambda functions match serverless.yml', () => {
  it('serverless.yml declares five functions, each with its own role', () => {
    expect(functions).toEqual(['http', 'logs', 'notify', 'reconcile', 'worker']);
    expect(new Set(roles).size).toBe(functions.length);
    for (const fn of functions) expect(yml.functions[fn]?.handler).toBe(`functions/${fn}.handler`);
  });

  it('the deploy page has one row per function, and names every zip and role', () => {
    expect(tableRows(page, /^\| `functions\/(\w+)\.ts`/gm)).toEqual(functions);
    expect(found(page, /`(\w+)\.zip`/g)).toEqual(functions);
    expect(found(page, /`([A-Z]\w+Role)`/g)).toEqual(roles);
  });

  it('infra/serverless/README.md counts and names the functions, lists every zip and has one IAM row per role', () => {
    expect(readme).toContain(
      `describes the ${NUMBERS[functions.length]}\nfunctions (${Object.keys(yml.functions)
        .map((fn) => `\`${fn}\``)
        .join(', ')})`,
    );
    expect(found(readme, /`(\w+)\.zip`/g)).toEqual(functions);
    expect(tableRows(readme, /^\| `(\w+Role)`/gm)).toEqual(roles);
  });
});
