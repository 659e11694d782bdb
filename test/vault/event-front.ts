/**
 * Vault's event notifications in front of a real community Vault server, for the relay's `--events` tests.
 *
 * Community Vault has had no event WebSocket since 1.16 (Enterprise only; OpenBao removed it), so a test on the
 * newest Vault cannot receive events from the server itself. This front stands where the Enterprise server would:
 * every HTTP request goes through to the real server unchanged (KV writes, reads, logins, metadata), and each KV
 * change the server accepted is announced on `GET /v1/sys/events/subscribe/<pattern>?json=true` as the CloudEvents
 * frame Vault documents (the 1.15.3 frames captured in test/vault/captured/vault-1.15.3, plus the fields 1.16+ and
 * 2.x add: `data_path` on every KV v2 data event, `vault_index`, `plugin_info.version`). Versions and timestamps are
 * the server's own: the front reads the path's KV metadata after each change, with the root token, as Vault's KV
 * plugin fills the event from its own state.
 *
 * What it checks like Vault does: the subscriber's `X-Vault-Token` (looked up on the server; 403 otherwise), the
 * event-type pattern (`*` globs), `json=true` (the protobuf framing is not implemented: 400). Not implemented:
 * `namespaces` and `filter` (refused with 400, so a test cannot believe it used them).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket as WsSocket } from 'ws';

export interface EventFront {
  /** `http://127.0.0.1:<port>`: give it to the relay as `--vault-addr`. */
  addr: string;
  /** Every frame sent (one entry per event, whatever the number of subscribers). */
  readonly frames: Record<string, unknown>[];
  /** The subscribers connected now. */
  subscribers(): number;
  stop(): Promise<void>;
}

interface Upstream {
  addr: string;
  /** The server's root token: reads mounts and KV metadata. Never logged. */
  token: string;
  /** `plugin_info.version` of the KV plugin, e.g. `v0.25.0+builtin` (1.21's). */
  kvPluginVersion?: string;
}

interface Subscriber {
  socket: WsSocket;
  pattern: RegExp;
}

interface Mount {
  path: string;
  accessor: string;
  version: 1 | 2;
}

const MAX_BODY = 1 << 20;

