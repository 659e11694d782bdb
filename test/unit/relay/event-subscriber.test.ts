import { afterEach, describe, expect, it } from 'vitest';
import { EventSubscriber, subscribeUrl } from '../../../lib/relay/event-subscriber.ts';
import { HttpBatchSender } from '../../../lib/relay/http-sender.ts';
import { startRelay } from '../../../lib/relay/relay.ts';
import { memoryLog } from '../../../lib/kernel/log.ts';
import { staticTokenSource, type VaultTokenSource } from '../../../lib/vault/vault-auth.ts';
import { kvEvent, startFakeVault, type FakeVault } from './fake-vault.ts';
import { fastSleep, SECRET, startFunctionServer, temporaryDir, waitFor } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function vault(options: Parameters<typeof startFakeVault>[0] = {}): Promise<FakeVault> {
  const v = await startFakeVault(options);
  cleanups.push(() => v.close());
  return v;
}

function subscriber(vaultAddr: string, options: Partial<ConstructorParameters<typeof EventSubscriber>[0]> = {}) {
  const messages: string[] = [];
  const log = memoryLog();
  const s = new EventSubscriber({
    vaultAddr,
    eventType: 'kv-v2/*',
    auth: staticTokenSource('good-token'),
    onMessage: (m) => messages.push(m),
    log,
    sleep: fastSleep().sleep,
    reconnectBaseMs: 1,
    ...options,
  });
  cleanups.push(() => s.stop());
  return { s, messages, log };
}

describe('subscribeUrl', () => {
  it('builds the WebSocket URL with json=true, repeated namespaces and the filter', () => {
    expect(subscribeUrl('https://vault:8200/', 'kv-v2/*', ['a', 'b/c'], 'data_path == "secret/data/x"')).toBe(
      'wss://vault:8200/v1/sys/events/subscribe/kv-v2/*?json=true&namespaces=a&namespaces=b%2Fc&filter=data_path+%3D%3D+%22secret%2Fdata%2Fx%22',
    );
    expect(subscribeUrl('http://127.0.0.1:8200', 'kv-v1/*')).toBe(
      'ws://127.0.0.1:8200/v1/sys/events/subscribe/kv-v1/*?json=true',
    );
  });
});

