/**
 * The README is the entrance (at most 300 lines), and no link of README.md, CONTRIBUTING.md or docs/ points at
 * nothing: every relative link (and image) names an existing file, every link to this repository on GitHub names a
 * file of the checkout, and the anchors README and CONTRIBUTING link to exist (as GitHub names headings). The site
 * build (test/integration/docs-site.test.ts) checks the anchors of docs/ the way mkdocs names them.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../../..');
const GITHUB = 'https://github.com/vault-rollout/vault-rollout/blob/main/';

const markdownFiles = (): string[] => [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(REPO, 'docs'), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.md'))
    .map((e) => relative(REPO, join(e.parentPath, e.name))),
];

/** The text outside fenced code blocks and inline code spans: a link written as code is not a link. */
export function proseOf(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/``[^`]*``|`[^`\n]*`/g, '');
}

/** Every link target of a Markdown text: `[text](target)`, `![alt](target)` and `<img src="target">`. */
export function linksOf(markdown: string): string[] {
  const prose = proseOf(markdown);
  return [
    ...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g),
    ...prose.matchAll(/<img[^>]*\ssrc="([^"]+)"/g),
  ].map((m) => m[1]!);
}

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens. */
export function githubSlug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorsOf = (file: string): Set<string> =>
  new Set([...proseOf(readFileSync(file, 'utf8')).matchAll(/^#{1,6} (.+)$/gm)].map((m) => githubSlug(m[1]!)));

describe('README, CONTRIBUTING and docs/', () => {
  it('README.md is the entrance: at most 300 lines, with the two commands', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    expect(readme).toContain('npm start');
    expect(readme).toContain('npm test');
  });

  it('finds links in prose, not in code', () => {
    const text = [
      '[a](x.md) ![b](img/y.png) <img src="z.png" width="3">',
      '`[no](code.md)`',
      '```',
      '[no](fenced.md)',
      '```',
      '[c](https://example.com) [d](#here)',
    ].join('\n');
    expect(linksOf(text)).toEqual(['x.md', 'img/y.png', 'https://example.com', '#here', 'z.png']);
    expect(githubSlug('Tests: what they need, what they keep')).toBe('tests-what-they-need-what-they-keep');
    expect(githubSlug('`vault-rollout relay`')).toBe('vault-rollout-relay');
  });

  it('every relative link names an existing file (and README/CONTRIBUTING anchors exist)', () => {
    const broken: string[] = [];
    for (const file of markdownFiles()) {
      const dir = dirname(join(REPO, file));
      for (const link of linksOf(readFileSync(join(REPO, file), 'utf8'))) {
        let target: string;
        if (link.startsWith(GITHUB)) target = join(REPO, link.slice(GITHUB.length));
        else if (/^[a-z][a-z0-9+.-]*:/i.test(link) || link.startsWith('//')) continue;
        else target = link.startsWith('#') ? join(REPO, file) + link : resolve(dir, link);
        const [path, anchor] = target.split('#') as [string, string | undefined];
        if (!existsSync(path)) {
          broken.push(`${file}: ${link} (no such file)`);
          continue;
        }
        const checksAnchor =
          anchor !== undefined &&
          anchor !== '' &&
          path.endsWith('.md') &&
          (file === 'README.md' || file === 'CONTRIBUTING.md' || link.startsWith(GITHUB));
        if (checksAnchor && !anchorsOf(path).has(anchor)) broken.push(`${file}: ${link} (no heading with that anchor)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