export async function startEventFront(upstream: Upstream): Promise<EventFront> {
  const subscribers = new Set<Subscriber>();
  const frames: Record<string, unknown>[] = [];
  const wss = new WebSocketServer({ noServer: true });
  let mounts: Mount[] = [];

  const server: Server = createServer((request, response) => {
    void proxy(request, response).catch((e: unknown) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ errors: [`event front: ${(e as Error).message}`] }));
    });
  });
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    void subscribe(request, socket, head).catch(() => socket.destroy());
  });

  async function subscribe(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://front');
    const prefix = '/v1/sys/events/subscribe/';
    const refuse = (status: number, message: string): void => {
      socket.end(
        `HTTP/1.1 ${status} ${message}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ errors: [message] })}`,
      );
    };
    if (!url.pathname.startsWith(prefix)) return refuse(404, 'not found');
    if (url.searchParams.get('json') !== 'true') return refuse(400, 'event front: only json=true is implemented');
    if (url.searchParams.has('namespaces') || url.searchParams.has('filter'))
      return refuse(400, 'event front: namespaces and filter are not implemented');
    const token = request.headers['x-vault-token'];
    const lookup = await fetch(`${upstream.addr}/v1/auth/token/lookup-self`, {
      headers: { 'X-Vault-Token': typeof token === 'string' ? token : '' },
    });
    await lookup.body?.cancel();
    if (lookup.status !== 200) return refuse(403, 'permission denied');
    const pattern = decodeURIComponent(url.pathname.slice(prefix.length));
    const regex = new RegExp(
      `^${pattern
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\/-]/g, '\\$&'))
        .join('.*')}$`,
    );
    wss.handleUpgrade(request, socket, head, (ws) => {
      const subscriber = { socket: ws, pattern: regex };
      subscribers.add(subscriber);
      ws.on('close', () => subscribers.delete(subscriber));
      ws.on('error', () => subscribers.delete(subscriber));
    });
  }

  async function proxy(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of request as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) throw new Error('request body over 1 MiB');
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    const method = request.method ?? 'GET';
    const headers: Record<string, string> = {};
    for (const name of [
      'x-vault-token',
      'x-vault-namespace',
      'x-vault-request',
      'x-vault-index',
      'x-vault-inconsistent',
      'content-type',
    ]) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const answer = await fetch(`${upstream.addr}${request.url ?? '/'}`, {
      method,
      headers,
      body: body.length > 0 ? body : undefined,
      redirect: 'manual',
    });
    const text = Buffer.from(await answer.arrayBuffer());
    const out: Record<string, string> = {};
    answer.headers.forEach((value, name) => {
      if (name !== 'content-length' && name !== 'transfer-encoding' && name !== 'connection') out[name] = value;
    });
    response.writeHead(answer.status, out);
    response.end(text);
    if (answer.status >= 200 && answer.status < 300 && method !== 'GET' && method !== 'LIST') {
      await announce(
        method,
        new URL(request.url ?? '/', 'http://front').pathname,
        body,
        answer.headers.get('x-vault-index'),
      );
    }
  }

  async function upstreamJson(path: string): Promise<Record<string, unknown> | undefined> {
    const answer = await fetch(`${upstream.addr}/v1/${path}`, { headers: { 'X-Vault-Token': upstream.token } });
    if (answer.status !== 200) {
      await answer.body?.cancel();
      return undefined;
    }
    return (await answer.json()) as Record<string, unknown>;
  }

  async function mountOf(path: string): Promise<Mount | undefined> {
    const find = (): Mount | undefined =>
      mounts.filter((m) => path.startsWith(m.path)).sort((a, b) => b.path.length - a.path.length)[0];
    if (find()) return find();
    const listed = await upstreamJson('sys/mounts');
    const table = (listed?.data ?? listed ?? {}) as Record<
      string,
      { type?: string; accessor?: string; options?: { version?: string } | null }
    >;
    mounts = Object.entries(table)
      .filter(([, m]) => m.type === 'kv' || m.type === 'generic')
      .map(([p, m]) => ({ path: p, accessor: m.accessor ?? '', version: m.options?.version === '2' ? 2 : 1 }));
    return find();
  }

  async function announce(method: string, urlPath: string, body: Buffer, vaultIndex: string | null): Promise<void> {
    const path = urlPath.replace(/^\/v1\//, '');
    const mount = await mountOf(path);
    if (!mount) return;
    const rest = path.slice(mount.path.length);
    const parsed = (buffer: Buffer): Record<string, unknown> => {
      try {
        return JSON.parse(buffer.toString('utf8')) as Record<string, unknown>;
      } catch {
        return {};
      }
    };
    const request = parsed(body);
    const index: Record<string, string> = vaultIndex ? { vault_index: vaultIndex } : {};
    let eventType: string;
    let metadata: Record<string, string>;
    if (mount.version === 1) {
      if (method === 'DELETE')
        [eventType, metadata] = ['kv-v1/delete', { modified: 'true', operation: 'delete', path }];
      else [eventType, metadata] = ['kv-v1/write', { data_path: path, modified: 'true', operation: 'write', path }];
    } else {
      const [area, ...key] = rest.split('/');
      const secret = key.join('/');
      if (secret === '' || area === undefined) return;
      const dataPath = `${mount.path}data/${secret}`;
      const versions = async (): Promise<Record<string, string>> => {
        const meta = (await upstreamJson(`${mount.path}metadata/${secret}`))?.data as
          { current_version?: number; oldest_version?: number } | undefined;
        return {
          current_version: String(meta?.current_version ?? 0),
          oldest_version: String(meta?.oldest_version ?? 0),
        };
      };
      const list = (name: string): string => JSON.stringify(Array.isArray(request[name]) ? request[name] : []);
      const operation = (op: string, extra: Record<string, string> = {}): Promise<[string, Record<string, string>]> =>
        versions().then((v) => [
          `kv-v2/${op}`,
          { ...v, data_path: dataPath, modified: 'true', operation: op, path, ...index, ...extra },
        ]);
      if (area === 'data' && method === 'DELETE') [eventType, metadata] = await operation('data-delete');
      else if (area === 'data' && method === 'PATCH') [eventType, metadata] = await operation('data-patch');
      else if (area === 'data') [eventType, metadata] = await operation('data-write');
      else if (area === 'delete')
        [eventType, metadata] = await operation('delete', { deleted_versions: list('versions') });
      else if (area === 'undelete')
        [eventType, metadata] = await operation('undelete', { undeleted_versions: list('versions') });
      else if (area === 'destroy')
        [eventType, metadata] = await operation('destroy', { destroyed_versions: list('versions') });
      else if (area === 'metadata' && method === 'DELETE')
        [eventType, metadata] = [
          'kv-v2/metadata-delete',
          { data_path: dataPath, modified: 'true', operation: 'metadata-delete', path, ...index },
        ];
      else if (area === 'metadata')
        [eventType, metadata] = await operation(method === 'PATCH' ? 'metadata-patch' : 'metadata-write');
      else return;
    }
    const id = randomUUID();
    const frame = {
      id,
      source: 'vault://event-front',
      specversion: '1.0',
      type: '*',
      data: {
        event: { id, metadata },
        event_type: eventType,
        plugin_info: {
          mount_class: 'secret',
          mount_accessor: mount.accessor,
          mount_path: mount.path,
          plugin: 'kv',
          version: upstream.kvPluginVersion ?? '',
        },
      },
      // Vault really spells it so (1.15 to 2.x).
      datacontentype: 'application/cloudevents',
      time: new Date().toISOString(),
    };
    frames.push(frame);
    const text = JSON.stringify(frame);
    for (const s of subscribers) if (s.pattern.test(eventType)) s.socket.send(text);
  }

  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    addr: `http://127.0.0.1:${port}`,
    frames,
    subscribers: () => subscribers.size,
    stop: () =>
      new Promise<void>((ok) => {
        for (const s of subscribers) s.socket.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
