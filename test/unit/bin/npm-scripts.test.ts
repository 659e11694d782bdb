/**
 * Every npm script that runs the project's code or its tools starts with bin/setup: on a fresh clone there is no
 * node_modules, and `node` on PATH is whatever the system has (Node 20 cannot load .ts; without node_modules nothing
 * resolves). After bin/setup, npm's PATH puts node_modules/.bin first, so `node` is the pinned Node 24.
 */
import { describe, expect, it } from 'vitest';
import { readRepoFile } from '../../helpers.ts';

const scripts = (JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> }).scripts;
const SETUP = 'sh bin/setup && ';
/** A command that needs Node 24 or node_modules: node on a file, or a tool installed under node_modules/.bin. */
const NEEDS_SETUP = /(^|&&\s*|\|\|\s*|;\s*)(node|tsc|eslint|vitest|npx)\s/;

describe('npm scripts on a fresh clone', () => {
  it('every script that runs node on a .ts or .js file, or a tool of node_modules, starts with bin/setup', () => {
    const missing = Object.entries(scripts)
      .filter(([name]) => name !== 'setup')
      .filter(([, command]) => NEEDS_SETUP.test(command) || /\.(ts|js)\b/.test(command))
      .filter(([, command]) => !command.startsWith(SETUP))
      .map(([name]) => name);
    expect(missing).toEqual([]);
  });

  it('the scripts a new user is told to run are among them', () => {
    for (const name of [
      'pack',
      'docs',
      'schema',
      'docs:reference',
      'bench',
      'package',
      'dashboard',
      'clusters:up',
      'clusters:down',
      'clusters:status',
      'typecheck',
      'lint',
    ]) {
      expect(scripts[name], name).toMatch(/^sh bin\/setup && /);
    }
  });

  it('no script names the system node by path', () => {
    expect(Object.entries(scripts).filter(([, command]) => /\/usr\/(local\/)?bin\/node\b/.test(command))).toEqual([]);
  });
});
