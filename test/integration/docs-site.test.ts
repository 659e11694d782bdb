// The documentation site (mkdocs.yml, tools/site/build.ts): built with mkdocs-material from PyPI in its cached venv,
// strictly, so that a broken link or anchor anywhere in docs/ fails the build, and therefore this test. It needs
// Python 3 with venv and PyPI (the venv is made by test/components.ts before the lanes start, or here); without
// python3 it fails, never skips. A copy of the docs with a broken link and a broken anchor proves the build refuses them.
import { execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildSite, REPO } from '../../tools/site/build.ts';

const work = mkdtempSync(join(tmpdir(), 'vr-docs-site-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the documentation site', () => {
  it('has python3 to build it with (install Python 3 with its venv module: this test never skips)', () => {
    expect(execFileSync(process.env.PYTHON ?? 'python3', ['--version'], { encoding: 'utf8' })).toMatch(/^Python 3\./);
  });

  it('builds strictly, with no broken link or anchor, and holds every page of the nav', async () => {
    const site = join(work, 'site');
    const output = await buildSite({ siteDir: site });
    expect(output.split('\n').filter((l) => /^(WARNING|ERROR)/.test(l))).toEqual([]);
    for (const page of [
      'index.html',
      'tutorials/five-minutes.html',
      'tutorials/first-real-cluster.html',
      'reference/environment.html',
      'reference/routing-table.html',
      'reference/http-api.html',
      'explanation/flow.html',
      'how-to/status-page.html',
      'compatibility.html',
      'images/status-page.png',
    ]) {
      expect(existsSync(join(site, page)), page).toBe(true);
    }
    expect(readFileSync(join(site, 'reference/environment.html'), 'utf8')).toContain('VAULT_ROLLOUT_WEBHOOK_SECRET');
    // Each how-to page's "How we know" note is a collapsed <details>, never the admonition's source text, and no block
    // marker of the executable docs (an HTML comment) shows as text.
    for (const page of readdirSync(join(REPO, 'docs/how-to')).filter((f) => f.endsWith('.md'))) {
      const source = readFileSync(join(REPO, 'docs/how-to', page), 'utf8');
      const html = readFileSync(join(site, 'how-to', page.replace(/\.md$/, '.html')), 'utf8');
      const note = /^\?\?\? note "How we know"|<summary>How we know<\/summary>/m.test(source);
      if (note) expect(html, page).toMatch(/<details class="note">\s*<summary>How we know<\/summary>/);
      expect(html, page).not.toContain('??? note');
      expect(html, page).not.toMatch(/&lt;!-- ?(run|not-run|output|file)/);
    }
  }, 600_000);

  it('fails on a broken link and a broken anchor', async () => {
    const copy = join(work, 'copy');
    cpSync(join(REPO, 'docs'), join(copy, 'docs'), { recursive: true });
    writeFileSync(
      join(copy, 'mkdocs.yml'),
      readFileSync(join(REPO, 'mkdocs.yml'), 'utf8').replace('site_dir: .local/site', 'site_dir: site'),
    );
    appendFileSync(
      join(copy, 'docs/index.md'),
      '\n[gone](how-to/no-such-page.md) and [nowhere](how-to/reconcile.md#no-such-heading)\n',
    );
    const failure = await buildSite({ configFile: join(copy, 'mkdocs.yml'), siteDir: join(copy, 'site') }).then(
      () => undefined,
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    expect(failure).toMatch(/how-to\/no-such-page\.md/);
    expect(failure).toMatch(/no-such-heading/);
  }, 600_000);
});
