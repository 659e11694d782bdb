/**
 * The scrape listener of `worker --metrics-port` and `relay --metrics-port`: GET /metrics and nothing else, no
 * authentication, on loopback unless told otherwise — as Prometheus exporters are: what it shows is counts with
 * enum and cluster labels, and it is bound where only the scraper reaches (see docs/how-to/metrics-and-dashboards.md).
 */
import { createServer, type Server } from 'node:http';
import type { PrometheusMetrics } from './prometheus.ts';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(
  metrics: PrometheusMetrics,
  host: string,
  port: number,
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics\n');
      return;
    }
    metrics.scrape().then(
      ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
      (e: unknown) =>
        res
          .writeHead(500, { 'content-type': 'text/plain' })
          .end(`cannot collect the metrics: ${e instanceof Error ? e.message : String(e)}\n`),
    );
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  server.maxConnections = 16;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
