/**
 * A bearer token read from a file that is replaced while vault-rollout runs: the kubelet rewrites a projected
 * ServiceAccount token (an atomic symlink swap) well before it expires. The file is looked at on every request
 * (one stat) and read again when it changed, and at least once a minute whatever stat says.
 *
 * The token itself is never logged or put in an error.
 */
import { readFile as fsReadFile, stat as fsStat } from 'node:fs/promises';

/** The projected ServiceAccount token's folder in every pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
export const SERVICE_ACCOUNT_TOKEN = `${SERVICE_ACCOUNT_DIR}/token`;

/** Read again at least this often, like client-go, even when stat sees no change. */
export const TOKEN_FILE_MAX_AGE_MS = 60_000;

/** Why the file gives no token: said by the caller with the cluster in front. */
export class TokenFileError extends Error {
  override readonly name = 'TokenFileError';
}

export interface TokenFileDeps {
  clock: () => number;
  stat?: (path: string) => Promise<{ mtimeMs: number; size: number; ino: number }>;
  readFile?: (path: string) => Promise<string>;
}

/** Reads the token now (so a missing file is an error at start-up) and returns a source that follows the file. */
export async function tokenFileSource(path: string, deps: TokenFileDeps): Promise<() => Promise<string>> {
  const stat = deps.stat ?? ((p: string) => fsStat(p));
  const read = deps.readFile ?? ((p: string) => fsReadFile(p, 'utf8'));
  let current: { token: string; version: string; readAt: number } | undefined;
  let reading: Promise<string> | undefined;

  const load = async (): Promise<string> => {
    let version: string;
    try {
      const s = await stat(path);
      version = `${s.ino}:${s.mtimeMs}:${s.size}`;
      if (current !== undefined && current.version === version && deps.clock() - current.readAt < TOKEN_FILE_MAX_AGE_MS)
        return current.token;
      const token = (await read(path)).trim();
      if (token === '') throw new TokenFileError(`the token file ${path} is empty`);
      current = { token, version, readAt: deps.clock() };
      return token;
    } catch (error) {
      if (error instanceof TokenFileError) throw error;
      const code = (error as { code?: unknown }).code;
      throw new TokenFileError(
        `cannot read the token file ${path} (${typeof code === 'string' ? code : 'unreadable'})`,
      );
    }
  };

  await load();
  return () => {
    reading ??= load().finally(() => (reading = undefined));
    return reading;
  };
}
