// Proves that test/vault/server.ts runs real Vault-compatible servers and that
// they emit the change feed vault-rollout consumes: audit entries (file device,
// and OpenBao's http device); and that community Vault 1.21 has no event WebSocket, so the event tests take Vault's
// documented frames from test/vault/event-front.ts, made from the real server's own KV changes.
// The servers are built or fetched by test/vault/build-server.sh on first use;
// if that or the start fails, beforeAll throws: never skipped.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import WebSocketClient from 'ws';
import { startEventFront } from '../vault/event-front.ts';
import { startHttpReceiver, type HttpReceiver } from '../vault/http-receiver.ts';
import {
  readAuditFile,
  rssKiB,
  startDevServer,
  waitForEntries,
  VaultClient,
  VaultError,
  type DevServer,
  type ServerKind,
} from '../vault/server.ts';

// Versions build-server.sh provides by default (see test/vault/README.md).
const EXPECTED_VERSION: Record<ServerKind, string> = { openbao: '2.7.2', vault: '1.21.1' };
const SERVERS: ServerKind[] = ['openbao', 'vault'];
const BUILD_TIMEOUT = 40 * 60_000; // a cold Vault build on 2 cores

type Entry = Record<string, unknown> & {
  type?: string;
  request?: Record<string, unknown> & { id?: string; path?: string; operation?: string; mount_type?: string };
  response?: Record<string, unknown> & { data?: Record<string, unknown> };
  error?: string;
};

const entriesFor = (entries: Entry[], path: string, type: 'request' | 'response'): Entry[] =>
  entries.filter((e) => e.type === type && e.request?.path === path);

function processGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