describe('EventSubscriber', () => {
  it('subscribes with the X-Vault-Token header and hands on each message', async () => {
    const v = await vault({ tokens: new Set(['good-token']) });
    const { s, messages } = subscriber(v.url, { namespaces: ['team-a'], vaultNamespace: 'root-ns' });
    s.start();
    await waitFor(() => v.sockets.length === 1);
    expect(v.upgrades[0]).toEqual({
      url: '/v1/sys/events/subscribe/kv-v2/*?json=true&namespaces=team-a',
      token: 'good-token',
      namespace: 'root-ns',
    });
    v.sockets[0]?.send(kvEvent(1));
    v.sockets[0]?.send(kvEvent(2));
    await waitFor(() => messages.length === 2);
    expect(JSON.parse(messages[1] as string)).toMatchObject({ id: 'event-2' });
  });

  it('follows a 307 from a standby node to the active node, keeping the token', async () => {
    const active = await vault({ tokens: new Set(['good-token']) });
    const standby = await vault({ redirectTo: active.url });
    const { s, log } = subscriber(standby.url);
    s.start();
    await waitFor(() => active.sockets.length === 1);
    expect(standby.upgrades).toHaveLength(1);
    expect(active.upgrades[0]?.token).toBe('good-token');
    expect(log.lines.some((l) => l.message.startsWith('following a redirect'))).toBe(true);
  });

  it('reconnects after the server drops the connection', async () => {
    const v = await vault();
    const { s, messages } = subscriber(v.url);
    s.start();
    await waitFor(() => v.sockets.length === 1);
    v.sockets[0]?.terminate();
    await waitFor(() => v.sockets.length === 2);
    v.sockets[1]?.send(kvEvent(3));
    await waitFor(() => messages.length === 1);
    expect(s.connections).toBe(2);
  });

  it('pings; a server that answers terminates nothing, one that does not answer gets reconnected', async () => {
    // A pong has one interval to arrive, and the fake Vault answers from this same event loop: at 20 ms a busy machine
    // (the cold run's lane c) stalled the loop past the deadline once and the healthy connection was reopened.
    const healthy = await vault();
    const a = subscriber(healthy.url, { pingIntervalMs: 250 });
    a.s.start();
    await waitFor(() => healthy.pings >= 3, 5000, 'three answered pings');
    expect(healthy.sockets).toHaveLength(1);

    const silent = await vault({ autoPong: false });
    const b = subscriber(silent.url, { pingIntervalMs: 20 });
    b.s.start();
    await waitFor(() => silent.sockets.length >= 2, 3000, 'a reconnection after a missing pong');
    expect(b.log.lines.some((l) => l.message.startsWith('no pong'))).toBe(true);
  });

  it('on 403, says so and asks the token source for a new token', async () => {
    const v = await vault({ tokens: new Set(['other']) });
    let invalidated = 0;
    const auth: VaultTokenSource = {
      token: () => Promise.resolve('bad'),
      invalidate: () => void (invalidated += 1),
      stop: () => undefined,
    };
    const { s, log } = subscriber(v.url, { auth });
    s.start();
    await waitFor(() => invalidated >= 2);
    expect(log.lines.find((l) => l.level === 'error')?.fields).toMatchObject({ status: 403 });
  });

  it('keeps trying while no token can be had', async () => {
    const v = await vault();
    let asked = 0;
    const auth: VaultTokenSource = {
      token: () => (asked++ < 2 ? Promise.reject(new Error('login failed')) : Promise.resolve('t')),
      invalidate: () => undefined,
      stop: () => undefined,
    };
    const { s } = subscriber(v.url, { auth });
    s.start();
    await waitFor(() => v.sockets.length === 1);
  });
});

describe('relay with event subscriptions', () => {
  it('posts events, one compact JSON line each, to /v1/vault/events, one subscription per event type; non-JSON is dropped', async () => {
    const v = await vault({ tokens: new Set(['good-token']) });
    const fn = await startFunctionServer();
    cleanups.push(() => fn.close());
    const tmp = temporaryDir();
    cleanups.push(() => tmp.remove());
    const relay = await startRelay({
      spoolDir: tmp.dir,
      sender: new HttpBatchSender({ baseUrl: fn.url, hmacSecret: SECRET }),
      log: memoryLog(),
      batch: { maxRecords: 500, maxBytes: 1 << 20, maxDelayMs: 20 },
      events: {
        vaultAddr: v.url,
        eventTypes: ['kv-v1/*', 'kv-v2/*'],
        auth: staticTokenSource('good-token'),
        filter: 'operation == "data-write"',
      },
    });
    cleanups.push(() => relay.stop(0));
    await waitFor(() => v.sockets.length === 2);
    expect(v.upgrades.map((u) => decodeURIComponent(u.url)).sort()).toEqual([
      '/v1/sys/events/subscribe/kv-v1/*?json=true&filter=operation+==+"data-write"',
      '/v1/sys/events/subscribe/kv-v2/*?json=true&filter=operation+==+"data-write"',
    ]);
    v.sockets[0]?.send(kvEvent(1));
    v.sockets[0]?.send('not json');
    await waitFor(() => relay.counters.delivered === 1 && relay.counters.dropped('invalid-event') === 1);
    expect(fn.requests[0]?.path).toBe('/v1/vault/events');
    expect(fn.requests[0]?.body).toBe(`${JSON.stringify(JSON.parse(kvEvent(1)))}\n`);
    expect(fn.requests[0]?.auth.ok).toBe(true);
  });
});
