/**
 * The one check on every path vault-rollout builds for a Vault request (a mount, a key, a folder to list): no empty
 * segment, no `.` or `..` segment, no control character. Encoding each segment keeps `/` and `?` in place but leaves
 * `.` and `..` as they are, and URL resolution then removes them: `secret/metadata/apps/../../data/db` is sent as
 * `secret/data/db`. A record key comes from an annotation anyone who may edit the workload writes (and a LIST from
 * Vault itself), so such a path is refused before it becomes a request, never "cleaned up" into another one.
 */

/** C0 and C1 control characters and DEL: they end a header, a log line or a terminal's sanity, and name no key. */
const CONTROL = /\p{Cc}/u;

/** Why `path` (slash-separated, no leading or trailing slash) cannot go to Vault, or undefined when it can. */
export function vaultPathProblem(path: string): string | undefined {
  if (path === '') return 'it is empty';
  for (const segment of path.split('/')) {
    if (segment === '') return 'it has an empty segment (`//`, or a leading or trailing `/`)';
    if (segment === '.' || segment === '..') return `it has a "${segment}" segment`;
    if (CONTROL.test(segment)) return 'it has a control character';
  }
  return undefined;
}

/** A mount, key or folder refused before any request is built from it. */
export class VaultPathError extends Error {
  override readonly name = 'VaultPathError';
}

/** `path` quoted for a message, every control character escaped (JSON leaves DEL and C1 as they are). */
const quoted = (path: string): string =>
  JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );

/** Throws VaultPathError naming `what` (a mount, a key) and why; `path` is shown escaped, never raw. */
export function checkVaultPath(what: string, path: string): void {
  const problem = vaultPathProblem(path);
  if (problem !== undefined)
    throw new VaultPathError(`refused ${what} ${quoted(path)} for a Vault request: ${problem}`);
}
