/**
 * Vitest setup file (every project, every worker): copies everything the suites print — stdout, stderr and the
 * console — into .local/test-output/<pid>.log (a lane's: test/lanes.ts), so the secrets hygiene check can read all of it afterwards.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { format } from 'node:util';
import { LANE_LOCAL_DIR } from '../lanes.ts';

/** .local/test-output, or the lane's own (test/lanes.ts): each vitest process checks what its own workers printed. */
export const OUTPUT_DIR = join(LANE_LOCAL_DIR, 'test-output');
const file = join(OUTPUT_DIR, `${process.pid}.log`);
mkdirSync(OUTPUT_DIR, { recursive: true });

/** Appends text the suites produced without printing it (CLI output captured in memory, child process output). */
export function recordOutput(text: string | Uint8Array): void {
  appendFileSync(file, text);
}

const tee = (stream: NodeJS.WriteStream) => {
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    recordOutput(chunk);
    return write(chunk, ...rest);
  }) as typeof stream.write;
};
/** The first line of every worker's capture: proves the capture ran, however quiet the suites were. */
export const CAPTURE_MARKER = 'vault-rollout test output capture: on';
recordOutput(`${CAPTURE_MARKER}\n`);
tee(process.stdout);
tee(process.stderr);

for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
  const original = console[level].bind(console);
  console[level] = (...args: unknown[]) => {
    recordOutput(`${format(...args)}\n`);
    original(...args);
  };
}
