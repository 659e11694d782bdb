/**
 * `vault-rollout serve` as a real child process on 127.0.0.1, under the uploads a hostile sender can make: a chunked
 * body of 500 MiB (generated chunk by chunk, never held here), a gzip bomb, an unauthenticated gzip body. The limits
 * must hold while the body streams: the child's peak memory (VmHWM) is read from /proc and bounded, never a duration.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../../lib/http/webhook-auth.ts';
import { repoRoot } from '../../helpers.ts';
import { BEARER_TOKEN, WEBHOOK_SECRET } from '../../secrets.ts';

const MiB = 1024 * 1024;
const UPLOAD_BYTES = 500 * MiB;
const CHUNK = Buffer.alloc(64 * 1024, '{"type":"response"}\n');
/** What the server may grow by while refusing the upload: its 5 MiB limit plus stream buffers, far below 500 MiB. */
const GROWTH_BOUND_BYTES = 96 * MiB;

let child: ChildProcess;
let port = 0;

/** kB figures of /proc/<pid>/status: VmRSS now, VmHWM the peak so far. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

beforeAll(async () => {
  child = spawn(
    process.execPath,
    [
      join(repoRoot, 'lib/cli/main.ts'),
      'serve',
      '--port',
      '0',
      '--routes',
      join(repoRoot, 'infra/routes/example.yaml'),
      '--allow-example-routes',
      '--dry-run',
    ],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH,
        VAULT_ROLLOUT_WEBHOOK_SECRET: WEBHOOK_SECRET,
        VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  port = await new Promise<number>((resolve, reject) => {
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
}, 60_000);

afterAll(() => {
  child.kill('SIGKILL');
});

/** POSTs `chunks` with chunked transfer (no Content-Length), stopping as soon as the server answers. */
function postChunked(
  headers: Record<string, string>,
  chunks: () => Buffer | undefined,
): Promise<{ status: number; body: string; sentBytes: number }> {
  return new Promise((resolve, reject) => {
    let sentBytes = 0;
    let answered = false;
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/vault/audit',
        headers: { ...headers, 'transfer-encoding': 'chunked' },
      },
      (res) => {
        answered = true;
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, body, sentBytes });
        });
      },
    );
    req.on('error', (e) => {
      if (!answered) reject(e);
    });
    const pump = (): void => {
      // Bounded: at most UPLOAD_BYTES / CHUNK.length iterations, and it stops once the server has answered.
      while (!answered) {
        const chunk = chunks();
        if (chunk === undefined) {
          req.end();
          return;
        }
        sentBytes += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

describe('serve under hostile uploads', () => {
  it('refuses a chunked 500 MiB body with 413 while it streams, and its memory stays bounded', async () => {
    const before = memoryOf(child.pid ?? 0);
    let generated = 0;
    const res = await postChunked({ authorization: `Bearer ${BEARER_TOKEN}` }, () => {
      if (generated >= UPLOAD_BYTES) return undefined;
      generated += CHUNK.length;
      return CHUNK;
    });
    const after = memoryOf(child.pid ?? 0);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ error: `the body is larger than ${5 * MiB} bytes` });
    expect(res.sentBytes).toBeLessThan(UPLOAD_BYTES);
    expect(after.peak - before.rss).toBeLessThan(GROWTH_BOUND_BYTES);
  }, 60_000);

  it('refuses a gzip bomb with 413 without inflating past the limit', async () => {
    const bomb = gzipSync(Buffer.alloc(256 * MiB, ' '));
    expect(bomb.byteLength).toBeLessThan(MiB);
    const at = String(Math.floor(Date.now() / 1000));
    const before = memoryOf(child.pid ?? 0);
    let sent = false;
    const res = await postChunked(
      { [TIMESTAMP_HEADER]: at, [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, at, bomb), 'content-encoding': 'gzip' },
      () => (sent ? undefined : ((sent = true), bomb)),
    );
    const after = memoryOf(child.pid ?? 0);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ error: `the decompressed body is larger than ${5 * MiB} bytes` });
    expect(after.peak - before.rss).toBeLessThan(GROWTH_BOUND_BYTES);
  });

  it('refuses an unauthenticated gzip body with 401 before inflating it', async () => {
    // A bomb without credentials: inflating first would answer 413; authenticating first answers 401. The bomb goes
    // out only if no answer came within 3 s of the headers: serve answers from the headers and closes, and a client
    // still writing when it closes sees "socket hang up" instead of the 401 it was sent (seen under load).
    const bomb = gzipSync(Buffer.alloc(64 * MiB, ' '));
    const res = await new Promise<{ status: number }>((resolve, reject) => {
      let answered = false;
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/vault/audit',
          headers: { 'content-encoding': 'gzip', 'transfer-encoding': 'chunked' },
        },
        (r) => {
          answered = true;
          r.resume();
          r.on('end', () => {
            req.destroy();
            resolve({ status: r.statusCode ?? 0 });
          });
        },
      );
      req.on('error', (e) => {
        if (!answered) reject(e);
      });
      req.flushHeaders();
      setTimeout(() => {
        if (!answered) req.end(bomb);
      }, 3000).unref();
    });
    expect(res.status).toBe(401);
  }, 30_000);
});

