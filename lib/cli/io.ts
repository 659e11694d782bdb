/** What commands touch of the outside world, so tests run them in process with their own streams and files. */
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';

export const EXIT = {
  ok: 0,
  failure: 1,
  rejectedRecords: 2,
  targetsFailed: 3,
  rolloutsFailed: 4,
  awaitingApproval: 5,
  usage: 64,
} as const;

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  readText(file: string): Promise<string>;
  /** A file, or standard input for "-". */
  openInput(file: string): AsyncIterable<string | Buffer>;
  env: Readonly<Record<string, string | undefined>>;
  /** Is standard output / standard error a terminal (apply waits by default and redraws its progress there)? */
  stdoutIsTTY?: boolean;
  stderrIsTTY?: boolean;
  /** Is standard input a terminal (plan and apply then say they read it, instead of waiting silently)? */
  stdinIsTTY?: boolean;
  /** The command running (set by main): the shared helpers' messages start `vault-rollout <command>:` with it. */
  command?: string;
}

/** The io a command runs with: the caller's, naming the command (a view: output still goes where the caller's goes). */
export const commandIo = (io: CliIo, command: string): CliIo => Object.assign(Object.create(io) as CliIo, { command });

export function nodeIo(): CliIo {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    readText: (f) => readFile(f, 'utf8'),
    openInput: (f) => (f === '-' ? process.stdin : createReadStream(f)),
    env: process.env,
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    stdinIsTTY: process.stdin.isTTY === true,
  };
}

/**
 * `vault-rollout --help | head`: when the reader goes away, stop quietly, as cat or git do, instead of a stack trace
 * for EPIPE. Only a broken pipe: any other stream error is still thrown.
 */
export function quietOnBrokenPipe(streams: ReadonlyArray<NodeJS.WriteStream> = [process.stdout, process.stderr]): void {
  for (const stream of streams) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
      process.exit(process.exitCode ?? 0);
    });
  }
}
