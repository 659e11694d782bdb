/**
 * One cluster's HTTPS connection for the Kubernetes API client: the keep-alive pool built once from client-node's
 * KubeConfig, the headers of each request (credentials read per request) and the request counters.
 */
import { Agent, type RequestOptions } from 'node:https';
import { createSecureContext } from 'node:tls';
import type { ClusterAccess } from './cluster-access.ts';
import type { KubeApiStats } from '../workloads/kube-port.ts';

export class KubeConnection {
  readonly base: URL;
  readonly basePath: string;
  /** The cluster's name in metrics. */
  readonly cluster: string;
  readonly stats: KubeApiStats = { requests: 0, watches: 0, watchEvents: 0 };
  #agent: Agent | undefined;

  readonly access: ClusterAccess;
  readonly timeoutMs: number;

  constructor(access: ClusterAccess, timeoutMs: number) {
    this.access = access;
    this.timeoutMs = timeoutMs;
    this.base = new URL(access.server);
    this.basePath = this.base.pathname.replace(/\/+$/, '');
    this.cluster = access.cluster ?? 'unknown';
  }

  /** The headers of one request; builds the connection pool on first use. */
  async headers(): Promise<Record<string, string>> {
    // Per request, so credentials that change (a refreshed token) are always current; the pool is built once.
    const options: RequestOptions = {};
    await this.access.kubeConfig.applyToHTTPSOptions(options);
    // One TLS context for every socket of the pool: without it each connection parses the CA, certificate and key
    // again and holds its own copy (a fleet of 100 clusters at 10 connections each is 1,000 of them).
    this.#agent ??= new Agent({
      keepAlive: true,
      maxSockets: 64,
      secureContext: createSecureContext({ ca: options.ca, cert: options.cert, key: options.key }),
      rejectUnauthorized: options.rejectUnauthorized !== false,
      ...(options.servername ? { servername: options.servername } : {}),
    });
    const headers: Record<string, string> = {
      ...(options.headers as Record<string, string>),
      Accept: 'application/json',
      'User-Agent': 'vault-rollout',
    };
    if (this.access.bearerToken !== undefined) headers.Authorization = `Bearer ${await this.access.bearerToken()}`;
    return headers;
  }

  /** The options of node:https request() for one API path, over the pool. */
  requestOptions(method: string, path: string, headers: Record<string, string>): RequestOptions {
    return {
      protocol: this.base.protocol,
      hostname: this.base.hostname,
      port: this.base.port,
      path: `${this.basePath}${path}`,
      method,
      agent: this.#agent,
      headers,
    };
  }
}
