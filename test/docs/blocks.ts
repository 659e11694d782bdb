/**
 * The code blocks of the documentation, as the executable-docs tests read them (the convention is in CONTRIBUTING,
 * "Executable documentation"). A marker is an HTML comment on the line right before a fence:
 *
 *   <!-- run -->                  run this block (shell blocks of README.md and docs/tutorials/ run without it)
 *   <!-- not-run: <reason> -->    do not run it, and say why (needs AWS, a cluster of yours, runs for an hour)
 *   <!-- output -->               a `text` block: what the shell block right before it prints (each line, in order)
 *   <!-- file: <path> -->         write this block to <path> (relative to the checkout) before the next blocks run
 *   <!-- run-on-cluster -->       not run here: a cluster test runs it (the install how-to's blocks, by
 *                                 test/integration/helm-chart-in-cluster.test.ts on the test cluster with a real node)
 *
 * Every `vault-rollout …` line of a shell block, run or not, is parsed by the real CLI specs (lib/cli/specs.ts), so a
 * renamed or unknown command or flag fails.
 */
import { commandSpec } from '../../lib/cli/specs.ts';
import { parseCommand } from '../../lib/cli/spec.ts';
import type { CliIo } from '../../lib/cli/io.ts';

export type Marker =
  | { kind: 'run' }
  | { kind: 'run-on-cluster' }
  | { kind: 'not-run'; reason: string }
  | { kind: 'output' }
  | { kind: 'file'; path: string };

export interface CodeBlock {
  /** The Markdown file, relative to the checkout. */
  readonly file: string;
  /** The line of the opening fence (1-based). */
  readonly line: number;
  readonly lang: string;
  readonly text: string;
  readonly marker: Marker | undefined;
  /** A comment right before the fence that is none of the markers (a typo must not silently run or skip a block). */
  readonly unknownMarker?: string;
}

const SHELL_LANGS = new Set(['', 'sh', 'bash', 'shell', 'console']);
export const isShell = (block: CodeBlock): boolean => SHELL_LANGS.has(block.lang);

/** The pages whose shell blocks run unless marked not-run: the README and the tutorials. */
export const runsByDefault = (file: string): boolean => file === 'README.md' || file.startsWith('docs/tutorials/');

/** Does the executable-docs test run this block of this page? */
export const runs = (file: string, block: CodeBlock): boolean =>
  block.marker?.kind === 'run' || (runsByDefault(file) && isShell(block) && block.marker === undefined);

/** A step of a page, in order: a block to run (with the output block after it, if any), or a file to write. */
export interface Step {
  readonly block: CodeBlock;
  readonly expected?: CodeBlock;
}

export function steps(file: string, markdown: string): Step[] {
  const blocks = codeBlocks(file, markdown);
  const out: Step[] = [];
  for (const [i, block] of blocks.entries()) {
    if (!runs(file, block) && block.marker?.kind !== 'file') continue;
    const next = blocks[i + 1];
    out.push(next?.marker?.kind === 'output' ? { block, expected: next } : { block });
  }
  return out;
}

/** The pages in the order a newcomer reads them: README, the tutorials (five minutes first), the how-to guides. */
export function readingOrder(files: readonly string[]): string[] {
  const md = files.filter((f) => f.endsWith('.md'));
  const firstTutorial = (f: string) => (f.endsWith('/five-minutes.md') ? 0 : 1);
  const tutorials = md
    .filter((f) => f.startsWith('docs/tutorials/'))
    .sort((a, b) => firstTutorial(a) - firstTutorial(b) || a.localeCompare(b));
  const howTo = md.filter((f) => f.startsWith('docs/how-to/')).sort();
  return [...md.filter((f) => f === 'README.md'), ...tutorials, ...howTo];
}

/** Each line of an output block, in order, among the lines printed (runs of spaces compare as one); those missing. */
export function missingLines(expected: string, printed: string): string[] {
  const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
  const lines = printed.split('\n').map(squash);
  let at = 0;
  const missing: string[] = [];
  for (const want of expected
    .split('\n')
    .map(squash)
    .filter((l) => l !== '')) {
    const found = lines.findIndex((l, i) => i >= at && l.includes(want));
    if (found < 0) missing.push(want);
    else at = found + 1;
  }
  return missing;
}

function markerOf(comment: string): Marker | undefined {
  const body = comment.trim();
  if (body === 'run') return { kind: 'run' };
  if (body === 'run-on-cluster') return { kind: 'run-on-cluster' };
  if (body === 'output') return { kind: 'output' };
  const notRun = /^not-run:\s*(\S.*)$/.exec(body);
  if (notRun) return { kind: 'not-run', reason: notRun[1]!.trim() };
  const file = /^file:\s*(\S+)$/.exec(body);
  if (file) return { kind: 'file', path: file[1]! };
  return undefined;
}

