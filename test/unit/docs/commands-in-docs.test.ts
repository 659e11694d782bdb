/**
 * Every `vault-rollout …` command the documentation (and the npm package's README) shows parses with the real CLI
 * specs (a renamed or unknown command or flag fails here, whether the block runs or not), and the blocks' markers
 * follow the convention that test/integration/executable-docs.test.ts runs them by (CONTRIBUTING, "Executable
 * documentation").
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkInvocation, codeBlocks, invocations, isShell, runs, runsByDefault } from '../../docs/blocks.ts';
import { shellWords } from '../../docs/blocks.ts';
import type { CodeBlock } from '../../docs/blocks.ts';

const REPO = resolve(import.meta.dirname, '../../..');

const docsPages = (): string[] =>
  readdirSync(join(REPO, 'docs'), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.md'))
    .map((e) => relative(REPO, join(e.parentPath, e.name)));
const markdownFiles = (): string[] => ['README.md', 'CONTRIBUTING.md', 'tools/npm/README.md', ...docsPages()];
const blocksOf = (file: string): CodeBlock[] => codeBlocks(file, readFileSync(join(REPO, file), 'utf8'));
const where = (b: CodeBlock): string => `${b.file}:${b.line}`;

/** The page whose run-on-cluster blocks test/integration/helm-chart-in-cluster.test.ts runs. */
const CLUSTER_RUN_PAGE = 'docs/how-to/install-in-a-cluster.md';

/** What is wrong with a block's marker, where it stands among the page's blocks; undefined when nothing is. */
function markerProblem(file: string, blocks: readonly CodeBlock[], i: number): string | undefined {
  const b = blocks[i]!;
  const kind = b.marker?.kind;
  if (b.unknownMarker !== undefined) return `unknown marker <!--${b.unknownMarker}-->`;
  const notShell = !isShell(b);
  if ((kind === 'run' || kind === 'not-run' || kind === 'run-on-cluster') && notShell)
    return `${kind} marks a ${b.lang} block, not a shell block`;
  if (kind === 'run-on-cluster' && file !== CLUSTER_RUN_PAGE)
    return `only ${CLUSTER_RUN_PAGE} has a test that runs blocks on a cluster`;
  if (kind === 'run' && runsByDefault(file)) return `shell blocks of ${file} run without <!-- run -->`;
  if (kind === 'run' && !file.startsWith('docs/how-to/')) return 'only how-to pages mark blocks to run';
  if (kind === 'file' && isShell(b)) return 'a file: marker writes a file, not a shell block';
  const before = blocks[i - 1];
  if (kind === 'output' && (b.lang !== 'text' || before === undefined || !runs(file, before))) {
    return 'an output block is a text block right after a shell block that runs';
  }
  return undefined;
}

describe("the documentation's commands and markers", () => {
  it('reads markers, shell words and vault-rollout commands the way sh would', () => {
    const md = [
      '<!-- not-run: needs AWS -->',
      '```sh',
      'AWS_REGION=eu-west-1 vault-rollout status \\',
      '  --path "secret/a b" # why',
      '```',
      '<!-- output -->',
      '```text',
      'ok',
      '```',
    ].join('\n');
    const [shell, output] = codeBlocks('x.md', md);
    expect(shell).toMatchObject({ line: 2, lang: 'sh', marker: { kind: 'not-run', reason: 'needs AWS' } });
    expect(output).toMatchObject({ line: 7, lang: 'text', marker: { kind: 'output' } });
    expect(invocations(shell!)).toEqual([{ file: 'x.md', line: 3, argv: ['status', '--path', 'secret/a b'] }]);
    expect(shellWords(`a 'b c' "d \\"e\\"" $(cat f) x\\ y`)).toEqual(['a', 'b c', 'd "e"', '$(cat f)', 'x y']);
    const piped = codeBlocks('y.md', '```\ntail a.log | npx vault-rollout plan --routes r.yaml > p && echo ok\n```');
    expect(invocations(piped[0]!).map((i) => i.argv)).toEqual([['plan', '--routes', 'r.yaml']]);
  });

  it("refuses a renamed flag, an unknown flag, an unknown command and a bad value, in the parser's words", () => {
    expect(checkInvocation(['plan', '--routes', 'r.yaml', '--input', 'a.log'])).toBeUndefined();
    expect(checkInvocation(['plan', '--routes', 'r.yaml', '--inputs', 'a.log'])).toMatch(/unknown option "--inputs"/);
    expect(checkInvocation(['plann'])).toBe('unknown command "plann"');
    expect(checkInvocation(['relay', '--audit-file', 'a.log', '--batch-wait-ms', '500'])).toMatch(
      /--batch-wait-ms is no longer accepted: use --batch-wait/,
    );
    expect(checkInvocation(['serve', '--port', 'http'])).toMatch(/^vault-rollout serve: /);
    expect(checkInvocation(['--version'])).toBeUndefined();
  });

  it('every vault-rollout command in README, CONTRIBUTING and docs/ parses with lib/cli/specs.ts', () => {
    const wrong: string[] = [];
    let seen = 0;
    for (const file of markdownFiles()) {
      for (const block of blocksOf(file).filter(isShell)) {
        for (const call of invocations(block)) {
          seen++;
          const error = checkInvocation(call.argv);
          if (error) wrong.push(`${call.file}:${call.line}: vault-rollout ${call.argv.join(' ')}: ${error}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    expect(seen).toBeGreaterThan(20);
  });

  it('markers are known, and each sits where it means something', () => {
    const wrong: string[] = [];
    for (const file of markdownFiles()) {
      const blocks = blocksOf(file);
      for (const [i, b] of blocks.entries()) {
        const problem = markerProblem(file, blocks, i);
        if (problem) wrong.push(`${where(b)}: ${problem}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('finds a misplaced marker', () => {
    const blocks = codeBlocks('docs/reference/x.md', '<!-- run -->\n```sh\nls\n```\n<!-- outptu -->\n```text\nx\n```');
    expect([0, 1].map((i) => markerProblem('docs/reference/x.md', blocks, i))).toEqual([
      'only how-to pages mark blocks to run',
      'unknown marker <!--outptu-->',
    ]);
  });
});
