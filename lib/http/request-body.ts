/**
 * The request body of the HTTP intake (lib/http/app.ts): read with a bound while it streams in, from the web request
 * or from serve's Node request itself, then gunzipped within the same bound and decoded as strict UTF-8. Every
 * refusal is an HTTPException carrying the JSON answer.
 */
import { IncomingMessage } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { HTTPException } from 'hono/http-exception';

/** Stateless between calls (no `stream: true`), so one serves every request instead of one built per request. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A refusal answered with its status and `{ error }`. */
export function problem(status: 400 | 401 | 413 | 503, error: string): HTTPException {
  return new HTTPException(status, { res: Response.json({ error }, { status }) });
}

/**
 * The raw body, counted while it streams in: a body over the limit is refused at the first byte past it, whether the
 * sender declared a Content-Length or sent chunks, so an unauthenticated upload never grows the process.
 */
export async function readRawBody(request: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw problem(413, `the body is larger than ${maxBytes} bytes`);
  if (request.body === null) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      // The server drains or drops the rest of the upload; nothing more is kept.
      await reader.cancel().catch(() => undefined);
      throw problem(413, `the body is larger than ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * `readRawBody` on the Node request itself, which `serve` (@hono/node-server) hands over as `env.incoming`: the same
 * bound, counted per chunk, without the web stream wrapped around it (that wrapper cost more than the audit
 * entries' JSON.parse on 1,000-entry bodies). Past the limit it stops reading; Node drains or drops the rest.
 */
export function readIncomingBody(incoming: IncomingMessage, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(incoming.headers['content-length'] ?? '0');
  if (declared > maxBytes) return Promise.reject(problem(413, `the body is larger than ${maxBytes} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const finish = (settle: () => void) => {
      incoming.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      settle();
    };
    const onData = (chunk: Buffer) => {
      total += chunk.byteLength;
      if (total > maxBytes) {
        incoming.pause();
        finish(() => reject(problem(413, `the body is larger than ${maxBytes} bytes`)));
      } else chunks.push(chunk);
    };
    const onEnd = () =>
      finish(() => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total)));
    const onError = (error: Error) => finish(() => reject(error));
    const onClose = () => finish(() => reject(new Error('the connection closed before the body ended')));
    incoming.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}

/**
 * The Node request under a Hono context, when the server is @hono/node-server (`serve`); undefined in Lambda and tests.
 */
export function nodeIncoming(env: unknown): IncomingMessage | undefined {
  const incoming = (env as { incoming?: unknown } | undefined)?.incoming;
  // Not yet read by anyone: hono's own body readers mark it read.
  return incoming instanceof IncomingMessage && !incoming.readableDidRead ? incoming : undefined;
}

/**
 * The authenticated body as text: gunzipped (once authenticated: the signature covers the bytes sent) when the sender
 * said so, inflating at most `maxBytes`, and valid UTF-8 — or a 400/413 that says why.
 */
export function decodeBody(request: Request, raw: Uint8Array, maxBytes: number): string {
  let bytes = raw;
  if ((request.headers.get('content-encoding') ?? '').toLowerCase() === 'gzip') {
    try {
      // maxOutputLength stops inflating at the cap: a gzip bomb costs at most maxBytes of memory.
      bytes = gunzipSync(raw, { maxOutputLength: maxBytes });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
        throw problem(413, `the decompressed body is larger than ${maxBytes} bytes`);
      throw problem(400, 'Content-Encoding says gzip, but the body is not gzip');
    }
  }
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw problem(400, 'the body is not UTF-8 text');
  }
}
