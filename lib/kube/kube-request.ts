/**
 * One request/answer exchange with the Kubernetes API over a KubeConnection: the JSON body sent, the answer read
 * whole and parsed, errors as ApiException or a connection-style error, latency and errors counted per cluster.
 */
import type { IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { ApiException } from '@kubernetes/client-node';
import type { KubeConnection } from './kube-connection.ts';
import { METRICS, observeMetric, requestOutcome } from '../kernel/telemetry.ts';

export interface KubeResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * Sends one request, recording its latency and any error (observeMetric: a no-op unless a Prometheus registry is
 * installed).
 */
export async function sendMeasured(
  conn: KubeConnection,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<KubeResponse> {
  const cluster = conn.cluster;
  const started = performance.now();
  try {
    const response = await sendOnce(conn, method, path, body, contentType);
    observeMetric(METRICS.kubeRequestDuration, performance.now() - started, { cluster, method, outcome: 'ok' });
    return response;
  } catch (e) {
    const outcome = requestOutcome(e instanceof ApiException ? e.code : undefined);
    observeMetric(METRICS.kubeRequestDuration, performance.now() - started, { cluster, method, outcome });
    observeMetric(METRICS.kubeRequestErrors, 1, { cluster, outcome });
    throw e;
  }
}

async function sendOnce(
  conn: KubeConnection,
  method: string,
  path: string,
  body: unknown,
  contentType: string,
): Promise<KubeResponse> {
  const headers = await conn.headers();
  conn.stats.requests++;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  if (payload !== undefined) {
    headers['Content-Type'] = contentType;
    headers['Content-Length'] = String(Buffer.byteLength(payload));
  }
  const host = conn.base.host;
  return new Promise((resolve, reject) => {
    const req = request(conn.requestOptions(method, path, headers), (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        try {
          resolve(answerOf(res, chunks, host));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.setTimeout(conn.timeoutMs, () =>
      req.destroy(Object.assign(new Error(`no answer from ${host} in ${conn.timeoutMs} ms`), { code: 'ETIMEDOUT' })),
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The answer read whole: a 2xx JSON body, or a thrown error (ApiException for any other status). */
function answerOf(res: IncomingMessage, chunks: Buffer[], host: string): KubeResponse {
  // A body cut short (the server or a proxy went away) is an error, never an empty answer.
  if (!res.complete) throw Object.assign(new Error(`the answer from ${host} was cut short`), { code: 'ECONNRESET' });
  const text = Buffer.concat(chunks).toString('utf8');
  let parsed: unknown;
  let unparsable = false;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
    unparsable = true;
  }
  const status = res.statusCode ?? 0;
  if (unparsable && status >= 200 && status < 300)
    throw Object.assign(new Error(`the answer from ${host} is not JSON`), { code: 'ECONNRESET' });
  const responseHeaders = Object.fromEntries(
    Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]),
  );
  if (status >= 200 && status < 300) return { status, headers: responseHeaders, body: parsed };
  throw new ApiException(status, `HTTP ${status}`, parsed, responseHeaders);
}
