/** Shared pieces of the relay tests: temporary directories, a local "function" HTTP server, polling waits. */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authenticate, ReplayGuard } from '../../../lib/http/webhook-auth.ts';

export const SECRET = 'test-webhook-secret';

export function temporaryDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-relay-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Resolves once `check` is true; fails the test after `timeoutMs`. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 3000,
  what = 'condition',
): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** authenticate() from lib/http/webhook-auth.ts on the raw body, with our secret. */
  auth: ReturnType<typeof authenticate>;
}

export type Reply = { status: number; body?: unknown; headers?: Record<string, string> } | 'hang-up';

/** A local stand-in for the function: records each request (authenticated as the real app does) and answers with `reply`. */
export async function startFunctionServer(
  reply: (request: ReceivedRequest, index: number) => Reply = () => ({
    status: 202,
    body: { accepted: 1, ignored: 0, rejected: 0, queued: 1 },
  }),
): Promise<{ url: string; requests: ReceivedRequest[]; close: () => Promise<void>; server: Server }> {
  const requests: ReceivedRequest[] = [];
  const replay = new ReplayGuard();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const auth = authenticate(
        (name) => req.headers[name] as string | undefined,
        raw,
        { hmacSecret: SECRET },
        Math.floor(Date.now() / 1000),
        replay,
      );
      const received: ReceivedRequest = { path: req.url ?? '', headers: req.headers, body: raw.toString('utf8'), auth };
      requests.push(received);
      const answer = reply(received, requests.length - 1);
      if (answer === 'hang-up') {
        req.socket.destroy();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The lines of every request body, in order. */
export const linesOf = (requests: readonly ReceivedRequest[]): string[] =>
  requests.flatMap((r) => r.body.split('\n').filter(Boolean));

export const auditLine = (i: number): string =>
  JSON.stringify({
    type: 'response',
    request: { id: `req-${i}`, operation: 'update', path: `secret/data/app-${i}` },
    response: { data: { version: i } },
  });

/** Writes lines to a TCP (`tcp://h:p`) or unix (`unix:///p`) address and resolves once all were written and the connection closed. */
export async function sendLines(address: string, lines: readonly string[]): Promise<void> {
  const { connect } = await import('node:net');
  const socket = address.startsWith('unix://')
    ? connect(address.slice('unix://'.length))
    : connect(Number(/:(\d+)$/.exec(address)?.[1]), /^tcp:\/\/\[?([^\]]+?)\]?:\d+$/.exec(address)?.[1] ?? '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.end(lines.map((l) => `${l}\n`).join(''), () => resolve());
    });
  });
  await new Promise<void>((resolve) => socket.once('close', () => resolve()));
}

/** A sleep that records what it was asked and waits only a millisecond. */
export function fastSleep(): { sleep: (ms: number, signal?: AbortSignal) => Promise<void>; asked: number[] } {
  const asked: number[] = [];
  return { asked, sleep: (ms) => (asked.push(ms), new Promise((resolve) => setTimeout(resolve, 1))) };
}