/** The fenced blocks of a Markdown text, each with the marker on the line before its opening fence. */
export function codeBlocks(file: string, markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.trimStart().startsWith(fence!)) end++;
    const text = lines
      .slice(i + 1, end)
      .map((l) => (l.startsWith(indent!) ? l.slice(indent!.length) : l))
      .join('\n');
    const comment = /^\s*<!--([\s\S]*?)-->\s*$/.exec(lines[i - 1] ?? '');
    const marker = comment ? markerOf(comment[1]!) : undefined;
    const generatedNote = comment !== null && /^\s*Generated by/.test(comment[1]!);
    const unknown = comment && !marker && !generatedNote ? { unknownMarker: comment[1]!.trim() } : {};
    blocks.push({ file, line: i + 1, lang: lang ?? '', text, marker, ...unknown });
    i = end;
  }
  return blocks;
}

/** Shell words of one command line: quotes and backslashes as sh reads them; `$(…)` and `$VAR` kept as one word. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      word += line.slice(i + 1, end < 0 ? line.length : end);
      i = end < 0 ? line.length : end;
      inWord = true;
    } else if (c === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      word += line.slice(i + 1, j).replace(/\\(["\\$`])/g, '$1');
      i = j;
      inWord = true;
    } else if (c === '$' && line[i + 1] === '(') {
      let depth = 0;
      let j = i + 1;
      for (; j < line.length; j++) {
        if (line[j] === '(') depth++;
        else if (line[j] === ')' && --depth === 0) break;
      }
      word += line.slice(i, j + 1);
      i = j;
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** The shell text as logical lines: continuations joined, comments and a `$ ` prompt dropped. */
function logicalLines(text: string): Array<{ offset: number; text: string }> {
  const out: Array<{ offset: number; text: string }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]!}`;
    line = line.replace(/^\s*\$ /, '').replace(/(^|\s)#.*$/, '');
    if (line.trim() !== '') out.push({ offset: start, text: line });
  }
  return out;
}

/** Words before a command that leave it the command: `NAME=value` assignments and `npx`, `exec`, `time`, `sudo`. */
const prefixWord = (w: string): boolean =>
  /^[A-Za-z_][A-Za-z0-9_]*=/.test(w) || ['npx', 'exec', 'time', 'sudo'].includes(w);

export interface Invocation {
  readonly file: string;
  readonly line: number;
  /** The arguments after `vault-rollout`. */
  readonly argv: string[];
}

/**
 * Every `vault-rollout …` command of a shell block: at the start of a line or after `|`, `&&`, `||`, `;`, `$(`,
 * `npx`, `exec` or leading `NAME=value` assignments; ends at the next of those operators or a redirection.
 */
export function invocations(block: CodeBlock): Invocation[] {
  const found: Invocation[] = [];
  for (const { offset, text } of logicalLines(block.text)) {
    for (const segment of text.split(/\|\||&&|[|;]|\$\(|\)/)) {
      const words = shellWords(segment.replace(/\s\d?>>?\s*\S+|\s<\s*\S+/g, ''));
      let at = 0;
      while (at < words.length && prefixWord(words[at]!)) at++;
      if (words[at] !== 'vault-rollout') continue;
      // A usage synopsis (the CLI reference's `vault-rollout plan [options]`), not a command.
      if (words.includes('[options]')) continue;
      found.push({ file: block.file, line: block.line + 1 + offset, argv: words.slice(at + 1) });
    }
  }
  return found;
}

/** What the real CLI parser says of one invocation: undefined when it parses, else its error (a renamed flag too). */
export function checkInvocation(argv: readonly string[]): string | undefined {
  const [name, ...rest] = argv;
  if (name === undefined) return 'no command';
  if (['--version', '-V', 'version', '--help', '-h', 'help'].includes(name)) return undefined;
  const spec = commandSpec(name);
  if (!spec) return `unknown command "${name}"`;
  let said = '';
  const io: CliIo = {
    stdout: () => undefined,
    stderr: (t) => void (said += t),
    readText: () => Promise.reject(new Error('not read')),
    openInput: () => {
      throw new Error('not read');
    },
    env: {},
  };
  const parsed = parseCommand(spec, rest, io);
  return typeof parsed === 'number' && parsed !== 0 ? said.split('\n')[0] : undefined;
}