describe('serve refuses from the headers before it reads a body', () => {
  it('answers 401 to a request without credentials that declares a 4 MiB body and never sends it', async () => {
    // Before the headers were checked first, serve waited for the body (until --request-timeout) before saying 401.
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/vault/audit',
          headers: { 'content-length': String(4 * MiB) },
        },
        (r) => {
          let body = '';
          r.on('data', (d: Buffer) => (body += d.toString()));
          r.on('end', () => {
            req.destroy();
            resolve({ status: r.statusCode ?? 0, body });
          });
        },
      );
      req.on('error', reject);
      // The headers go out; not a byte of the body follows.
      req.flushHeaders();
    });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toEqual({
      error:
        'missing credentials: send x-vault-rollout-signature with x-vault-rollout-timestamp or Authorization: Bearer',
    });
  }, 10_000);
});

/** Starts a `serve` child with extra flags; resolves its port. */
async function startServe(flags: string[]): Promise<{ child: ChildProcess; port: number }> {
  const started = spawn(
    process.execPath,
    [
      join(repoRoot, 'lib/cli/main.ts'),
      'serve',
      '--port',
      '0',
      '--routes',
      join(repoRoot, 'infra/routes/example.yaml'),
      '--allow-example-routes',
      '--dry-run',
      ...flags,
    ],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH,
        VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  const bound = await new Promise<number>((resolve, reject) => {
    started.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m) resolve(Number(m[1]));
    });
    started.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
  return { child: started, port: bound };
}

/** A raw connection that sends the start of a request and never finishes its headers; `closed` resolves when the server drops it. */
function slowHeaders(to: number): Promise<{ socket: Socket; closed: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: to }, () => {
      socket.write('POST /v1/vault/audit HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      const closed = new Promise<string>((done) => socket.once('close', () => done(answer)));
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

describe('serve bounds its connections and their header time', () => {
  let limited: { child: ChildProcess; port: number };
  beforeAll(async () => {
    limited = await startServe(['--max-connections', '3', '--request-timeout', '2s']);
  }, 60_000);
  afterAll(() => {
    limited.child.kill('SIGKILL');
  });

  it('closes a connection past --max-connections at once, and peers whose headers never end after the header timeout', async () => {
    const held = await Promise.all([0, 1, 2].map(() => slowHeaders(limited.port)));
    // The fourth is over the cap: the server closes it without an answer, while the three are still open.
    const fourth = await slowHeaders(limited.port);
    expect(await fourth.closed).toBe('');
    expect(held.every((h) => !h.socket.destroyed)).toBe(true);
    // Headers that never end: cut off by the header timeout (2 s here), answered 408 or simply closed.
    for (const h of held) expect(await h.closed).toMatch(/^(HTTP\/1\.1 408 |$)/);
    // With the slow peers gone, a normal request goes through.
    const health = await new Promise<number>((resolve, reject) =>
      request(
        { host: '127.0.0.1', port: limited.port, path: '/healthz' },
        (r) => (r.resume(), resolve(r.statusCode ?? 0)),
      )
        .on('error', reject)
        .end(),
    );
    expect(health).toBe(200);
  }, 20_000);
});

describe('serve on a busy port', () => {
  it('says so in one line and exits 1 (no stack trace)', async () => {
    const second = spawn(
      process.execPath,
      [
        join(repoRoot, 'lib/cli/main.ts'),
        'serve',
        '--port',
        String(port),
        '--routes',
        join(repoRoot, 'infra/routes/example.yaml'),
        '--allow-example-routes',
        '--queue-file',
        join(mkdtempSync(join(tmpdir(), 'vr-serve-')), 'queue.sqlite'),
      ],
      {
        cwd: repoRoot,
        env: {
          PATH: process.env.PATH,
          VAULT_ROLLOUT_WEBHOOK_TOKEN: BEARER_TOKEN,
          POWERTOOLS_LOG_LEVEL: 'SILENT',
          POWERTOOLS_METRICS_DISABLED: 'true',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    second.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    second.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => second.once('exit', resolve));
    expect(code).toBe(1);
    expect(out).toBe(
      `vault-rollout serve: cannot listen on 127.0.0.1:${port}: the address is already in use (stop what holds it, or pass another --port)\n`,
    );
  }, 30_000);
});
