/**
 * A route's path pattern, expanded into the KV v2 keys Vault holds: literal segments are walked without asking
 * (a fully literal path costs one metadata read, later), a wild segment costs one LIST of its folder, a `**` lists
 * everything below its folder. Every key found is checked against the whole pattern. Bounded: the keys one
 * expansion may find and the LISTs it may send; going past either stops it and says so (`truncated`).
 *
 * The mount is the pattern's longest literal prefix that the routing table's `vault.mounts` names; without such an
 * entry, the first segment (KV v2 assumed). A KV v1 mount has no metadata: its routes are reported, not expanded.
 *
 * A name Vault lists that could not be one path segment (empty, `.`, `..`, a `/` inside, a control character) is
 * ignored and counted (`ignored`): a key built from it would resolve to another path (vault-path.ts).
 */
import { matchSegment, PatternIndex, type CompiledPattern, type PatternSegment } from '../routing/path-pattern.ts';
import { qualify, type KvMounts } from '../sources/kv-mounts.ts';
import type { KvVersion } from '../sources/secret-change.ts';
import type { MetadataListing } from './metadata-client.ts';
import { vaultPathProblem } from '../sources/vault-path.ts';

/** What expansion needs from Vault: LIST of one folder (cached by the caller across routes). */
export type ListFolder = (namespace: string, mount: string, folder: string) => Promise<MetadataListing>;

export interface ExpansionLimits {
  /** Keys one pattern may expand to. */
  maxKeys: number;
  /** LIST requests one pattern may send. */
  maxLists: number;
}

export const DEFAULT_EXPANSION_LIMITS: ExpansionLimits = { maxKeys: 10_000, maxLists: 2_000 };

export type Expansion =
  | { kind: 'kv2'; mount: string; keys: string[]; lists: number; truncated?: string; ignored?: string }
  | { kind: 'kv1'; mount: string }
  | { kind: 'unexpandable'; reason: string };

/** The mount of a pattern and its KV version, from its literal prefix and the routing table's mounts. */
export function patternMount(
  pattern: CompiledPattern,
  namespace: string,
  mounts: KvMounts,
): { mount: string; kvVersion: KvVersion; rest: PatternSegment[] } | undefined {
  const literal: string[] = [];
  for (const segment of pattern.segments) {
    if (segment.kind !== 'literal') break;
    literal.push(segment.source);
  }
  for (let n = Math.min(literal.length, pattern.segments.length - 1); n >= 1; n--) {
    const kvVersion = mounts.get(qualify(namespace, literal.slice(0, n).join('/')));
    if (kvVersion !== undefined)
      return { mount: literal.slice(0, n).join('/'), kvVersion, rest: pattern.segments.slice(n) };
  }
  if (literal.length === 0 || pattern.segments.length < 2) return undefined;
  return { mount: literal[0] as string, kvVersion: 2, rest: pattern.segments.slice(1) };
}

/** One expansion's walk over Vault's folders: what it found, the LISTs it sent, and why it stopped early. */
class Walk {
  readonly found = new Set<string>();
  lists = 0;
  truncated: string | undefined;
  /** Listed names that are no path segment, ignored. */
  refused = 0;
  readonly #namespace: string;
  readonly #mount: string;
  readonly #rest: readonly PatternSegment[];
  readonly #list: ListFolder;
  readonly #limits: ExpansionLimits;

  constructor(namespace: string, mount: string, rest: PatternSegment[], list: ListFolder, limits: ExpansionLimits) {
    this.#namespace = namespace;
    this.#mount = mount;
    this.#rest = rest;
    this.#list = list;
    this.#limits = limits;
  }

  #stop(why: string): void {
    this.truncated ??= why;
  }

  /** Is a listed name one segment a path can be built from? */
  #segment(name: string): boolean {
    if (!name.includes('/') && vaultPathProblem(name) === undefined) return true;
    this.refused++;
    return false;
  }

  async #listed(folder: string[]): Promise<MetadataListing | undefined> {
    if (this.lists >= this.#limits.maxLists) {
      this.#stop(`more than ${this.#limits.maxLists} LIST requests`);
      return undefined;
    }
    this.lists++;
    const listing = await this.#list(this.#namespace, this.#mount, folder.join('/'));
    if (listing.truncated)
      this.#stop(`${this.#mount}/${folder.join('/')}/ holds ${listing.total} keys, more than one LIST may return`);
    return listing;
  }

  #add(key: string[]): void {
    if (this.found.size >= this.#limits.maxKeys) this.#stop(`more than ${this.#limits.maxKeys} keys`);
    else this.found.add(key.join('/'));
  }

  /** Every key under a folder, depth first (for `**`). */
  async #everything(folder: string[]): Promise<void> {
    const listing = await this.#listed(folder);
    for (const entry of listing?.keys ?? []) {
      if (this.truncated) return;
      const isFolder = entry.endsWith('/');
      const name = isFolder ? entry.slice(0, -1) : entry;
      if (!this.#segment(name)) continue;
      if (isFolder) await this.#everything([...folder, name]);
      else this.#add([...folder, name]);
    }
  }

  /** The keys under `folder` that segments `i`... of the pattern's rest may match. */
  async walk(folder: string[], i: number): Promise<void> {
    if (this.truncated) return;
    const rest = this.#rest;
    if (i === rest.length) return this.#add(folder);
    const wild = rest[i] as PatternSegment;
    if (wild.kind === 'literal') return this.walk([...folder, wild.source], i + 1);
    if (wild.kind === 'globstar') return this.#everything(folder);
    const listing = await this.#listed(folder);
    const last = i === rest.length - 1;
    for (const entry of listing?.keys ?? []) {
      if (this.truncated) return;
      const isFolder = entry.endsWith('/');
      const name = isFolder ? entry.slice(0, -1) : entry;
      if (isFolder === last || matchSegment(wild.tokens, name) === undefined || !this.#segment(name)) continue;
      if (isFolder) await this.walk([...folder, name], i + 1);
      else this.#add([...folder, name]);
    }
  }
}

export async function expandPattern(
  pattern: CompiledPattern,
  namespace: string,
  mounts: KvMounts,
  list: ListFolder,
  limits: ExpansionLimits = DEFAULT_EXPANSION_LIMITS,
): Promise<Expansion> {
  const located = patternMount(pattern, namespace, mounts);
  if (!located)
    return {
      kind: 'unexpandable',
      reason: `the mount of ${pattern.source} is not a literal first segment: name it literally (and list it under vault.mounts)`,
    };
  const { mount, kvVersion, rest } = located;
  if (kvVersion === 1) return { kind: 'kv1', mount };
  const walk = new Walk(namespace, mount, rest, list, limits);
  await walk.walk([], 0);
  const { lists, truncated, refused } = walk;

  // Only what the whole pattern matches (a `**` walk finds more).
  const index = new PatternIndex();
  index.add(0, pattern);
  const keys = [...walk.found].filter((key) => index.match(`${mount}/${key}`).has(0)).sort();
  const ignored =
    refused === 0
      ? undefined
      : `ignored ${refused} name(s) Vault listed that are no path segment (empty, ".", "..", a "/" or a control character)`;
  return { kind: 'kv2', mount, keys, lists, ...(truncated ? { truncated } : {}), ...(ignored ? { ignored } : {}) };
}
