/**
 * tools/npm/pack.ts without npm: the package's package.json, the bundled packages found in esbuild's inputs, their
 * licences, and the LICENSE file against package.json's license. (The tarball itself, installed and run, is
 * test/integration/npm-package.test.ts.)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../tools/image/bundle.ts';
import {
  bundledPackageDirs,
  packageManifest,
  packageReadme,
  REPOSITORY_FILES,
  thirdPartyLicenses,
} from '../../../tools/npm/pack.ts';
import { PACKAGE_README } from '../../../tools/npm/pack.ts';
import { readRepoFile } from '../../helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'vault-rollout-npm-pack-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const checkout = JSON.parse(readRepoFile('package.json')) as Record<string, unknown> & {
  name: string;
  version: string;
};

describe("the package's README", () => {
  it('points its relative links at the repository (the package has no docs/), and leaves URLs and anchors alone', () => {
    expect(
      packageReadme(
        '[a](docs/a.md) [b](./CONTRIBUTING.md#tests) [c](https://x.test/y) [d](#install) [e](mailto:a@b.test)',
      ),
    ).toBe(
      `[a](${REPOSITORY_FILES}docs/a.md) [b](${REPOSITORY_FILES}CONTRIBUTING.md#tests) [c](https://x.test/y) [d](#install) [e](mailto:a@b.test)`,
    );
  });

  it("has no relative link left in the package's README, and writes every link absolutely itself", () => {
    expect(packageReadme(readRepoFile(PACKAGE_README))).not.toMatch(/\]\((?![a-z][a-z0-9+.-]*:|#)/i);
    expect(readRepoFile(PACKAGE_README)).not.toMatch(/\]\((?!https:\/\/)/);
  });

  it("is the package's own page: the command and its first commands, no clone-only npm scripts, no Mermaid", () => {
    const text = readRepoFile(PACKAGE_README);
    expect(text).toContain('npm install -g ');
    expect(text).toMatch(/^vault-rollout validate /m);
    expect(text).not.toMatch(/npm (start|test)\b|```mermaid/);
  });
});

describe("the package's package.json", () => {
  const manifest = packageManifest(checkout);

  it('keeps what the package is and how it runs', () => {
    for (const field of ['name', 'version', 'description', 'license', 'type', 'bin', 'engines', 'files'])
      expect(manifest[field], field).toEqual(checkout[field]);
  });

  it("names where it comes from, absolutely, for the registry's page: repository, homepage and bugs on GitHub", () => {
    expect(manifest.repository).toEqual({ type: 'git', url: 'git+https://github.com/vault-rollout/vault-rollout.git' });
    expect(manifest.homepage).toBe('https://github.com/vault-rollout/vault-rollout#readme');
    expect(manifest.bugs).toEqual({ url: 'https://github.com/vault-rollout/vault-rollout/issues' });
    // The README's rewritten links point into the same repository.
    expect(REPOSITORY_FILES.startsWith(`${String(manifest.homepage).replace(/#readme$/, '')}/blob/`)).toBe(true);
  });

  it('is not private and declares no dependency and no script: the bundle carries what it runs', () => {
    expect(Object.keys(manifest).filter((k) => /private|dependencies|scripts|allowScripts/i.test(k))).toEqual([]);
  });

  it('ships the launcher its bin names and the bundle the launcher runs', () => {
    expect(checkout.bin).toEqual({ 'vault-rollout': 'bin/vault-rollout' });
    expect(checkout.files).toEqual(expect.arrayContaining(['bin/vault-rollout', 'dist/vault-rollout.mjs']));
    expect(readRepoFile('bin/vault-rollout')).toContain('"$here/dist/vault-rollout.mjs"');
    expect(checkout.engines).toEqual({ node: '>=24' });
  });
});

describe('bundled packages', () => {
  it.each([
    ['a package file', ['node_modules/yaml/dist/index.js'], ['node_modules/yaml']],
    ['a scoped package', ['node_modules/@smithy/core/dist-es/index.js'], ['node_modules/@smithy/core']],
    ['a nested copy', ['node_modules/a/node_modules/@s/b/x.js'], ['node_modules/a/node_modules/@s/b']],
    [
      'node_modules reached through a symlink (relative to the repository)',
      ['../../elsewhere/node_modules/zod/v4/index.js'],
      ['../../elsewhere/node_modules/zod'],
    ],
    ['our own sources', ['lib/cli/main.ts', 'package.json'], []],
    ['one entry per package', ['node_modules/ws/index.js', 'node_modules/ws/lib/sender.js'], ['node_modules/ws']],
  ])('%s', (_, inputs, dirs) => {
    expect(bundledPackageDirs(inputs)).toEqual(dirs.map((d) => resolve(REPO_ROOT, d)));
  });

  it('licences: one section per distinct text, naming every package under it, and a package without a licence file named too', () => {
    const pkg = (name: string, license: string, files: Record<string, string>) => {
      const dir = join(work, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', license }));
      for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
      return dir;
    };
    const text = thirdPartyLicenses([
      pkg('one', 'MIT', { LICENSE: 'MIT text\n' }),
      pkg('two', 'MIT', { 'LICENSE.md': 'MIT text' }),
      pkg('three', 'Apache-2.0', { LICENSE: 'Apache text', NOTICE: 'Notice text', 'index.js': 'not a licence' }),
      pkg('four', 'ISC', {}),
    ]);
    expect(text.match(/^## .*/gm)).toEqual([
      '## one@1.0.0 (MIT), two@1.0.0 (MIT)',
      '## three@1.0.0 (Apache-2.0)',
      '## four@1.0.0 (ISC)',
    ]);
    expect(text).toContain('Apache text\n\nNotice text');
    expect(text).toContain('(the package ships no licence file; its package.json says ISC)');
    expect(text).not.toContain('not a licence');
  });
});

describe('LICENSE', () => {
  it("is the text of package.json's license", () => {
    const firstLines: Record<string, string> = {
      'MPL-2.0': 'Mozilla Public License Version 2.0',
      'Apache-2.0': 'Apache License',
    };
    const license = checkout.license as string;
    expect(firstLines[license], `no known text for ${license}`).toBeDefined();
    expect(readRepoFile('LICENSE').split('\n')[0]?.trim()).toBe(firstLines[license]);
  });
});
