/** The watch transport of kube-api against a local HTTPS server: framing, errors, bounds and aborts. */
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeApiFor, type KubeApi, type WatchEvent } from '../../../lib/kube/kube-api.ts';
import { MAX_WATCH_LINE_BYTES } from '../../../lib/kube/kube-watch-stream.ts';
import { issueCert, writeCa } from '../../clusters/pki.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler = (_req, res) => res.end();
let server: Server;
let api: KubeApi;
/** The same server through a kubeconfig that trusts another CA: every request must fail its TLS check. */
let untrusted: KubeApi;
const seen: string[] = [];
const DEPLOYMENT = { apiVersion: 'apps/v1', kind: 'Deployment' };

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vr-watch-'));
  const ca = writeCa(dir, 'watch-test-ca');
  const serving = issueCert(dir, ca, {
    name: 'server',
    commonName: 'localhost',
    sans: ['IP:127.0.0.1'],
    usage: 'server',
  });
  server = createServer({ cert: readFileSync(serving.certFile), key: readFileSync(serving.keyFile) }, (req, res) => {
    seen.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as { port: number }).port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'c', server: url, caData: readFileSync(ca.certFile).toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'test-token-not-secret' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  api = kubeApiFor({ kubeConfig, server: url, insecureSkipTLSVerify: false }, 2_000);
  const other = writeCa(dir, 'another-ca');
  const otherConfig = new KubeConfig();
  otherConfig.loadFromOptions({
    clusters: [
      { name: 'c', server: url, caData: readFileSync(other.certFile).toString('base64'), skipTLSVerify: false },
    ],
    users: [{ name: 'u', token: 'test-token-not-secret' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  untrusted = kubeApiFor({ kubeConfig: otherConfig, server: url, insecureSkipTLSVerify: false }, 2_000);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const line = (type: string, name: string, rv: string) =>
  `${JSON.stringify({ type, object: { metadata: { name, resourceVersion: rv } } })}\n`;

describe('kube-api list-then-watch', () => {
  it('lists with the collection resourceVersion, then streams events split across chunks, bookmarks included', async () => {
    handler = (req, res) => {
      if (!req.url?.includes('watch=1'))
        return void res.end(
          JSON.stringify({ metadata: { resourceVersion: '41' }, items: [{ metadata: { name: 'a' } }] }),
        );
      res.writeHead(200, { 'content-type': 'application/json' });
      const text = line('MODIFIED', 'a', '42') + line('BOOKMARK', '', '43') + line('DELETED', 'a', '44');
      res.write(text.slice(0, 17));
      setTimeout(() => res.end(text.slice(17)), 10);
    };
    const listed = await api.listForWatch(DEPLOYMENT, 'ns', { fieldSelector: 'metadata.name=a' });
    expect(listed).toEqual({ items: [{ ...DEPLOYMENT, metadata: { name: 'a' } }], resourceVersion: '41' });
    const events: WatchEvent[] = [];
    const before = api.stats.requests;
    await api.watch(DEPLOYMENT, 'ns', {
      resourceVersion: listed.resourceVersion,
      timeoutSeconds: 30,
      fieldSelector: 'metadata.name=a',
      onEvent: (e) => events.push(e),
    });
    expect(events.map((e) => `${e.type} ${e.object.metadata?.resourceVersion}`)).toEqual([
      'MODIFIED 42',
      'BOOKMARK 43',
      'DELETED 44',
    ]);
    expect(api.stats.requests - before).toBe(1);
    expect(seen.at(-1)).toBe(
      '/apis/apps/v1/namespaces/ns/deployments?watch=1&resourceVersion=41&allowWatchBookmarks=true&timeoutSeconds=30&fieldSelector=metadata.name%3Da',
    );
  });

  it("refuses a server whose certificate the kubeconfig's CA did not sign, on every connection of the pool", async () => {
    handler = (_req, res) => res.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
    const before = seen.length;
    for (let i = 0; i < 2; i++) await expect(untrusted.listForWatch(DEPLOYMENT, 'ns')).rejects.toThrow(/certificate/);
    expect(seen.length).toBe(before);
    await expect(api.listForWatch(DEPLOYMENT, 'ns')).resolves.toMatchObject({ resourceVersion: '1' });
  });

  it('a look that needs no state older than a version asks for it NotOlderThan on the first page only', async () => {
    handler = (req, res) =>
      res.end(
        JSON.stringify({
          metadata: { resourceVersion: '52', ...(req.url?.includes('continue=') ? {} : { continue: 'next' }) },
          items: [{ metadata: { name: req.url?.includes('continue=') ? 'b' : 'a' } }],
        }),
      );
    const listed = await api.listForWatch(DEPLOYMENT, 'ns', { fieldSelector: 'metadata.name=a', notOlderThan: '50' });
    expect(listed.items.map((o) => o.metadata?.name)).toEqual(['a', 'b']);
    expect(seen.slice(-2)).toEqual([
      '/apis/apps/v1/namespaces/ns/deployments?limit=500&fieldSelector=metadata.name%3Da&resourceVersion=50&resourceVersionMatch=NotOlderThan',
      '/apis/apps/v1/namespaces/ns/deployments?limit=500&fieldSelector=metadata.name%3Da&continue=next',
    ]);
  });

  it('rejects with the code of an ERROR event (410 Gone) and of a refused watch (403)', async () => {
    handler = (_req, res) =>
      res.end(
        `${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' } })}\n`,
      );
    await expect(
      api.watch(DEPLOYMENT, 'ns', { resourceVersion: '1', timeoutSeconds: 5, onEvent: () => {} }),
    ).rejects.toSatisfy((e) => e instanceof ApiException && e.code === 410);
    handler = (_req, res) => res.writeHead(403).end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden' }));
    await expect(
      api.watch(DEPLOYMENT, 'ns', { resourceVersion: '1', timeoutSeconds: 5, onEvent: () => {} }),
    ).rejects.toSatisfy((e) => e instanceof ApiException && e.code === 403);
  });

  it('refuses a line longer than the bound, and a stream that is not JSON', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(256 * 1024, 0x61);
      let sent = 0;
      const push = () => {
        while (sent <= MAX_WATCH_LINE_BYTES + chunk.length && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', push);
        }
        res.end();
      };
      push();
    };
    await expect(
      api.watch(DEPLOYMENT, 'ns', { resourceVersion: '1', timeoutSeconds: 5, onEvent: () => {} }),
    ).rejects.toThrow(/larger than/);
    handler = (_req, res) => res.end('not json\n');
    await expect(
      api.watch(DEPLOYMENT, 'ns', { resourceVersion: '1', timeoutSeconds: 5, onEvent: () => {} }),
    ).rejects.toThrow(/not JSON/);
  });

  it('a list answer cut short is an error, never an empty list', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"metadata":{"resourceVersion":"5"},"items":[{"metadata"');
      setTimeout(() => res.destroy(), 10);
    };
    await expect(api.listForWatch(DEPLOYMENT, 'ns')).rejects.toThrow();
    handler = (_req, res) => res.end('{"kind":"Status"}');
    await expect(api.listForWatch(DEPLOYMENT, 'ns')).rejects.toThrow(/no items/);
  });

  it('ends quietly when aborted', async () => {
    handler = (_req, res) => void res.writeHead(200).write(line('ADDED', 'a', '2'));
    const stop = new AbortController();
    const events: WatchEvent[] = [];
    const watching = api.watch(DEPLOYMENT, 'ns', {
      resourceVersion: '1',
      timeoutSeconds: 5,
      signal: stop.signal,
      onEvent: (e) => (events.push(e), stop.abort()),
    });
    await expect(watching).resolves.toBeUndefined();
    expect(events).toHaveLength(1);
  });
});
