/**
 * The watch half of the Kubernetes API client: one streamed GET ?watch=1 read line by line into watch events until
 * the server ends it, the caller aborts it, or it fails (an ERROR event, a line that is not JSON or too long, a cut
 * or silent stream).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { ApiException } from '@kubernetes/client-node';
import type { KubeConnection } from './kube-connection.ts';
import { LineSplitter } from '../kernel/line-splitter.ts';
import type { KubeApiStats, KubeObject, WatchOptions } from '../workloads/kube-port.ts';

/** A watch line longer than this is refused (the stream is closed and the follower relists): no unbounded buffer. */
export const MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024;

/** Streams the watch at `path` (with its query) to options.onEvent; resolves when the server ends it or on abort. */
export async function streamWatch(conn: KubeConnection, path: string, options: WatchOptions): Promise<void> {
  const headers = await conn.headers();
  conn.stats.requests++;
  conn.stats.watches++;
  return new Promise<void>((resolveOuter, rejectOuter) => {
    if (options.signal?.aborted) return resolveOuter();
    const onAbort = () => req.destroy();
    const resolve = () => {
      options.signal?.removeEventListener('abort', onAbort);
      resolveOuter();
    };
    // An abort is how the follower stops a watch: whatever error it causes is the end of the stream.
    const reject = (e: unknown) =>
      options.signal?.aborted ? resolve() : (options.signal?.removeEventListener('abort', onAbort), rejectOuter(e));
    const req = request(conn.requestOptions('GET', path, headers), (res) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) return rejectWithErrorBody(res, status, reject);
      readWatchStream({ conn, options, req, res, resolve, reject });
    });
    // Idle bound: the server ends the watch after timeoutSeconds and sends bookmarks; silence past that is a dead peer.
    req.setTimeout(options.timeoutSeconds * 1000 + conn.timeoutMs, () =>
      req.destroy(Object.assign(new Error(`the watch on ${conn.base.host} went silent`), { code: 'ETIMEDOUT' })),
    );
    req.on('error', reject);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    req.end();
  });
}

/** A watch refused with a non-2xx status: rejects with an ApiException carrying the (bounded) body read. */
function rejectWithErrorBody(res: IncomingMessage, status: number, reject: (e: unknown) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.length < 64 && chunks.push(c));
  res.on('end', () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      parsed = undefined;
    }
    reject(new ApiException(status, `HTTP ${status}`, parsed, {}));
  });
  res.on('error', reject);
}

/** One accepted watch: its request and answer, and how the watch's promise settles. */
interface WatchStream {
  readonly conn: KubeConnection;
  readonly options: WatchOptions;
  readonly req: ClientRequest;
  readonly res: IncomingMessage;
  readonly resolve: () => void;
  readonly reject: (e: unknown) => void;
}

/** Reads an accepted watch's body line by line; the first failure closes the request and rejects, once. */
function readWatchStream({ conn, options, req, res, resolve, reject }: WatchStream): void {
  let failed = false;
  const fail = (e: unknown) => {
    if (failed) return;
    failed = true;
    req.destroy();
    reject(e);
  };
  const lines = new LineSplitter({
    maxLineBytes: MAX_WATCH_LINE_BYTES,
    onLine: (text) => {
      if (failed) return;
      const error = dispatchWatchLine(text, conn.stats, options);
      if (error !== undefined) fail(error);
    },
    onOverlong: () => fail(new Error(`a watch event is larger than ${MAX_WATCH_LINE_BYTES} bytes`)),
  });
  res.on('data', (chunk: Buffer) => {
    if (!failed) lines.push(chunk);
  });
  res.on('error', fail);
  res.on('end', () => {
    if (!failed) lines.end();
    if (!failed) resolve();
  });
  res.on('close', () => {
    if (!failed && !res.complete) fail(new Error(`the watch on ${conn.base.host} was cut`));
  });
}

/** Hands one watch line's event to options.onEvent; returns the error that ends the stream, if the line is one. */
function dispatchWatchLine(text: string, stats: KubeApiStats, options: WatchOptions): Error | undefined {
  if (text.trim() === '') return undefined;
  let event: { type?: string; object?: KubeObject & { code?: number; message?: string; reason?: string } };
  try {
    event = JSON.parse(text) as typeof event;
  } catch {
    return new Error('the watch stream sent a line that is not JSON');
  }
  if (event.type === 'ERROR')
    return new ApiException(event.object?.code ?? 500, `HTTP ${event.object?.code ?? 500}`, event.object, {});
  if (event.type !== 'ADDED' && event.type !== 'MODIFIED' && event.type !== 'DELETED' && event.type !== 'BOOKMARK')
    return undefined;
  stats.watchEvents++;
  options.onEvent({ type: event.type, object: event.object ?? {} });
  return undefined;
}
