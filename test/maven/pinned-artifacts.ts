/**
 * The Maven artifacts the tests run (ElasticMQ, DynamoDB Local) are used only when they match SHA-256 pins kept in
 * this repository: test/maven/<artifactId>-<version>.sha256, written by test/maven/pin.sh. A download (in Maven's
 * repository layout) and a cached copy (flat, one directory of jars and native libraries) must each hold every
 * pinned file with its pinned hash and no other file; anything else is a problem named by file.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ArtifactPin {
  sha256: string;
  /** Path in Maven's repository layout, e.g. org/elasticmq/elasticmq-server_2.13/1.7.1/elasticmq-server_2.13-1.7.1.jar */
  path: string;
}

const PINS_DIR = dirname(fileURLToPath(import.meta.url));
const PIN_LINE = /^([0-9a-f]{64}) {2}((?:[A-Za-z0-9._-]+\/)+[A-Za-z0-9._-]+)$/;
/** Files Maven writes beside what it copies in the repository layout: bookkeeping, never loaded. */
const MAVEN_BOOKKEEPING = /^(_remote\.repositories|maven-metadata-.*\.xml|.*\.lastUpdated)$/;

export const pinsFileOf = (artifact: { artifactId: string; version: string }): string =>
  join(PINS_DIR, `${artifact.artifactId}-${artifact.version}.sha256`);

/** The pins of a .sha256 file; throws naming file:line for a line that is neither a comment nor `<sha256>  <path>`. */
export function parsePins(text: string, source: string): ArtifactPin[] {
  const pins: ArtifactPin[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((line, index) => {
    if (line === '' || line.startsWith('#')) return;
    const match = PIN_LINE.exec(line);
    if (match === null || match[2]?.split('/').some((segment) => segment === '.' || segment === '..')) {
      throw new Error(`${source}:${index + 1}: expected "<sha256>  <path in the Maven repository layout>"`);
    }
    const [, sha256 = '', path = ''] = match;
    const name = basename(path);
    if (seen.has(name))
      throw new Error(
        `${source}:${index + 1}: ${name} is pinned twice (the installed copy is flat, one file per name)`,
      );
    seen.add(name);
    pins.push({ sha256, path });
  });
  if (pins.length === 0) throw new Error(`${source}: no pins`);
  return pins;
}

export const readPins = (file: string): ArtifactPin[] => parsePins(readFileSync(file, 'utf8'), file);

const sha256Of = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

/**
 * What differs between `dir` and the pins: missing files, files the pins do not name, files whose SHA-256 is not
 * the pinned one. `repository`: `dir` is in Maven's repository layout (a download); `flat`: one directory (the cache).
 * Empty when `dir` is exactly what was pinned; changed files come first.
 */
export function pinProblems(dir: string, pins: readonly ArtifactPin[], layout: 'repository' | 'flat'): string[] {
  const keyOf = (pin: ArtifactPin): string => (layout === 'flat' ? basename(pin.path) : pin.path);
  const present = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: layout === 'repository', withFileTypes: true })) {
    if (!entry.isFile() || MAVEN_BOOKKEEPING.test(entry.name)) continue;
    const file = join(entry.parentPath, entry.name);
    present.set(relative(dir, file).split(sep).join('/'), file);
  }
  const changed: string[] = [];
  const missing: string[] = [];
  for (const pin of pins) {
    const file = present.get(keyOf(pin));
    present.delete(keyOf(pin));
    if (file === undefined) missing.push(`${keyOf(pin)}: missing`);
    else {
      const actual = sha256Of(file);
      if (actual !== pin.sha256) changed.push(`${keyOf(pin)}: SHA-256 ${actual}, pinned ${pin.sha256}`);
    }
  }
  // The most suspicious first: a file that differs, then one nobody pinned, then what is missing.
  return [...changed, ...[...present.keys()].map((key) => `${key}: not pinned`), ...missing];
}