describe.each(SERVERS)('%s dev server', (kind) => {
  let server: DevServer;
  let dir: string;
  let auditFile: string;
  let receiver: HttpReceiver | undefined;
  const bearer = `test-bearer-${kind}`;
  const audit = (): Entry[] => readAuditFile(auditFile) as Entry[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), `vault-rollout-it-${kind}-`));
    auditFile = join(dir, 'audit.log');
    if (kind === 'openbao') receiver = await startHttpReceiver();
    server = await startDevServer({
      kind,
      auditFile,
      audit: receiver
        ? [
            {
              type: 'http',
              path: 'http',
              options: {
                uri: `${receiver.url}/ingest`,
                headers: JSON.stringify({ Authorization: [`Bearer ${bearer}`] }),
              },
            },
          ]
        : [],
    });
  }, BUILD_TIMEOUT);

  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs on loopback, reports its version and never prints the root token', async () => {
    expect(server.addr).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.version).toBe(EXPECTED_VERSION[kind]);
    // Dev mode prints the root token in its banner; logs() redacts it.
    const [logs] = await waitForEntries(
      () => [server.logs()],
      ([l]) => /Root Token: /.test(l ?? ''),
    );
    expect(logs).toContain('Root Token: <root-token>');
    expect(logs).not.toContain(server.token);
    expect(rssKiB(server.pid)).toBeGreaterThan(10_000);
    const devices = await server.client.listAudit();
    expect(Object.keys(devices)).toContain('file/');
    if (kind === 'openbao') expect(Object.keys(devices)).toContain('http/');
  });

  it('audits a KV v2 secret written twice: request and response entries with versions 1 and 2', async () => {
    await server.client.enableKv('kvit', 2);
    const first = await server.client.kv2Write('kvit', 'app/db', { password: 'one' });
    const second = await server.client.kv2Write('kvit', 'app/db', { password: 'two' });
    expect(first.data?.version).toBe(1);
    expect(second.data?.version).toBe(2);

    const path = 'kvit/data/app/db';
    const entries = await waitForEntries(audit, (all) => entriesFor(all, path, 'response').length >= 2);
    const responses = entriesFor(entries, path, 'response');
    const requests = entriesFor(entries, path, 'request');
    expect(responses.map((e) => e.response?.data?.version)).toEqual([1, 2]);
    expect(requests).toHaveLength(2);
    for (const e of [...requests, ...responses]) {
      expect(e.request?.mount_type).toBe('kv');
      expect(e.request?.path).toBe(path);
      expect(e.error ?? '').toBe('');
    }
    expect(requests.map((e) => e.request?.operation)).toEqual(['create', 'update']);
    expect(responses.map((e) => e.request?.id)).toEqual(requests.map((e) => e.request?.id));
    // Secret values are HMAC'd in the audit log, never in clear.
    expect(JSON.stringify(entries)).not.toContain('"one"');
  });

  // Only OpenBao has the http audit device, only Vault the subscribe path to answer (as an unknown one): each
  // test exists only for its server (declared conditionally, so nothing is reported as skipped).
  if (kind === 'openbao')
    it('http audit device: one POST per entry, bearer header, no Content-Type', async () => {
      const file = entriesFor(audit(), 'kvit/data/app/db', 'response');
      await waitForEntries(
        () => receiver!.requests,
        (reqs) => reqs.length >= 4,
      );
      const posts = receiver!.requests;
      for (const post of posts) {
        expect(post.method).toBe('POST');
        expect(post.url).toBe('/ingest');
        expect(post.headers.authorization).toBe(`Bearer ${bearer}`);
        expect(post.headers['content-type']).toBeUndefined();
        // Exactly one JSON entry per POST, newline-terminated like a file line.
        expect(post.body.endsWith('\n')).toBe(true);
        expect(post.body.trim().split('\n')).toHaveLength(1);
      }
      const viaHttp = posts.map((p) => JSON.parse(p.body) as Entry);
      // The device's creation test message comes first (a request entry for sys/audit/test).
      expect(viaHttp[0]?.type).toBe('request');
      expect(viaHttp[0]?.request?.path).toBe('sys/audit/test');
      // Every entry of the file device reached the http device too (same ids, same versions).
      const httpResponses = entriesFor(viaHttp, 'kvit/data/app/db', 'response');
      expect(httpResponses.map((e) => e.response?.data?.version)).toEqual([1, 2]);
      expect(httpResponses.map((e) => e.request?.id)).toEqual(file.map((e) => e.request?.id));
    });

  if (kind === 'vault')
    it('has no event WebSocket: community Vault answers the subscribe request as an unknown path', async () => {
      const url = `${server.addr}/v1/sys/events/subscribe/kv-v2/*?json=true`;
      const plain = await fetch(url, { headers: { 'X-Vault-Token': server.token } });
      expect(plain.status).toBe(404);
      expect(await plain.text()).toContain('unsupported path');
      // The relay's own WebSocket client, as it subscribes.
      const socket = new WebSocketClient(url.replace(/^http/, 'ws'), { headers: { 'X-Vault-Token': server.token } });
      const outcome = await new Promise<string>((ok) => {
        let error = '';
        socket.on('error', (e) => (error = e.message));
        socket.on('open', () => socket.close());
        socket.on('close', () => ok(error || 'opened'));
      });
      expect(outcome).toBe('Unexpected server response: 404');
    });

  if (kind === 'vault')
    it('the event front delivers the documented kv-v2/data-write frame for a real write', async () => {
      const front = await startEventFront({ addr: server.addr, token: server.token });
      const subscription = await new VaultClient(front.addr, server.token).subscribeEvents('kv-v2/*');
      try {
        const written = await new VaultClient(front.addr, server.token).kv2Write('kvit', 'events/key', { a: 'b' });
        const event = await subscription.waitFor((e) => {
          const data = e.data as { event_type?: string; event?: { metadata?: Record<string, unknown> } } | undefined;
          return data?.event_type === 'kv-v2/data-write' && data.event?.metadata?.path === 'kvit/data/events/key';
        });
        const data = event.data as {
          event: { metadata: Record<string, unknown> };
          plugin_info: Record<string, unknown>;
        };
        expect(event.specversion).toBe('1.0');
        // Vault really spells it `datacontentype` (sic), and its CloudEvents `type` is always "*".
        expect(event.datacontentype).toBe('application/cloudevents');
        expect(event.type).toBe('*');
        expect(data.event.metadata).toMatchObject({
          modified: 'true',
          operation: 'data-write',
          data_path: 'kvit/data/events/key',
          current_version: String(written.data?.version),
        });
        expect(data.plugin_info.mount_path).toBe('kvit/');
        // A token the server does not know gets no subscription (Vault answers 403 there too).
        await expect(new VaultClient(front.addr, 'not-a-token').subscribeEvents('kv-v2/*')).rejects.toThrow(/failed/);
      } finally {
        await subscription.close();
        await front.stop();
      }
    });

  it('socket audit device over the API: JSON lines on a TCP stream', async () => {
    const sockets: Socket[] = [];
    let received = '';
    const tcp = createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined); // the device dropping its connection is not the test's failure
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    });
    await new Promise<void>((ok) => tcp.listen(0, '127.0.0.1', ok));
    const { port } = tcp.address() as { port: number };
    try {
      // On OpenBao this goes through the API thanks to unsafe_allow_api_audit_creation.
      await server.client.enableAudit('socket', 'socket', { address: `127.0.0.1:${port}`, socket_type: 'tcp' });
      const written = await server.client.kv2Write('kvit', 'socket/key', { a: 'b' });
      const lines = await waitForEntries(
        () =>
          received
            .split('\n')
            .filter((l) => l.trim() !== '')
            .map((l) => JSON.parse(l) as Entry),
        (all) => entriesFor(all, 'kvit/data/socket/key', 'response').length >= 1,
      );
      expect(entriesFor(lines, 'kvit/data/socket/key', 'response')[0]?.response?.data?.version).toBe(
        written.data?.version,
      );
      await server.client.disableAudit('socket');
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((ok) => tcp.close(() => ok()));
    }
  });

  it('KV v1 and v2 helpers: every operation, as the server answers it', async () => {
    const c = server.client;
    // v1
    await c.enableKv('kvone', 1);
    await c.kv1Write('kvone', 'svc/a', { k: 'v1' });
    await c.kv1Write('kvone', 'svc/a', { k: 'v2' });
    expect((await c.kv1Read('kvone', 'svc/a'))?.data).toEqual({ k: 'v2' });
    expect(await c.kv1List('kvone', 'svc/')).toEqual(['a']);
    await c.kv1Delete('kvone', 'svc/a');
    expect(await c.kv1Read('kvone', 'svc/a')).toBeUndefined();

    // v2: patch, read by version, list, delete, undelete, destroy, metadata
    const patched = await c.kv2Patch('kvit', 'app/db', { user: 'u' });
    expect(patched.data?.version).toBe(3);
    expect(((await c.kv2Read('kvit', 'app/db'))?.data?.data as Record<string, unknown>).user).toBe('u');
    expect(((await c.kv2Read('kvit', 'app/db', 1))?.data?.metadata as { version: number }).version).toBe(1);
    expect(await c.kv2List('kvit', 'app/')).toEqual(['db']);
    await expect(c.kv2Write('kvit', 'app/db', { x: 'y' }, { cas: 1 })).rejects.toBeInstanceOf(VaultError);
    await c.kv2Delete('kvit', 'app/db');
    expect(await c.kv2Read('kvit', 'app/db')).toBeUndefined();
    await c.kv2Undelete('kvit', 'app/db', [3]);
    expect(await c.kv2Read('kvit', 'app/db')).toBeDefined();
    await c.kv2DeleteVersions('kvit', 'app/db', [2]);
    await c.kv2Destroy('kvit', 'app/db', [1]);
    const meta = await c.kv2MetadataRead('kvit', 'app/db');
    const versions = meta?.data?.versions as Record<string, { destroyed: boolean; deletion_time: string }>;
    expect(versions['1']?.destroyed).toBe(true);
    expect(versions['2']?.deletion_time).not.toBe('');
    await c.kv2MetadataWrite('kvit', 'app/db', { max_versions: 5, custom_metadata: { owner: 'it' } });
    expect((await c.kv2MetadataRead('kvit', 'app/db'))?.data?.max_versions).toBe(5);
    await c.kv2MetadataDelete('kvit', 'app/db');
    expect(await c.kv2MetadataRead('kvit', 'app/db')).toBeUndefined();

    // The audit log has a response entry for each change, without error.
    const entries = await waitForEntries(
      audit,
      (all) => entriesFor(all, 'kvit/metadata/app/db', 'response').length >= 3,
    );
    const ops = (path: string): string[] =>
      entriesFor(entries, path, 'response').map((e) => String(e.request?.operation));
    expect(ops('kvone/svc/a')).toEqual(['create', 'update', 'read', 'delete', 'read']);
    expect(ops('kvit/delete/app/db')).toEqual(['update']);
    expect(ops('kvit/undelete/app/db')).toEqual(['update']);
    expect(ops('kvit/destroy/app/db')).toEqual(['update']);
    expect(ops('kvit/metadata/app/db')).toContain('delete');
    const v1Write = entriesFor(entries, 'kvone/svc/a', 'response')[0];
    expect(v1Write?.request?.mount_type).toBe('kv');
    expect(v1Write?.response?.data).toBeUndefined(); // KV v1 writes return no data, so no version
  });

  it('token and AppRole helpers: a least-privilege token reads but cannot write', async () => {
    const c = server.client;
    await c.kv2Write('kvit', 'team/x', { a: 'b' });
    await c.writePolicy('kvit-read', 'path "kvit/data/team/*" { capabilities = ["read"] }');
    const { roleId, secretId } = await c.createAppRole('reader', ['kvit-read']);
    const token = await c.appRoleLogin(roleId, secretId);
    const reader = c.withToken(token);
    expect(await reader.kv2Read('kvit', 'team/x')).toBeDefined();
    await expect(reader.kv2Write('kvit', 'team/x', { a: 'c' })).rejects.toMatchObject({ status: 403 });
    const child = await c.createToken({ policies: ['kvit-read'], ttl: '5m' });
    expect(await c.withToken(child.token).kv2Read('kvit', 'team/x')).toBeDefined();
  });

  it('stop() ends the server and leaves no process', async () => {
    const { pid } = server;
    await server.stop();
    expect(processGone(pid)).toBe(true);
    await expect(fetch(`${server.addr}/v1/sys/health`)).rejects.toThrow();
  });
});
