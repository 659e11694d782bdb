/**
 * What ships reads a screen at a time: no file of lib/ or functions/ over 400 lines, and no function (declaration,
 * method, arrow or function expression, the closures inside it counted in its span) over 60. A longer one is split by
 * step, with names that say what each step is.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;

const files = execFileSync(
  'git',
  ['ls-files', '--cached', '--others', '--exclude-standard', 'lib/*.ts', 'functions/*.ts'],
  {
    cwd: ROOT,
    encoding: 'utf8',
  },
)
  .split('\n')
  .filter((f) => f !== '' && !f.endsWith('.d.ts'));

function longFunctions(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node, name: string | undefined): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const from = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const to = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = to - from + 1;
      const called = node.name?.getText(source) ?? name ?? '(anonymous)';
      if (lines > MAX_FUNCTION_LINES) found.push(`${file}:${from + 1} ${called}: ${lines} lines`);
    }
    const named =
      ts.isVariableDeclaration(node) || ts.isPropertyAssignment(node) || ts.isPropertyDeclaration(node)
        ? node.name.getText(source)
        : name;
    ts.forEachChild(node, (child) => visit(child, named));
  };
  visit(source, undefined);
  return found;
}

describe('the shipped code reads a screen at a time', () => {
  it('finds the files it judges', () => {
    expect(files.length).toBeGreaterThan(100);
  });

  it(`has no file over ${MAX_FILE_LINES} lines`, () => {
    const long = files.flatMap((f) => {
      const lines = readFileSync(join(ROOT, f), 'utf8').split('\n').length - 1;
      return lines > MAX_FILE_LINES ? [`${f}: ${lines} lines`] : [];
    });
    expect(long).toEqual([]);
  });

  it(`has no function over ${MAX_FUNCTION_LINES} lines`, () => {
    expect(files.flatMap((f) => longFunctions(f, readFileSync(join(ROOT, f), 'utf8')))).toEqual([]);
  });
});
