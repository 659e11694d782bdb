/**
 * Notifications from `serve` on the real test clusters. A two-wave table (gamma, then alpha; gate
 * `healthy`, onFailure halt) and three webhook-style sinks on loopback: `ok` answers 200 and checks every request's
 * HMAC signature (notification context: verifyNotification); `err` (Slack-shaped) answers 500; `hang` never answers.
 *
 * 1. `held` version 2 never becomes Ready in gamma: its rollout fails (one `rollout-failed`) and its gate halts (one
 *    `halted`), while `hang` holds a request open and `err` is retried.
 * 2. `good` version 2 then goes through both waves — gamma, then alpha — and `ok` gets one `complete`: the hanging and
 *    failing sinks, already failing, delay no restart.
 * 3. The same changes are sent again (redeliveries) and `serve` is killed and started again on the same files:
 *    `ok` still holds exactly one notification per event.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyNotification } from '../../lib/notify/sinks.ts';
import { waitFor } from '../clusters/kube-http.ts';
import { BEARER_TOKEN } from '../secrets.ts';
import { createNamespace, deleteNamespace, getWorkload, spawnServe, uniqueName, type ServeChild } from './support.ts';
import { clustersYaml, deployGoodAndHeld, kvWriteAudit, serveEnv } from './wave-fixtures.ts';

const NS = uniqueName('vr-notify');
const CLUSTERS = ['gamma', 'alpha'] as const;
const dir = mkdtempSync(join(tmpdir(), 'vault-rollout-notify-'));
const KEY = 'notify-test-hmac-key-7f3a9c';
let serve: ServeChild;
let routesFile: string;
const servers: Server[] = [];

interface Received {
  at: number;
  kind: string;
  id: string;
  event: Record<string, unknown>;
  auth: ReturnType<typeof verifyNotification>;
}
const ok: Received[] = [];
const hangArrivals: number[] = [];
const errArrivals: Array<{ at: number; text: string }> = [];

async function listen(
  handler: (req: IncomingMessage, body: Buffer, answer: (status: number) => void) => void,
): Promise<string> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(req, Buffer.concat(chunks), (status) => res.writeHead(status).end()));
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

const env = (urls: { ok: string; hang: string; err: string }) =>
  serveEnv(dir, join(dir, 'state', 'rotations.sqlite'), {
    VAULT_ROLLOUT_NOTIFY_ALLOW_LOOPBACK_HTTP: '1',
    NOTIFY_OK_URL: urls.ok,
    NOTIFY_HANG_URL: urls.hang,
    NOTIFY_ERR_URL: urls.err,
    NOTIFY_KEY: KEY,
  });
let urls: { ok: string; hang: string; err: string };

beforeAll(async () => {
  urls = {
    ok: await listen((req, body, answer) => {
      const header = (n: string) => req.headers[n] as string | undefined;
      const event = JSON.parse(body.toString()) as Record<string, unknown>;
      ok.push({
        at: Date.now(),
        kind: String(event.kind),
        id: String(event.id),
        event,
        auth: verifyNotification(KEY, header, body, Math.floor(Date.now() / 1000)),
      });
      answer(200);
    }),
    hang: await listen(() => void hangArrivals.push(Date.now())),
    err: await listen((_, body, answer) => {
      errArrivals.push({ at: Date.now(), text: body.toString() });
      answer(500);
    }),
  };
  routesFile = join(dir, 'routes.yaml');
  writeFileSync(
    routesFile,
    `clusters:
${clustersYaml(CLUSTERS)}
vault: { mounts: { secret: 2 } }
rollout:
  waves: [{ clusters: [gamma] }, { clusters: [alpha] }]
  gate: { healthy: true, timeout: 30s, pause: 1s }
  onFailure: halt
notifications:
  sinks:
    ok: { type: webhook, urlFromEnv: NOTIFY_OK_URL, secretFromEnv: NOTIFY_KEY }
    hang: { type: webhook, urlFromEnv: NOTIFY_HANG_URL, secretFromEnv: NOTIFY_KEY }
    err: { type: slack, urlFromEnv: NOTIFY_ERR_URL }
  events: [halted, complete, rollout-failed]
routes:
  - name: notify
    match: { path: "secret/notify/{app}" }
    rollout: { timeout: 6s }
    targets: [{ clusters: [gamma, alpha], namespace: ${NS}, names: [good, held], kind: Deployment, name: "{app}" }]
`,
  );
  await Promise.all(CLUSTERS.map((c) => createNamespace(c, NS)));
  // `held`: its version-2 pods never become Ready in gamma (the first wave).
  await deployGoodAndHeld(NS, CLUSTERS, 'gamma', 'secret/notify/held');
  serve = await spawnServe({
    routesFile,
    queueFile: join(dir, 'queue.sqlite'),
    listenTimeoutMs: 180_000,
    env: env(urls),
  });
}, 300_000);

afterAll(async () => {
  serve?.child.kill('SIGTERM');
  await Promise.all(
    servers.map(
      (s) =>
        new Promise((r) => {
          s.closeAllConnections();
          s.close(r);
        }),
    ),
  );
  await Promise.all(CLUSTERS.map((c) => deleteNamespace(c, NS)));
});

/** `again`: the same write seen again under another request id (a second feed, a replayed log): a new queue message, the same rotation. */
const auditLine = (app: string, version: number, again = '') =>
  kvWriteAudit(`notify-${app}-${version}${again}`, `secret/notify/${app}`, version);
