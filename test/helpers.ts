/** Small shared helpers for tests: repository paths and an in-memory CLI io. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CliIo } from '../lib/cli/io.ts';
import { recordOutput } from './hygiene/capture.ts';

export const repoRoot = fileURLToPath(new URL('..', import.meta.url));
/** Public Vault payload samples copied into the repository with their sources (test/events/vault-samples/README.md). */
export const vaultSamples = fileURLToPath(new URL('events/vault-samples/', import.meta.url));

export const readRepoFile = (relative: string): string =>
  readFileSync(new URL(`../${relative}`, import.meta.url), 'utf8');

export interface CapturedIo extends CliIo {
  out: string;
  err: string;
}

/** A CliIo with in-memory files ("-" is standard input) and captured output. */
export function memoryIo(files: Record<string, string> = {}, env: Record<string, string | undefined> = {}): CapturedIo {
  const io: CapturedIo = {
    // The worker's own state directory (test/state/isolate.ts), never the user's.
    env: { XDG_STATE_HOME: process.env.XDG_STATE_HOME, ...env },
    out: '',
    err: '',
    stdout: (t) => {
      io.out += t;
      recordOutput(t);
    },
    stderr: (t) => {
      io.err += t;
      recordOutput(t);
    },
    readText: async (f) => {
      if (f in files) return files[f] ?? '';
      throw Object.assign(new Error(`ENOENT: ${f}`), { code: 'ENOENT' });
    },
    openInput: (f) => {
      if (!(f in files)) throw Object.assign(new Error(`ENOENT: ${f}`), { code: 'ENOENT' });
      const text = files[f] ?? '';
      return (async function* () {
        // Split in odd-sized chunks so record boundaries fall mid-chunk, as on a real stream.
        for (let i = 0; i < text.length; i += 7) yield Buffer.from(text.slice(i, i + 7));
      })();
    },
  };
  return io;
}
