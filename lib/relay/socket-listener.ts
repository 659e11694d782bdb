/**
 * The listener for Vault's `socket` audit device: TCP or a unix socket, NDJSON (one entry per line, possibly
 * after a prefix). Vault writes each entry synchronously with the request it audits, so this side only ever
 * reads — as fast as the data comes, never pausing a connection — and hands lines on; slowness further down
 * (the function) is absorbed by the disk spool, and memory by the line and batch bounds.
 */
import { lstat, unlink } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { LineSplitter } from './line-splitter.ts';
import type { RelayLog } from './relay-log.ts';

export type ListenAddress = { type: 'tcp'; host: string; port: number } | { type: 'unix'; path: string };

/** `tcp://HOST:PORT` (IPv6 in brackets) or `unix:///absolute/path`. */
export function parseListenAddress(text: string): ListenAddress {
  if (text.startsWith('unix://')) {
    const path = text.slice('unix://'.length);
    if (!path.startsWith('/')) throw new Error(`--audit-listen ${text}: a unix socket needs an absolute path (unix:///run/vault-rollout/audit.sock)`);
    return { type: 'unix', path };
  }
  const match = /^tcp:\/\/(\[[^\]]+\]|[^:/]+):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (!match || port > 65535) throw new Error(`--audit-listen ${text}: use tcp://HOST:PORT or unix:///PATH`);
  return { type: 'tcp', host: (match[1] as string).replace(/^\[|\]$/g, ''), port };
}

export interface AuditSocketListenerOptions {
  address: ListenAddress;
  onLine: (line: string) => void;
  onDropped: (reason: 'line-too-long' | 'partial-line') => void;
  log: RelayLog;
  maxLineBytes?: number;
  maxConnections?: number;
}

export class AuditSocketListener {
  readonly #options: AuditSocketListenerOptions;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();

  constructor(options: AuditSocketListenerOptions) {
    this.#options = options;
    this.#server = createServer((socket) => this.#accept(socket));
    this.#server.maxConnections = options.maxConnections ?? 64;
  }

  /** Listens; returns the bound address (the real port when 0 was asked). */
  async start(): Promise<string> {
    const { address, log } = this.#options;
    if (address.type === 'unix') await removeStaleSocket(address.path);
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      const ready = (): void => {
        this.#server.off('error', reject);
        resolve();
      };
      if (address.type === 'unix') this.#server.listen(address.path, ready);
      else this.#server.listen(address.port, address.host, ready);
    });
    this.#server.on('error', (error) => log.error('audit socket error', { error: error.message }));
    const bound = this.#server.address();
    const text = typeof bound === 'object' && bound ? `tcp://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}` : `unix://${String(bound)}`;
    log.warn("listening for Vault's socket audit device: it must not be Vault's only audit device — Vault stops answering requests when no audit device can write, and this socket is unavailable whenever the relay is down; enable a file or syslog device as well", { address: text });
    return text;
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  #accept(socket: Socket): void {
    const { onLine, onDropped, log } = this.#options;
    this.#sockets.add(socket);
    const splitter = new LineSplitter({ maxLineBytes: this.#options.maxLineBytes ?? 4 * 1024 * 1024, onLine: (line) => onLine(line), onOverlong: () => onDropped('line-too-long') });
    socket.on('data', (chunk: Buffer) => splitter.push(chunk));
    socket.on('error', (error) => log.warn('audit socket connection error', { error: (error as NodeJS.ErrnoException).code ?? error.message }));
    socket.on('close', () => {
      this.#sockets.delete(socket);
      if (splitter.pendingBytes > 0) onDropped('partial-line');
    });
  }
}

/** A socket file left by a previous run is removed; anything else at that path is not ours to delete. */
async function removeStaleSocket(path: string): Promise<void> {
  try {
    const existing = await lstat(path);
    if (!existing.isSocket()) throw new Error(`--audit-listen: ${path} exists and is not a socket`);
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