const post = async (body: string) => {
  const res = await fetch(`http://127.0.0.1:${serve.port}/v1/vault/audit`, {
    method: 'POST',
    body,
    headers: { authorization: `Bearer ${BEARER_TOKEN}` },
  });
  expect(res.status).toBe(202);
};
/** Whether vault-rollout restarted the workload for `version` (its restart record names the path). */
async function restarted(c: string, name: string): Promise<boolean> {
  const w = (await getWorkload(c, NS, 'Deployment', name)) as {
    spec: { template: { metadata?: { annotations?: Record<string, string> } } };
  };
  return (w.spec.template.metadata?.annotations?.['vault-rollout.io/versions'] ?? '').includes(`secret/notify/${name}`);
}
/** Polls until the workload shows its restart; resolves with when it was first seen. */
async function seenRestarted(c: string, name: string): Promise<number> {
  return waitFor(async () => ((await restarted(c, name)) ? Date.now() : undefined), {
    timeoutMs: 110_000,
    intervalMs: 100,
    what: `${name} restarted in ${c}`,
  });
}
const kinds = () => ok.map((r) => r.kind).sort();

describe('notifications from serve', () => {
  it('one signed notification per event through failing sinks, redeliveries and a restart; no restart waits for a sink', async () => {
    // 1. A halted rotation.
    await post(`${auditLine('held', 2)}\n`);
    await waitFor(async () => (kinds().includes('halted') && kinds().includes('rollout-failed') ? true : undefined), {
      timeoutMs: 110_000,
      intervalMs: 250,
      what: 'halted and rollout-failed at the ok receiver',
    });
    expect(hangArrivals.length).toBeGreaterThanOrEqual(1);
    await waitFor(async () => (errArrivals.length >= 2 ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: 'the failing sink retried',
    });
    const firstHang = hangArrivals[0] ?? 0;
    expect(await restarted('alpha', 'held')).toBe(false);

    // 2. A completed rotation while the hanging and failing sinks are still failing.
    const posted = Date.now();
    const errsBefore = errArrivals.length;
    const seen = Promise.all([seenRestarted('gamma', 'good'), seenRestarted('alpha', 'good')]);
    await post(`${auditLine('good', 2)}\n`);
    const [gammaAt, alphaAt] = await seen;
    await waitFor(async () => (kinds().includes('complete') ? true : undefined), {
      timeoutMs: 110_000,
      intervalMs: 250,
      what: 'complete at the ok receiver',
    });
    const complete = ok.find((r) => r.kind === 'complete');
    // Ordering, not durations: the hanging sink was hanging (and the failing one failing) before this rotation
    // started; its waves still ran in order, gamma then alpha, and then the completion reached the working sink.
    expect(firstHang).toBeLessThan(posted);
    expect(gammaAt).toBeLessThan(alphaAt);
    expect(alphaAt).toBeLessThanOrEqual(complete?.at ?? 0);
    // The failing sink kept being tried (and refusing) while this rotation ran, and the halted rotation stayed halted.
    await waitFor(
      async () => (errArrivals.length > errsBefore && errArrivals.some((a) => a.at >= posted) ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 250, what: 'the failing sink tried again after the second rotation started' },
    );
    expect(await restarted('alpha', 'held')).toBe(false);
    expect(complete?.event).toMatchObject({
      route: 'notify',
      clusters: ['gamma', 'alpha'],
      secrets: ['secret/notify/good version 2'],
    });

    // 3. Redeliveries, a kill -9 and a restart on the same files, the same changes again.
    // Other request ids: not dropped by the queue's 5-minute deduplication, so the worker works them again.
    // One request each: changes of one request form one rotation, and good with held would be another (halted) one.
    await post(`${auditLine('good', 2, '-again')}\n`);
    await post(`${auditLine('held', 2, '-again')}\n`);
    await new Promise((r) => setTimeout(r, 5000));
    serve.child.kill('SIGKILL');
    await new Promise((r) => serve.child.once('exit', r));
    // As if the queue's 5-minute deduplication window had passed (a reconcile run, a feed replayed later): the same
    // changes are queued and worked again — the worker sees the rotation finish again and emits its events again.
    const queueDb = new DatabaseSync(join(dir, 'queue.sqlite'));
    queueDb.exec('DELETE FROM dedup');
    queueDb.close();
    serve = await spawnServe({
      routesFile,
      queueFile: join(dir, 'queue.sqlite'),
      listenTimeoutMs: 180_000,
      env: env(urls),
    });
    await post(`${auditLine('good', 2, '-after-restart')}\n`);
    await post(`${auditLine('held', 2, '-after-restart')}\n`);
    // Longer than a delivery's lease (30 s): anything the killed serve had taken is retaken and retried by now.
    await new Promise((r) => setTimeout(r, 40_000));

    expect(kinds()).toEqual(['complete', 'halted', 'rollout-failed']);
    expect(new Set(ok.map((r) => r.id)).size).toBe(3);
    for (const r of ok) expect(r.auth).toEqual({ ok: true });
    expect(ok.find((r) => r.kind === 'halted')?.event).toMatchObject({
      wave: 1,
      waves: 2,
      cluster: 'gamma',
      workload: { namespace: NS, kind: 'Deployment', name: 'held' },
      notRestarted: ['alpha'],
    });
    expect(ok.find((r) => r.kind === 'rollout-failed')?.event).toMatchObject({
      cluster: 'gamma',
      workload: { name: 'held' },
    });
    // No secret in any message: not the HMAC key, not the bearer token, not a sink URL.
    const everything = JSON.stringify(ok.map((r) => r.event)) + errArrivals.map((e) => e.text).join('');
    for (const s of [KEY, BEARER_TOKEN, urls.ok, urls.hang, urls.err]) expect(everything).not.toContain(s);
    // The failing sink got Slack-shaped bodies, retried with backoff.
    expect(JSON.parse(errArrivals[0]?.text ?? '{}')).toHaveProperty('blocks');
  }, 420_000);
});
