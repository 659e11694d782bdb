/**
 * The `ws` package, typed for what the relay (and its tests) use. Node's global WebSocket cannot set request
 * headers, and Vault wants the token in `X-Vault-Token`. `ws` ships no types and @types/ws is not installed, so
 * the surface is declared here instead of globally.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';

export interface WsClientOptions {
  headers?: Record<string, string>;
  followRedirects?: boolean;
  maxRedirects?: number;
  handshakeTimeout?: number;
  /** TLS (https.request options), e.g. VAULT_CACERT's CAs. */
  ca?: string[];
  cert?: string;
  key?: string;
  rejectUnauthorized?: boolean;
}

export interface WsSocket {
  readonly readyState: number;
  on(event: 'open' | 'ping' | 'pong', listener: () => void): this;
  on(event: 'message', listener: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): this;
  on(event: 'close', listener: (code: number, reason: Buffer) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  /** Before a redirect is followed; `request.destroy(error)` refuses it (nothing is sent). */
  on(event: 'redirect', listener: (url: string, request: ClientRequest) => void): this;
  ping(): void;
  send(data: string): void;
  close(code?: number): void;
  terminate(): void;
}

export interface WsServer {
  readonly clients: Set<WsSocket>;
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer, callback: (socket: WsSocket) => void): void;
  close(callback?: () => void): void;
}

interface WsModule {
  WebSocket: (new (url: string, options?: WsClientOptions) => WsSocket) & { readonly OPEN: number };
  WebSocketServer: new (options: { noServer: true; autoPong?: boolean }) => WsServer;
}

const loadCommonJs = createRequire(import.meta.url);
const ws = loadCommonJs('ws') as WsModule;

export const WebSocketClient = ws.WebSocket;
export const WebSocketServer = ws.WebSocketServer;
