// The test clusters' processes: started detached (own session and process group, so they outlive the Node process
// that started them and `down` signals the whole group), tracked by pid files, stopped by signal; and the small
// helpers that run a command or GET a URL. Shared by clusters.ts, the registry and the real node.
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { resolve } from 'node:path';

import { REPO_ROOT } from './kube-http.ts';

export interface Managed {
  /** e.g. "etcd", "alpha/kube-apiserver" */
  label: string;
  binary: string;
  pidFile: string;
  logFile: string;
  /** Runs the binary through this command (e.g. nsenter into a network namespace), which execs it in place. */
  launcher?: string[];
}

export function procCmdline(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((s) => s.length > 0);
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // state is the field after "(comm)"
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pid recorded for `p`, if that process is alive and runs p.binary. */
export function runningPid(p: Managed): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(p.pidFile, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1 || !isAlive(pid)) return undefined;
  return procCmdline(pid)?.[0] === p.binary ? pid : undefined;
}

export function tail(file: string, lines = 25): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export function startProcess(p: Managed, args: string[], env?: Record<string, string>): number {
  mkdirSync(resolve(p.logFile, '..'), { recursive: true });
  mkdirSync(resolve(p.pidFile, '..'), { recursive: true });
  const fd = openSync(p.logFile, 'w', 0o644);
  try {
    // detached: own session and process group (pgid = pid), so `down` can
    // signal the whole group and the processes outlive this Node process.
    const [command, ...argv] = p.launcher ? [...p.launcher, p.binary, ...args] : [p.binary, ...args];
    const child = spawn(command!, argv, {
      detached: true,
      stdio: ['ignore', fd, fd],
      cwd: REPO_ROOT,
      ...(env ? { env: { ...process.env, ...env } } : {}),
    });
    child.on('error', () => {
      /* reported through the readiness wait */
    });
    if (child.pid === undefined) throw new Error(`could not start ${p.label} (${p.binary})`);
    child.unref();
    writeFileSync(p.pidFile, `${child.pid}\n`);
    return child.pid;
  } finally {
    closeSync(fd);
  }
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig); // the process group we created
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* gone */
    }
  }
}

export async function waitGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  let left = pids.filter(isAlive);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = left.filter(isAlive);
  }
  return left;
}

export async function stopPids(pids: number[]): Promise<void> {
  if (pids.length === 0) return;
  for (const pid of pids) signal(pid, 'SIGTERM');
  const left = await waitGone(pids, 20_000);
  for (const pid of left) signal(pid, 'SIGKILL');
  const still = await waitGone(left, 5_000);
  if (still.length > 0) throw new Error(`processes ${still.join(', ')} did not exit`);
}

export const isPid = (x: number | undefined): x is number => x !== undefined;
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface RunResult {
  stdout: string;
  stderr: string;
}

export function run(
  cmd: string,
  args: string[],
  opts: { input?: string; inheritOutput?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<RunResult> {
  return new Promise((res, rej) => {
    const child = spawn(cmd, args, {
      cwd: REPO_ROOT,
      ...(opts.env ? { env: opts.env } : {}),
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (opts.inheritOutput) process.stderr.write(d);
    });
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (opts.inheritOutput) process.stderr.write(d);
    });
    child.on('error', rej);
    child.on('close', (code, sig) => {
      if (code === 0) res({ stdout, stderr });
      else
        rej(
          new Error(
            `${cmd} ${args.join(' ')} exited with ${code ?? sig}\n${stderr.trim().split('\n').slice(-20).join('\n')}`,
          ),
        );
    });
    if (opts.input !== undefined && child.stdin) child.stdin.end(opts.input);
  });
}

export function httpGet(url: string, timeoutMs = 2_000): Promise<{ status: number; text: string }> {
  return new Promise((res, rej) => {
    const req = httpRequest(url, { timeout: timeoutMs, agent: false }, (r) => {
      let text = '';
      r.on('data', (d: Buffer) => {
        text += d.toString();
      });
      r.on('end', () => res({ status: r.statusCode ?? 0, text }));
      r.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', rej);
    req.end();
  });
}

export class DiedError extends Error {
  readonly fatal = true; // stops waitFor at once
  constructor(p: Managed) {
    super(`${p.label} exited`);
  }
}

export function rethrowWithLog(p: Managed): (err: unknown) => never {
  return (err: unknown) => {
    throw new Error(
      `${p.label} did not become ready: ${err instanceof Error ? err.message : String(err)}\n` +
        `--- last lines of ${p.logFile} ---\n${tail(p.logFile)}`,
      { cause: err },
    );
  };
}
