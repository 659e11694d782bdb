/**
 * The listener for Vault's `socket` audit device: a unix socket (the default), or TCP when asked for by name,
 * NDJSON (one entry per line, possibly after a prefix). Whatever connects is believed — the relay signs what it
 * reads — so who can connect is the bound: a unix socket is created owner-only (0600; 0660 to admit its group, e.g.
 * Vault's), while a TCP port on 127.0.0.1 admits every local user and process. Vault writes each entry synchronously
 * with the request it audits, so this side only ever
 * reads — as fast as the data comes, never pausing a connection — and hands lines on; slowness further down
 * (the function) is absorbed by the disk spool, and memory by the line and batch bounds.
 */
import { chmod, lstat, unlink } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { LineSplitter } from '../kernel/line-splitter.ts';
import type { RelayLog } from '../kernel/log.ts';

export type ListenAddress = { type: 'tcp'; host: string; port: number } | { type: 'unix'; path: string };

/** `unix:///absolute/path` or just `/absolute/path`, or `tcp://HOST:PORT` (IPv6 in brackets). */
export function parseListenAddress(text: string): ListenAddress {
  if (text.startsWith('unix://') || text.startsWith('/')) {
    const path = text.startsWith('/') ? text : text.slice('unix://'.length);
    if (!path.startsWith('/'))
      throw new Error(
        `--audit-listen ${text}: a unix socket needs an absolute path (unix:///run/vault-rollout/audit.sock)`,
      );
    return { type: 'unix', path };
  }
  const match = /^tcp:\/\/(\[[^\]]+\]|[^:/]+):(\d{1,5})$/.exec(text);
  const port = Number(match?.[2]);
  if (!match || port > 65535)
    throw new Error(`--audit-listen ${text}: use unix:///PATH (or an absolute path), or tcp://HOST:PORT`);
  return { type: 'tcp', host: (match[1] as string).replace(/^\[|\]$/g, ''), port };
}

export interface AuditSocketListenerOptions {
  address: ListenAddress;
  onLine: (line: string) => void;
  onDropped: (reason: 'line-too-long' | 'partial-line') => void;
  log: RelayLog;
  maxLineBytes?: number;
  maxConnections?: number;
  /** A unix socket's permissions: 0o600 (default, the relay's user only) or 0o660 (its group too). */
  socketMode?: 0o600 | 0o660;
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
      if (address.type === 'unix') {
        // The socket file is created by bind(), synchronously inside listen(): under this umask it is never, even for
        // an instant, connectable by other users.
        const umask = process.umask(0o177);
        try {
          this.#server.listen(address.path, ready);
        } finally {
          process.umask(umask);
        }
      } else this.#server.listen(address.port, address.host, ready);
    });
    if (address.type === 'unix') await chmod(address.path, this.#options.socketMode ?? 0o600);
    this.#server.on('error', (error) => log.error('audit socket error', { error: error.message }));
    const bound = this.#server.address();
    const text =
      typeof bound === 'object' && bound
        ? `tcp://${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`
        : `unix://${String(bound)}`;
    if (address.type === 'tcp')
      log.warn(
        'the audit socket listens on TCP: any process that can reach this port (on 127.0.0.1, every local user) can inject audit entries, which the relay signs and delivers — forged versions can hold back real rotations; prefer unix:///PATH (owner-only)',
        { address: text },
      );
    log.warn(
      "listening for Vault's socket audit device: it must not be Vault's only audit device — Vault stops answering requests when no audit device can write, and this socket is unavailable whenever the relay is down; enable a file or syslog device as well",
      { address: text },
    );
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
    const splitter = new LineSplitter({
      maxLineBytes: this.#options.maxLineBytes ?? 4 * 1024 * 1024,
      onLine: (line) => onLine(line),
      onOverlong: () => onDropped('line-too-long'),
    });
    socket.on('data', (chunk: Buffer) => splitter.push(chunk));
    socket.on('error', (error) =>
      log.warn('audit socket connection error', { error: (error as NodeJS.ErrnoException).code ?? error.message }),
    );
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
