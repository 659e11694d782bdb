/** A small local Vault for the relay tests: the events WebSocket (built with `ws`), AppRole login and token renewal. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket as WsSocket } from 'ws';

export interface FakeVaultOptions {
  /** Tokens the events endpoint accepts. */
  tokens?: Set<string>;
  /** Answer pings (default true). */
  autoPong?: boolean;
  /** Answer every upgrade with 307 to this address (a standby node). */
  redirectTo?: string;
  /** The HTTP API (login, renewal); default 404. */
  api?: (
    request: IncomingMessage,
    body: string,
  ) => { status: number; body?: unknown; headers?: Record<string, string> };
}

export interface FakeVault {
  url: string;
  /** Upgrade requests seen: URL and X-Vault-Token. */
  upgrades: Array<{ url: string; token: string | undefined; namespace: string | undefined }>;
  /** Open subscriber connections, newest last. */
  sockets: WsSocket[];
  pings: number;
  close(): Promise<void>;
}

export async function startFakeVault(options: FakeVaultOptions = {}): Promise<FakeVault> {
  const wss = new WebSocketServer({ noServer: true, autoPong: options.autoPong ?? true });
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const answer = options.api?.(req, body) ?? { status: 404, body: { errors: ['no handler'] } };
      res.writeHead(answer.status, {
        'content-type': 'application/json',
        ...('headers' in answer ? answer.headers : {}),
      });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  const vault: FakeVault = {
    url: '',
    upgrades: [],
    sockets: [],
    pings: 0,
    close: () =>
      new Promise((resolve) => {
        for (const socket of vault.sockets) socket.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  server.on('upgrade', (req: IncomingMessage, socket, head: Buffer) => {
    // Once upgraded, the HTTP server no longer listens for the socket's errors: a subscriber that refuses our 307 and
    // drops the connection resets it (read ECONNRESET), which is expected here and must not be an uncaught error.
    socket.on('error', () => undefined);
    const token = req.headers['x-vault-token'] as string | undefined;
    vault.upgrades.push({
      url: req.url ?? '',
      token,
      namespace: req.headers['x-vault-namespace'] as string | undefined,
    });
    if (options.redirectTo) {
      socket.end(
        `HTTP/1.1 307 Temporary Redirect\r\nLocation: ${options.redirectTo}${req.url ?? ''}\r\nContent-Length: 0\r\n\r\n`,
      );
      return;
    }
    if (options.tokens && (token === undefined || !options.tokens.has(token))) {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      vault.sockets.push(ws);
      ws.on('ping', () => (vault.pings += 1));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  vault.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return vault;
}

/** An event notification as Vault 1.16+ sends it with json=true (pretty-printed, to check the relay compacts it). */
export const kvEvent = (i: number): string =>
  JSON.stringify(
    {
      id: `event-${i}`,
      source: 'vault://node',
      specversion: '1.0',
      type: '*',
      data: {
        event: {
          id: `event-${i}`,
          metadata: {
            current_version: String(i),
            data_path: `secret/data/app-${i}`,
            modified: 'true',
            operation: 'data-write',
            path: `secret/data/app-${i}`,
          },
        },
        event_type: 'kv-v2/data-write',
        plugin_info: { mount_class: 'secret', mount_accessor: 'kv_1', mount_path: 'secret/', plugin: 'kv' },
      },
      datacontentype: 'application/cloudevents',
      time: '2026-11-20T10:15:02Z',
    },
    null,
    2,
  );
